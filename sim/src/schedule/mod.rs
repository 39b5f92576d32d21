//! The fault schedule: a run's faults as an explicit list of actions, planned from the seed
//! before the run starts. Being plain data, a schedule can be printed, parsed back
//! (`sim replay <seed> --schedule "<actions>"`), and shrunk to a minimal failing one
//! (see `minimize`).
//!
//! Actions name nodes by address. When an action fires, a named node that cannot take it (it
//! is not running, or not Up for a leave) is replaced by the next eligible address in cyclic
//! order, so that removing one action from a schedule never turns the others into no-ops.

mod text;

use std::collections::BTreeSet;
use std::time::Duration;

use shoal_core::NodeId;

/// One planned fault: what happens, and when (after the run's start).
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct Action {
    /// When it fires, from the start of the run.
    pub at: Duration,
    /// What it does.
    pub act: Act,
}

/// What a fault action does.
#[derive(Clone, Debug, Eq, PartialEq)]
pub enum Act {
    /// Crash a node (its state is lost); it restarts as a new incarnation after a while.
    Crash {
        /// The node.
        node: NodeId,
        /// Delay until it restarts.
        restart_after: Duration,
    },
    /// Crash the oldest member, where the coordinators run.
    CrashOldest {
        /// Delay until it restarts.
        restart_after: Duration,
    },
    /// Split the running nodes into `side` and the rest, until healed.
    Partition {
        /// One side (addresses; those not running are ignored).
        side: BTreeSet<NodeId>,
        /// Only `side` → rest is blocked; the rest still reaches `side`.
        one_way: bool,
        /// Delay until every partition heals.
        heal_after: Duration,
    },
    /// Break the connection between two nodes: what is in flight on it is lost.
    Break {
        /// One end.
        a: NodeId,
        /// The other end.
        b: NodeId,
    },
    /// A member leaves gracefully: by itself (`Command::Leave`), or asked to by the member
    /// at `by` (`Command::LeaveMember`).
    Leave {
        /// The member's address.
        node: NodeId,
        /// The address of the member that asks it to leave, if not itself.
        by: Option<NodeId>,
    },
    /// Every partition heals now (a partition that moves: heal, then a new one).
    Heal,
    /// An operator on the member at `by` downs the member at `node` (`Command::Down`).
    Down {
        /// The member downed.
        node: NodeId,
        /// The member that takes the command.
        by: NodeId,
    },
    /// A new node joins.
    Join,
    /// Messages to and from a node (or only between it and `peer`) are held, not lost, for a
    /// while.
    Clog {
        /// The clogged node.
        node: NodeId,
        /// Only the link with this node, if set.
        peer: Option<NodeId>,
        /// How long.
        lasts: Duration,
    },
    /// The whole cluster goes down (every process stops, as when an operator takes it down)
    /// and starts again as a new cluster after `restart_after`, its entity type with
    /// `shards` shards: the only way to change the shard function. Remembered entities must
    /// then run exactly once, each in the shard it now maps to.
    FullRestart {
        /// The number of shards after the restart.
        shards: u32,
        /// Delay until every node starts again.
        restart_after: Duration,
    },
    /// The remember store becomes unavailable for a while: every request sent to it then fails
    /// after the store's timeout, changing nothing (no-op in runs that remember nothing).
    StoreOutage {
        /// How long.
        lasts: Duration,
    },
    /// A node's process stops running (like a long GC pause) and then resumes.
    Pause {
        /// The node.
        node: NodeId,
        /// How long.
        lasts: Duration,
    },
    /// The process of the member holding the downing lease pauses (else the one holding the
    /// most shard or coordinator leases; no-op when nobody holds one), and then resumes.
    PauseHolder {
        /// How long.
        lasts: Duration,
    },
}

/// A run's fault actions, in time order.
#[derive(Clone, Debug, Default, Eq, PartialEq)]
pub struct Schedule(pub Vec<Action>);

/// The longest pause: well under the oracle's `stable-after`, so a pause alone never gets a
/// member downed (a paused process keeps its entities alive, and only a lease could make a
/// pause longer than failure detection safe).
pub(crate) const MAX_PAUSE: Duration = Duration::from_secs(4);

pub use text::ScheduleError;

impl Schedule {
    /// Number of actions.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no actions.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The first of `candidates` (sorted) at or after `wanted`, wrapping around; `None` if empty.
pub(crate) fn resolve(candidates: &[NodeId], wanted: NodeId) -> Option<NodeId> {
    candidates
        .iter()
        .find(|n| **n >= wanted)
        .or_else(|| candidates.first())
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_read_from_text() {
        let s: Schedule =
            "@40 crash n3 restart 12.5; @2.25 partition n1,n2 one-way heal 30; @9 clog n2-n4 0.5"
                .parse()
                .unwrap();
        assert_eq!(s.0[0].at, Duration::from_millis(2250));
        assert_eq!(
            s.0[1].act,
            Act::Clog {
                node: NodeId(2),
                peer: Some(NodeId(4)),
                lasts: Duration::from_millis(500)
            }
        );
        assert_eq!(
            s.0[2].act,
            Act::Crash {
                node: NodeId(3),
                restart_after: Duration::from_millis(12_500)
            }
        );
        assert_eq!(
            "@7 store-outage 8.25".parse::<Schedule>().unwrap().0[0].act,
            Act::StoreOutage {
                lasts: Duration::from_millis(8_250)
            }
        );
        assert!("@1 explode n1".parse::<Schedule>().is_err());
        assert!("crash n1 restart 2".parse::<Schedule>().is_err());
        assert!("@1 crash x1 restart 2".parse::<Schedule>().is_err());
        assert!(
            "@1 pause n1 10".parse::<Schedule>().is_err(),
            "too long a pause"
        );
        let holder: Schedule = "@3 pause-holder 1.5".parse().unwrap();
        let lasts = Duration::from_millis(1_500);
        assert_eq!(holder.0[0].act, Act::PauseHolder { lasts });
        assert_eq!(holder.to_string(), "@3.000 pause-holder 1.500");
        assert!("@1 pause-holder 4.5".parse::<Schedule>().is_err());
    }

    #[test]
    fn targets_resolve_to_the_next_eligible_address() {
        let running = [NodeId(2), NodeId(4), NodeId(5)];
        assert_eq!(resolve(&running, NodeId(3)), Some(NodeId(4)));
        assert_eq!(resolve(&running, NodeId(4)), Some(NodeId(4)));
        assert_eq!(resolve(&running, NodeId(6)), Some(NodeId(2)));
        assert_eq!(resolve(&[], NodeId(1)), None);
    }
}
