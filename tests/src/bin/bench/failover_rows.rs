//! Failover per downing strategy, on the simulator with Akka's timers (1 s heartbeats, 3 s
//! acceptable pause, 20 s stable-after, 20 s removal margin) and the same detector for every
//! row: a node crashes on a five-node cluster under steady traffic; the time until every shard
//! it served serves again elsewhere, with keep-majority as the baseline. Virtual time: the
//! figures do not depend on this machine's load.

use std::time::Duration;

use sim::{Failover, Recovery};

use crate::table::{Row, Target};

pub(crate) fn rows() -> Vec<Row> {
    rows_of(&sim::measure_failover())
}

fn rows_of(failover: &Failover) -> Vec<Row> {
    let base = failover.margin.crash_to_serving.1;
    let row = |name: &str, recovery: &Recovery| {
        let (median, slowest) = recovery.crash_to_serving;
        Row::ratio(
            &format!("failover: a node crashes; its shards serve again elsewhere, {name}"),
            format!("{} (median {})", secs(slowest), secs(median)),
            format!("keep-majority, 20 s removal margin {}", secs(base)),
            slowest.as_secs_f64() / base.as_secs_f64(),
            Target::None,
        )
    };
    vec![
        row("keep-majority", &failover.margin),
        row("lease-majority", &failover.lease_majority),
        row("shard leases (10 s ttl, no margin)", &failover.leases),
    ]
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}
