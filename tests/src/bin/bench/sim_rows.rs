//! The simulator's speed: simulated events per wall second and simulated seconds per wall
//! second at 5, 20, 100 and 1,000 nodes, against the 5-node run of the same workload.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use sim::{Speed, measure_speed};

use crate::table::{Row, Target};

/// Simulated duration of the steady workload at each size: shorter for larger clusters, whose
/// runs are slow (a 1,000-node run mostly forms and settles its cluster).
fn duration(nodes: u64, quick: bool) -> Duration {
    match (nodes, quick) {
        (..=20, false) => Duration::from_secs(120),
        (..=100, false) => Duration::from_secs(60),
        (_, false) => Duration::from_secs(5),
        (..=20, true) => Duration::from_secs(30),
        (_, true) => Duration::from_secs(10),
    }
}

/// Seconds since the first call (the simulator reads no clock; its speed is timed here).
fn wall_seconds() -> f64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs_f64()
}

/// The sizes measured.
pub(crate) fn sizes(quick: bool) -> &'static [u64] {
    if quick {
        &[5, 20, 100]
    } else {
        &[5, 20, 100, 1000]
    }
}

/// Measures every size (the fastest of `runs`), smallest first.
pub(crate) fn speeds(quick: bool) -> Vec<Speed> {
    let runs = if quick { 1 } else { 3 };
    sizes(quick)
        .iter()
        .map(|&nodes| {
            let runs = if nodes >= 1000 { 1 } else { runs };
            measure_speed(nodes, duration(nodes, quick), runs, wall_seconds)
        })
        .collect()
}

/// One row per size, each against the 5-node run.
pub(crate) fn rows(speeds: &[Speed]) -> Vec<Row> {
    let Some(base) = speeds.first() else {
        return Vec::new();
    };
    let mut rows = Vec::new();
    for s in speeds {
        rows.push(Row::ratio(
            &format!(
                "simulator: {} nodes, steady traffic ({:.0} s simulated in {:.2} s)",
                s.nodes, s.simulated, s.wall
            ),
            format!(
                "{:.3} M events/s, {} real time",
                s.events_per_second() / 1e6,
                times(s.acceleration())
            ),
            format!(
                "{} nodes: {:.2} M events/s, {}",
                base.nodes,
                base.events_per_second() / 1e6,
                times(base.acceleration())
            ),
            s.events_per_second() / base.events_per_second(),
            Target::None,
        ));
    }
    rows
}

/// "1822×", or "0.42×" below ten.
fn times(x: f64) -> String {
    if x < 10.0 {
        format!("{x:.2}×")
    } else {
        format!("{x:.0}×")
    }
}
