//! The picture of a failing run, checked in a real browser: headless Chromium renders the page
//! and its screenshot must show the timeline and the violation's red line where it happened.
//!
//! Without Chromium the browser half is skipped with a message, unless `SHOAL_REQUIRE_BROWSER`
//! is set (`.ci/run` sets it after installing Chromium), which makes a missing browser a failure.

mod browser;

use browser::{chromium, decode, screenshot};
use sim::{Downing, Family, Options, Outcome, render_html, run_recorded};

/// A run that must fail: auto-down splits the cluster on a partition (the negative control).
fn failing_run() -> (sim::Report, Vec<sim::TraceLine>) {
    let mut options = Options::for_family(1, Family::Partitions);
    options.cluster.downing = Downing::Auto;
    let (report, trace) = run_recorded(options);
    assert_eq!(report.outcome, Outcome::Failed, "{report}");
    (report, trace)
}

#[test]
fn the_page_of_a_failing_run_marks_its_violation() {
    let (report, trace) = failing_run();
    let page = render_html(&report, &trace);
    let first = &report.violations[0];
    assert!(page.starts_with("<!DOCTYPE html>"));
    // Self-contained: nothing is fetched.
    assert!(!page.contains("src=") && !page.contains("href="));
    assert_eq!(page.matches("id=\"violation\"").count(), 1);
    let marker = &page[page.find("id=\"violation\"").expect("marked")..];
    assert!(marker.contains(&format!("{:?} {}", first.property, first.subject)));
    // One row per node the run used, each with its status bands.
    for node in 1..=report.options.cluster.nodes {
        assert!(page.contains(&format!(">n{node}</text>")), "row of n{node}");
    }
    assert!(
        page.contains("cut off from"),
        "the partition is drawn as a band"
    );
    assert!(page.contains("deliveries/s"));
}

#[test]
fn the_reproduce_line_is_a_command_only_when_the_command_line_can_rebuild_the_run() {
    let (report, _) = failing_run();
    let line = report.reproduce();
    assert!(
        line.starts_with("cargo run -p sim --release -- replay 1"),
        "{line}"
    );
    assert!(line.ends_with(" --downing auto"), "{line}");
    // A size the seed does not draw cannot come back from the command line.
    let mut options = report.options;
    options.cluster.nodes += 1;
    let resized = sim::run(options);
    assert!(
        resized.reproduce().starts_with("rerun the test"),
        "{resized}"
    );
}

#[test]
fn headless_chromium_shows_the_violation_line() {
    let Some(browser) = chromium() else {
        return;
    };
    let (report, trace) = failing_run();
    let dir = std::env::temp_dir().join(format!("shoal-picture-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let page = dir.join("run.html");
    std::fs::write(&page, render_html(&report, &trace)).expect("page written");
    let shot = dir.join("run.png");
    let target = format!("file://{}", page.display());
    screenshot(&browser, &target, &shot, &dir.join("profile"));
    let (width, height, pixels) = decode(&shot);
    let _ = std::fs::remove_dir_all(&dir);

    // The violation is a 2-pixel red (#e00) line through the timeline and the chart: the
    // longest vertical run of that red must be far taller than anything else red on the page.
    let red = |x: usize, y: usize| {
        let p = &pixels[(y * width + x) * 3..][..3];
        p[0] > 200 && p[1] < 40 && p[2] < 40
    };
    let (mut best_x, mut best_run) = (0, 0);
    for x in 0..width {
        let mut run = 0;
        for y in 0..height {
            run = if red(x, y) { run + 1 } else { 0 };
            if run > best_run {
                (best_x, best_run) = (x, run);
            }
        }
    }
    assert!(
        best_run > 200,
        "no violation line in the screenshot (longest red run {best_run} px)"
    );
    // It stands where the violation happened: the same fraction of the time axis (the page
    // has an 16 px margin; the axis runs from 70 to 1180 px of the 1200 px drawing).
    let end = trace
        .iter()
        .map(|l| l.t_ns)
        .max()
        .unwrap_or(1)
        .max(u64::try_from(report.simulated.as_nanos()).expect("fits"));
    let expected = 16.0 + 70.0 + 1110.0 * report.violations[0].at.as_nanos() as f64 / end as f64;
    assert!(
        (best_x as f64 - expected).abs() <= 3.0,
        "violation line at x={best_x}, expected {expected:.0}"
    );
    // The timeline rendered: the Up status colour (#a9dfa0) covers a good part of the page.
    let up = (0..width * height)
        .filter(|i| {
            let p = &pixels[i * 3..][..3];
            p[0].abs_diff(0xa9) < 8 && p[1].abs_diff(0xdf) < 8 && p[2].abs_diff(0xa0) < 8
        })
        .count();
    assert!(up > width * 40, "the status bands are missing ({up} px)");
}
