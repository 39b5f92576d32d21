//! What a trace line says happened: one typed event per kind, with a readable form for
//! `SIM_TRACE` and explanations.

use serde::{Deserialize, Serialize};

/// A member as the membership view saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewEntry {
    /// The member (`n3#2`: address 3, incarnation 2).
    pub member: String,
    /// Its membership status (`Joining`, `Up`, `Leaving`, `Exiting`, `Down`, `Removed`, ...).
    pub status: String,
    /// Whether the observer's failure detector reaches it.
    pub reachable: bool,
}

/// Something that happened in a run. Members are written `n<address>#<incarnation>`, nodes
/// (addresses) `n<address>`, entities and shards as the workload names them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TraceEvent {
    /// A node's process started as a new incarnation.
    ProcessStarted {
        /// The new member.
        member: String,
    },
    /// A node's process ended: crashed, exited after leaving, or replaced by a restart.
    ProcessEnded {
        /// The member whose process is gone.
        member: String,
    },
    /// A crash fault hit a node (its process ends at once).
    Crashed {
        /// The member that crashed.
        member: String,
    },
    /// A node's process stopped running (like a long GC pause).
    Paused {
        /// The paused node.
        node: String,
    },
    /// A paused node runs again.
    Resumed {
        /// The node.
        node: String,
        /// Inputs that reached it while it was paused, handled now in order.
        waiting: usize,
    },
    /// The network was split; `rest` hears nothing from `side` (and, unless one-way, the
    /// other way round) until healed.
    Partitioned {
        /// One side.
        side: Vec<String>,
        /// The other side.
        rest: Vec<String>,
        /// Only `side` → `rest` is cut.
        one_way: bool,
    },
    /// Every partition healed.
    Healed,
    /// Messages to and from a node (or on one of its links) are held until `until_ns`.
    Clogged {
        /// The clogged node.
        node: String,
        /// Only its link with this node, if set.
        peer: Option<String>,
        /// When the held messages move again (true time, nanoseconds).
        until_ns: u64,
    },
    /// The connection between two nodes broke: what was in flight on it is lost.
    ConnectionBroken {
        /// One end.
        a: String,
        /// The other end.
        b: String,
    },
    /// A scheduled fault fired (before it takes effect).
    Fault {
        /// The fault as scheduled.
        fault: String,
    },
    /// The membership oracle decided which side of a partition survives.
    DowningDecided {
        /// The sides it saw.
        sides: String,
        /// The members it downed.
        downed: Vec<String>,
    },
    /// A member's membership view changed.
    View {
        /// The observer.
        member: String,
        /// The oracle's view version (`None`: the node's own membership).
        version: Option<u64>,
        /// Every member of the view.
        members: Vec<ViewEntry>,
    },
    /// A member is out of the cluster (downed, or removed after leaving).
    LeftCluster {
        /// The member.
        member: String,
        /// Downed rather than removed after a graceful leave.
        downed: bool,
    },
    /// The host started an entity.
    EntityStarted {
        /// Where.
        member: String,
        /// The entity.
        entity: String,
        /// Its shard.
        shard: String,
    },
    /// The host delivered a message to an entity.
    Delivered {
        /// Where.
        member: String,
        /// The entity.
        entity: String,
        /// The message (sender and sequence number).
        message: String,
    },
    /// The node asked the host to stop an entity.
    StopRequested {
        /// Where.
        member: String,
        /// The entity.
        entity: String,
        /// Why (passivation, handoff, ...).
        reason: String,
    },
    /// An entity stopped and the host reported it.
    EntityStopped {
        /// Where.
        member: String,
        /// The entity.
        entity: String,
    },
    /// A node dead-lettered a message to an entity.
    DeadLetter {
        /// The node.
        member: String,
        /// The entity.
        entity: String,
        /// Why.
        reason: String,
    },
    /// A node dead-lettered an ask's reply.
    ReplyDeadLettered {
        /// The node.
        member: String,
        /// Why.
        reason: String,
    },
    /// A user message sent on from one node to another.
    Forwarded {
        /// Sender.
        from: String,
        /// Receiver.
        to: String,
        /// The entity's shard.
        shard: String,
        /// The entity.
        entity: String,
        /// The message (sender and sequence number).
        message: String,
    },
    /// A sharding protocol message between nodes.
    Sent {
        /// Sender.
        from: String,
        /// Receiver.
        to: String,
        /// The message.
        message: String,
    },
    /// A membership message (heartbeat, gossip) between nodes; in full traces only.
    MembershipSent {
        /// Sender.
        from: String,
        /// Receiver.
        to: String,
        /// The message.
        message: String,
    },
    /// A coordinator allocated a shard to a region (`HostShard` sent).
    ShardHosted {
        /// The shard.
        shard: String,
        /// The region's member.
        region: String,
    },
    /// A coordinator began handing a shard off from its owner (`BeginHandOff` sent).
    HandOffBegun {
        /// The shard.
        shard: String,
        /// The region that hosts it.
        owner: String,
    },
    /// How many shards a member's region hosts (sampled once per simulated second).
    Hosting {
        /// The member.
        member: String,
        /// Shards its region hosts.
        shards: usize,
    },
    /// A member answered a client's command or query.
    Answered {
        /// The member.
        member: String,
        /// The request.
        request: String,
        /// The answer.
        result: String,
    },
    /// A coordinator held allocation behind its gate.
    AllocationWaits {
        /// The coordinator's member.
        member: String,
        /// What it waits for.
        gate: String,
        /// The shards waiting.
        shards: String,
    },
    /// The remember store answered a member's request.
    Store {
        /// The member.
        member: String,
        /// The request.
        request: String,
        /// The answer.
        completion: String,
    },
    /// The checker found a guarantee broken (written at the end of the run, at its time).
    Violation {
        /// The property.
        property: String,
        /// What it is about.
        subject: String,
        /// What exactly.
        detail: String,
    },
}

impl TraceEvent {
    /// Whether this is a user message on its way or delivered (many per entity; explanations
    /// keep fewer of them than of lifecycle events).
    pub fn is_message(&self) -> bool {
        matches!(self, Self::Delivered { .. } | Self::Forwarded { .. })
    }

    /// Whether the event names `subject` (a member, node, entity or shard) as a whole word.
    pub fn mentions(&self, subject: &str) -> bool {
        mentions(&self.to_string(), subject)
    }
}

/// The entries of a membership view, for the trace.
pub(crate) fn view_entries(view: &shoal_core::MembershipView) -> Vec<ViewEntry> {
    view.members()
        .iter()
        .map(|m| ViewEntry {
            member: m.id.to_string(),
            status: format!("{:?}", m.status),
            reachable: m.reachable,
        })
        .collect()
}

/// Whether `text` names `subject` as a whole word (`e1` does not match `e12`).
fn mentions(text: &str, subject: &str) -> bool {
    if subject.is_empty() {
        return true;
    }
    let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '#');
    text.match_indices(subject).any(|(i, _)| {
        !word(text[..i].chars().next_back()) && !word(text[i + subject.len()..].chars().next())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_match_whole_words_only() {
        assert!(mentions("n1#1 start e12 (s3)", "e12"));
        assert!(mentions("Forward { entity: EntityId(\"e1\") }", "e1"));
        assert!(!mentions("n1#1 start e12 (s3)", "e1"));
        assert!(!mentions("n1#12 stop", "n1#1"));
    }
}
