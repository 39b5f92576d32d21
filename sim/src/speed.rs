//! How fast the simulator runs: steady traffic without faults on `n` nodes, in simulated events
//! per wall second and simulated seconds per wall second. Shared by `sim bench` and the
//! project's bench (`shoal-tests --bin bench`).

use std::time::Duration;

use crate::options::{
    ClusterOptions, Family, HostOptions, NetworkOptions, Options, WorkloadOptions,
};
use crate::run::run;

/// One speed measurement.
#[derive(Clone, Copy, Debug)]
pub struct Speed {
    /// Nodes simulated.
    pub nodes: u64,
    /// Simulated events processed.
    pub events: u64,
    /// Wall seconds taken (the fastest of the runs).
    pub wall: f64,
    /// Simulated seconds covered.
    pub simulated: f64,
}

impl Speed {
    /// Simulated events per wall second.
    pub fn events_per_second(&self) -> f64 {
        self.events as f64 / self.wall
    }

    /// Simulated seconds per wall second.
    pub fn acceleration(&self) -> f64 {
        self.simulated / self.wall
    }
}

/// The steady workload on `nodes` nodes for `duration` of simulated time: 2,000 entities over
/// 200 shards, a message every 2 ms, no faults, no drift.
pub fn steady_options(nodes: u64, duration: Duration) -> Options {
    let steady = Options::for_family(1, Family::Steady);
    Options {
        duration,
        cluster: ClusterOptions {
            nodes,
            shards: 200,
            drift_ppm: 0,
            ..steady.cluster.clone()
        },
        network: NetworkOptions {
            slow_link: None,
            ..steady.network.clone()
        },
        workload: WorkloadOptions {
            entities: 2_000,
            message_every: Duration::from_millis(2),
            ..steady.workload.clone()
        },
        host: HostOptions {
            slow_stop: Duration::from_millis(10),
            ..steady.host.clone()
        },
        ..steady
    }
}

/// Runs the steady workload `runs` times and keeps the fastest (the machine is shared; the
/// slower runs measure its other tenants). `wall_seconds` reads the host's clock: the
/// simulator itself never does, so the caller (a command line, a bench) supplies it.
pub fn measure_speed(
    nodes: u64,
    duration: Duration,
    runs: usize,
    wall_seconds: fn() -> f64,
) -> Speed {
    let options = steady_options(nodes, duration);
    let mut wall = f64::INFINITY;
    let mut report = None;
    for _ in 0..runs.max(1) {
        let started = wall_seconds();
        report = Some(run(options.clone()));
        wall = wall.min(wall_seconds() - started);
    }
    let report = report.expect("ran at least once");
    Speed {
        nodes,
        events: report.events,
        wall,
        simulated: report.simulated.as_secs_f64(),
    }
}
