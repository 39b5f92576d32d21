//! Replays every committed seed (`corpus/<target>/seed-*`) and every regression input
//! (`regressions/<target>/`: crashes the fuzzer found, kept after their fix) through the same
//! harness the fuzz target runs, on stable Rust. A crash artifact becomes a regression test by
//! copying it into `regressions/<target>/`.

use std::fs;
use std::path::Path;

// As in the `decode_frame` binary, so its allocation bound is checked here too.
#[global_allocator]
static ALLOCATOR: shoal_fuzz::peak_alloc::PeakAlloc = shoal_fuzz::peak_alloc::PeakAlloc;

/// Runs `target` on every file under `corpus/<target>` and `regressions/<target>`; returns how
/// many ran.
fn replay(target: &str) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut ran = 0;
    for dir in ["corpus", "regressions"] {
        let Ok(entries) = fs::read_dir(root.join(dir).join(target)) else {
            continue;
        };
        // In corpus/, only the committed seeds: the rest is what local fuzzing added.
        let mut files: Vec<_> = entries
            .map(|e| e.expect("readable dir").path())
            .filter(|p| {
                dir == "regressions"
                    || p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("seed-"))
            })
            .collect();
        files.sort();
        for file in files {
            let data = fs::read(&file).expect("readable input");
            eprintln!("{target}: {}", file.display());
            shoal_fuzz::run(target, &data);
            ran += 1;
        }
    }
    ran
}

#[test]
fn decode_frame_inputs_pass() {
    assert!(
        replay("decode_frame") > 0,
        "decode_frame has no seed corpus"
    );
}

#[test]
fn node_inputs_pass() {
    assert!(replay("node_inputs") > 0, "node_inputs has no seed corpus");
}

#[test]
fn cluster_schedule_inputs_pass() {
    assert!(
        replay("cluster_schedule") > 0,
        "cluster_schedule has no seed corpus"
    );
}

#[test]
fn allocation_inputs_pass() {
    assert!(replay("allocation") > 0, "allocation has no seed corpus");
}

#[test]
fn handshake_inputs_pass() {
    assert!(replay("handshake") > 0, "handshake has no seed corpus");
}

#[test]
fn every_target_is_listed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for target in shoal_fuzz::TARGETS {
        assert!(
            root.join("fuzz_targets")
                .join(format!("{target}.rs"))
                .exists(),
            "{target} has no binary"
        );
    }
}

#[test]
fn allocation_peak_is_measured() {
    shoal_fuzz::peak_alloc::PeakAlloc::reset_peak();
    let before = shoal_fuzz::peak_alloc::PeakAlloc::live();
    let v = vec![0u8; 1 << 20];
    assert!(shoal_fuzz::peak_alloc::PeakAlloc::held_since(before) >= v.len());
    drop(v);
    // Another thread's allocations are not this thread's peak.
    shoal_fuzz::peak_alloc::PeakAlloc::reset_peak();
    let before = shoal_fuzz::peak_alloc::PeakAlloc::live();
    let elsewhere = std::thread::spawn(|| vec![0u8; 1 << 20].len()).join();
    assert_eq!(elsewhere.ok(), Some(1 << 20));
    assert!(shoal_fuzz::peak_alloc::PeakAlloc::held_since(before) < 1 << 20);
    assert!(shoal_fuzz::peak_alloc::PeakAlloc::is_installed());
}
