//! A node process of the demo: a counter entity that journals every start, stop and
//! delivery, and the node that hosts it. The harness starts one of these per node (the example
//! re-executing itself with `member`), reads the address it listens on from its first line of
//! output, and stops it with SIGKILL, SIGSTOP/SIGCONT or SIGTERM (a graceful leave).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use shoal::{
    Downing, EntityContext, EntityTypeConfig, FailureDetectorSettings, MembershipSettings,
    NodeBuilder, NodeEvent, ShardingSettings,
};

use crate::journal::{Fact, Journal, now_micros};

/// The cluster's name and secret (loopback only).
pub(crate) const CLUSTER: &str = "shoal-demo";
pub(crate) const SECRET: &str = "shoal demo secret";
/// The entity type.
pub(crate) const COUNTER: &str = "counter";

/// What a counter is sent.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub(crate) enum CounterOp {
    /// Add one; `seq` numbers the increments of `sender` to this counter from 1.
    Increment { sender: u32, seq: u64 },
    /// Answer the total.
    Get,
}

/// A counter that journals what happens to it.
pub(crate) struct Counter {
    entity: u32,
    node: u32,
    total: u64,
    journal: Option<Journal>,
}

impl shoal::Entity for Counter {
    type Message = CounterOp;
    type Reply = u64;

    async fn handle(&mut self, _ctx: &mut EntityContext, op: CounterOp) -> u64 {
        if let CounterOp::Increment { sender, seq } = op {
            self.total += 1;
            if let Some(journal) = &self.journal {
                journal.record(&Fact::Delivered {
                    entity: self.entity,
                    node: self.node,
                    sender,
                    seq,
                });
            }
        }
        self.total
    }

    async fn on_stop(&mut self, _ctx: &mut EntityContext) {
        if let Some(journal) = &self.journal {
            journal.record(&Fact::Stopped {
                entity: self.entity,
                node: self.node,
                at: now_micros(),
            });
        }
    }
}

/// The entity id of counter `n`.
pub(crate) fn entity_id(n: u32) -> String {
    format!("e{n}")
}

/// Membership for a demo on one machine: failures noticed within about 2 s, downing after
/// 5 s more of stable unreachability (keep-majority).
pub(crate) fn membership() -> MembershipSettings {
    let mut m = MembershipSettings::new(Vec::<shoal_core::SeedNode>::new());
    m.gossip_interval = Duration::from_millis(200);
    m.heartbeat_interval = Duration::from_millis(250);
    m.failure_detector = FailureDetectorSettings {
        acceptable_heartbeat_pause: Duration::from_secs(2),
        first_heartbeat_estimate: Duration::from_millis(250),
        ..FailureDetectorSettings::default()
    };
    m.downing = Downing::KeepMajority {
        stable_after: Duration::from_secs(5),
    };
    m
}

/// Sharding settings for the demo (Akka's, with a quicker rebalance).
pub(crate) fn settings() -> ShardingSettings {
    ShardingSettings {
        rebalance_interval: Duration::from_secs(2),
        ..ShardingSettings::default()
    }
}

/// Runs node `index` until it stops (SIGTERM leaves gracefully).
pub(crate) async fn run(index: u32, seeds: Vec<String>, journal: PathBuf) -> Result<(), String> {
    let journal = Journal::open(&journal).map_err(|e| format!("journal: {e}"))?;
    let factory_journal = journal.clone();
    let node = NodeBuilder::new(CLUSTER)
        .secret(SECRET)
        .seed_nodes(seeds)
        .membership(membership())
        .settings(settings())
        .leave_on_signal(true)
        .entity(EntityTypeConfig::new(COUNTER), move |id| {
            let entity = id.as_str()[1..].parse().unwrap_or(u32::MAX);
            factory_journal.record(&Fact::Started {
                entity,
                node: index,
                at: now_micros(),
            });
            Counter {
                entity,
                node: index,
                total: 0,
                journal: Some(factory_journal.clone()),
            }
        })
        .start()
        .await
        .map_err(|e| format!("start: {e}"))?;
    // The harness reads this line to learn where the node listens.
    println!("listening {}", node.address());
    let mut events = node.events();
    loop {
        match events.recv().await {
            Ok(NodeEvent::Stopped) | Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            Ok(_) | Err(_) => {}
        }
    }
    drop(journal);
    Ok(())
}
