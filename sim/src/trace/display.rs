//! The readable form of a trace event: one line per event, as `SIM_TRACE` prints it and as
//! explanations quote it.

use std::fmt;

use super::TraceEvent;

impl fmt::Display for TraceEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ProcessStarted { member } => write!(f, "{member} process started"),
            Self::ProcessEnded { member } => write!(f, "{member} process ended"),
            Self::Crashed { member } => write!(f, "{member} crashed"),
            Self::Paused { node } => write!(f, "{node} paused"),
            Self::Resumed { node, waiting } => {
                write!(f, "{node} resumed with {waiting} inputs waiting")
            }
            Self::Partitioned {
                side,
                rest,
                one_way,
            } => {
                let arrow = if *one_way { "-/->" } else { "<-/->" };
                write!(
                    f,
                    "partition [{}] {arrow} [{}]",
                    side.join(" "),
                    rest.join(" ")
                )
            }
            Self::Healed => write!(f, "partitions healed"),
            Self::Clogged {
                node,
                peer,
                until_ns,
            } => {
                let until = *until_ns as f64 / 1e9;
                match peer {
                    Some(peer) => write!(f, "link {node}-{peer} clogged until {until:.3}s"),
                    None => write!(f, "{node} clogged until {until:.3}s"),
                }
            }
            Self::ConnectionBroken { a, b } => write!(f, "connection {a}-{b} broken"),
            Self::Fault { fault } => write!(f, "fault {fault}"),
            Self::DowningDecided { sides, downed } => {
                write!(f, "decide sides {sides} -> downed [{}]", downed.join(" "))
            }
            Self::View {
                member,
                version,
                members,
            } => {
                let entries: Vec<String> = members
                    .iter()
                    .map(|m| {
                        let unreachable = if m.reachable { "" } else { "(unreachable)" };
                        format!("{}:{}{unreachable}", m.member, m.status)
                    })
                    .collect();
                match version {
                    Some(v) => write!(f, "{member} view v{v} [{}]", entries.join(" ")),
                    None => write!(f, "{member} view [{}]", entries.join(" ")),
                }
            }
            Self::LeftCluster { member, downed } => {
                write!(f, "{member} left the cluster (downed: {downed})")
            }
            Self::EntityStarted {
                member,
                entity,
                shard,
            } => write!(f, "{member} start {entity} ({shard})"),
            Self::Delivered {
                member,
                entity,
                message,
            } => write!(f, "{member} deliver {entity} {message}"),
            Self::StopRequested {
                member,
                entity,
                reason,
            } => write!(f, "{member} stop {entity} {reason}"),
            Self::EntityStopped { member, entity } => write!(f, "{member} stopped {entity}"),
            Self::DeadLetter {
                member,
                entity,
                reason,
            } => write!(f, "{member} dead letter {entity} {reason}"),
            Self::ReplyDeadLettered { member, reason } => {
                write!(f, "{member} reply dead-lettered {reason}")
            }
            Self::Forwarded {
                from,
                to,
                shard,
                entity,
                message,
            } => write!(f, "{from} -> {to} Forward {shard} {entity} {message}"),
            Self::Sent { from, to, message } | Self::MembershipSent { from, to, message } => {
                write!(f, "{from} -> {to} {message}")
            }
            Self::ShardHosted { shard, region } => write!(f, "{shard} allocated to {region}"),
            Self::HandOffBegun { shard, owner } => write!(f, "{shard} handoff from {owner}"),
            Self::Hosting { member, shards } => write!(f, "{member} hosts {shards} shards"),
            Self::Answered {
                member,
                request,
                result,
            } => write!(f, "{member} answered {request}: {result}"),
            Self::AllocationWaits {
                member,
                gate,
                shards,
            } => write!(f, "{member} allocation waits for {gate}: {shards}"),
            Self::Store {
                member,
                request,
                completion,
            } => write!(f, "{member} store {request} -> {completion}"),
            Self::Violation {
                property,
                subject,
                detail,
            } => write!(f, "VIOLATION {property} {subject}: {detail}"),
        }
    }
}
