//! Headless Chromium for the tests that check a page in a real browser: the simulator's
//! picture of a run, and the runtime's management page (which includes this file by path).
//! Without Chromium a check is skipped, unless `SHOAL_REQUIRE_BROWSER` is set (`.ci/run` sets
//! it after installing Chromium), which makes a missing browser a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The Chromium binary, if this machine has one; `None` (with a message) only when a missing
/// browser is allowed.
pub(crate) fn chromium() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("CHROMIUM").map(PathBuf::from),
        Some(PathBuf::from("/usr/bin/chromium")),
        Some(PathBuf::from("/usr/bin/chromium-browser")),
    ];
    let found = candidates.into_iter().flatten().find(|p| p.exists());
    if found.is_none() {
        assert!(
            std::env::var_os("SHOAL_REQUIRE_BROWSER").is_none(),
            "SHOAL_REQUIRE_BROWSER is set but no Chromium was found"
        );
        eprintln!("no Chromium on this machine: the browser check is skipped");
    }
    found
}

/// Renders `target` (a `file://` page or a loopback URL) in headless Chromium into `shot`
/// (PNG), with a fresh profile. Waiting for a browser process is a test host's business (the
/// simulation itself never sleeps), which is why the determinism ban on sleeping is lifted
/// here alone.
#[allow(clippy::disallowed_methods)]
pub(crate) fn screenshot(browser: &Path, target: &str, shot: &Path, profile: &Path) {
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--window-size=1260,900",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(target)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("Chromium starts");
    // Bounded (1,200 polls 100 ms apart): a browser that hangs fails the test, not stalls it.
    for _ in 0..1_200 {
        if let Some(status) = child.try_wait().expect("Chromium's status") {
            assert!(status.success(), "Chromium failed: {status}");
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = child.kill();
    panic!("Chromium did not finish within 120 s");
}

/// The screenshot as (width, height, RGB bytes).
pub(crate) fn decode(shot: &Path) -> (usize, usize, Vec<u8>) {
    let file = std::fs::File::open(shot).expect("screenshot written");
    let mut decoder = png::Decoder::new(std::io::BufReader::new(file));
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut buf).expect("a frame");
    let channels = info.color_type.samples();
    let rgb = buf[..info.buffer_size()]
        .chunks(channels)
        .flat_map(|p| p[..3].to_vec())
        .collect();
    (info.width as usize, info.height as usize, rgb)
}
