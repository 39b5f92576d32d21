//! What the page shows of the node's recent past: the last membership and sharding events
//! (joins, unreachability, downings, removals, shards started and handed off, rebalances,
//! readiness), and dead letters counted by reason, fed by a task that follows the node's
//! events for as long as the endpoint runs.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use shoal_core::Event;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use crate::event::NodeEvent;
use crate::node::Node;

/// The events kept.
const KEPT: usize = 50;

/// The node's recent past, as the page shows it.
#[derive(Debug, Default)]
pub(super) struct Recent {
    /// `(seconds since the endpoint started, what happened)`, oldest first.
    pub(super) events: VecDeque<(f64, String)>,
    /// Dead letters by reason.
    pub(super) dead_letters: BTreeMap<String, u64>,
    /// Events the log missed (it fell behind the node's event buffer).
    pub(super) missed: u64,
}

/// The log, shared by the task that fills it and the page.
pub(super) type Log = Arc<Mutex<Recent>>;

/// Follows `node`'s events into a new log until the node stops or the task is aborted.
pub(super) fn follow(node: &Node) -> (Log, JoinHandle<()>) {
    let log = Log::default();
    let mut events = node.events();
    let (filled, started) = (Arc::clone(&log), Instant::now());
    let task = tokio::spawn(async move {
        loop {
            let event = match events.recv().await {
                Ok(event) => event,
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    lock(&filled).missed += n;
                    continue;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            };
            let stopped = matches!(event, NodeEvent::Stopped);
            note(&mut lock(&filled), started.elapsed().as_secs_f64(), &event);
            if stopped {
                return;
            }
        }
    });
    (log, task)
}

/// The log, whose state stays valid if a holder panicked (each change is one push).
pub(super) fn lock(log: &Mutex<Recent>) -> std::sync::MutexGuard<'_, Recent> {
    log.lock().unwrap_or_else(PoisonError::into_inner)
}

fn note(recent: &mut Recent, at: f64, event: &NodeEvent) {
    let line = match event {
        NodeEvent::MemberUp { member, .. } => format!("{member} is Up"),
        NodeEvent::MemberUnreachable { member } => format!("{member} is unreachable"),
        NodeEvent::MemberReachable { member } => format!("{member} is reachable again"),
        NodeEvent::MemberDowned { member } => format!("{member} was downed"),
        NodeEvent::MemberRemoved { member } => format!("{member} was removed"),
        NodeEvent::Stopped => "this node stopped".to_string(),
        NodeEvent::Sharding(event) => match event {
            Event::DeadLetter { reason, .. } => {
                *recent
                    .dead_letters
                    .entry(reason.label().to_string())
                    .or_default() += 1;
                return;
            }
            Event::ShardStarted { entity_type, shard } => {
                format!("{entity_type} shard {shard} started here")
            }
            Event::ShardStopped { entity_type, shard } => {
                format!("{entity_type} shard {shard} stopped here (handed off)")
            }
            Event::Rebalance {
                entity_type,
                shards,
            } => format!("{entity_type}: a rebalance moves {} shards", shards.len()),
            Event::HandoffCompleted {
                entity_type,
                shard,
                from,
                took,
            } => format!("{entity_type} shard {shard} handed off from {from} in {took:.1?}"),
            Event::RebalanceCompleted {
                entity_type,
                shards,
                took,
            } => format!("{entity_type}: a rebalance of {shards} shards ended in {took:.1?}"),
            Event::CoordinatorStarted { entity_type, .. } => {
                format!("{entity_type}: the coordinator started here")
            }
            Event::ReadinessChanged { ready } => {
                let now = if *ready { "ready" } else { "not ready" };
                format!("this member is {now}")
            }
            _ => return,
        },
    };
    if recent.events.len() == KEPT {
        recent.events.pop_front();
    }
    recent.events.push_back((at, line));
}
