//! # sim — Shoal's deterministic cluster simulator
//!
//! A single-threaded discrete-event world drives one `shoal_core::Driver` per simulated node
//! (the same drain loop production uses), over a network model with latency, long tails,
//! connection breaks and partitions, with node crashes and restarts, clock drift, a membership
//! oracle (keep-majority downing, or auto-down as a negative control), entities that stop slowly
//! or ignore stops, and clients sending sequenced messages. After every event the checker
//! verifies Shoal's guarantees against true time; at the end it checks loss, liveness after
//! healing, and the coordinator's table.
//!
//! Everything derives from one seed: `run(Options::from_seed(seed))` is reproducible exactly,
//! and its `Report::digest` proves it.
//!
//! ## The layering
//!
//! `simulator` is the orchestrator: it owns the components (network `net`, `connections`,
//! `nodes`, `nemesis`, `workload`, `entity_host`, `remembering`, `check`, ...) and drives them;
//! no component imports it, and only `run` (the entry point every tool goes through) does.
//! The tools (`explain`, `failover`, `minimize`, `speed`, `picture`) sit above `run`; setup
//! (`options`, `plan`, `schedule`) below the components; `scripted` is the fixed-schedule
//! cluster the core's scenario tests use. `passivation` stands apart from the cluster: it
//! replays access traces against the core's passivation policies and the offline optimal
//! (`sim passivation`). The workspace test `tests/tests/layering.rs` fails on an import circle
//! between these modules, or on a module other than `run` importing `simulator`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod asks;
mod bounds;
mod calendar;
mod check;
mod clock;
mod connections;
mod delivering;
mod entity_host;
mod events;
mod explain;
mod failover;
mod idleness;
mod leasing;
mod minimize;
mod nemesis;
mod net;
mod nodes;
mod options;
mod oracle;
pub mod passivation;
mod persisting;
mod picture;
mod plan;
mod quad_heap;
mod reach;
mod remembering;
mod report;
mod requests;
mod rng;
mod run;
mod schedule;
pub mod scripted;
mod simulator;
mod speed;
mod stall;
mod store;
mod survival;
mod trace;
mod unanswered;
mod workload;

pub use check::{Property, Violation};
pub use explain::{Explanation, explain, trace_dir};
pub use failover::{Failover, Recovery, measure as measure_failover};
pub use minimize::{Minimized, minimize};
pub use options::{
    ClusterOptions, Delivery, Direct, DirectFault, Downing, ExplainQueries, Family, Faults,
    HostOptions, Lease, Mailbox, MembershipMode, NetworkOptions, Options, Persist, Remember,
    SlowLink, TightTimers, WorkloadOptions,
};
pub use picture::render_html;
pub use report::{Outcome, Report};
pub use run::{run, run_recorded, run_traced};
pub use schedule::{Act, Action, Schedule, ScheduleError};
pub use speed::{Speed, measure_speed, steady_options};
pub use trace::{TraceEvent, TraceLine, ViewEntry, read_trace, write_trace};

/// Parses a seed written in decimal, in hex (`0x…`), or as a git commit hash (its first 16 hex
/// digits), as users paste them.
pub fn parse_seed(text: &str) -> Option<u64> {
    let text = text.trim();
    if let Some(hex) = text.strip_prefix("0x") {
        return u64::from_str_radix(hex, 16).ok();
    }
    if let Ok(n) = text.parse::<u64>() {
        return Some(n);
    }
    if text.len() >= 7 && text.chars().all(|c| c.is_ascii_hexdigit()) {
        return u64::from_str_radix(&text[..text.len().min(16)], 16).ok();
    }
    None
}
