//! The run's trace as typed events: readable lines on stderr (`SIM_TRACE=1`/`2`), JSON lines in
//! the file of `sim replay --trace`, or kept in memory for the explanation of a failure, the
//! failover measurement and the picture of a run. Nothing reads a trace back as text.

use std::fmt;
use std::io::{self, BufRead, Write as _};

use serde::{Deserialize, Serialize};

use crate::world::World;

/// One trace line: when (true simulated time, nanoseconds since the run started) and what.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceLine {
    /// True simulated time of the event, in nanoseconds.
    pub t_ns: u64,
    /// What happened.
    #[serde(flatten)]
    pub event: TraceEvent,
}

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
    /// The network was split; `side` hears nothing from `rest` (and, unless one-way, the
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

/// Reads a JSON-lines trace as `sim replay --trace` writes it.
///
/// # Errors
/// The reader fails, or a line is not a trace event (the error names the line).
pub fn read_trace(reader: impl BufRead) -> io::Result<Vec<TraceLine>> {
    let mut lines = Vec::new();
    for (n, line) in reader.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let parsed = serde_json::from_str(&line).map_err(|e| {
            io::Error::new(io::ErrorKind::InvalidData, format!("line {}: {e}", n + 1))
        })?;
        lines.push(parsed);
    }
    Ok(lines)
}

/// Writes `lines` as JSON lines, as `sim replay --trace` does.
///
/// # Errors
/// The writer fails.
pub fn write_trace(out: &mut impl io::Write, lines: &[TraceLine]) -> io::Result<()> {
    for line in lines {
        serde_json::to_writer(&mut *out, line)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// Where a run's trace goes.
pub(crate) enum TraceSink {
    /// JSON lines to a writer.
    Json(Box<dyn io::Write>),
    /// Kept in memory for the caller.
    Memory(Vec<TraceLine>),
}

impl fmt::Debug for TraceSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Json(_) => f.write_str("TraceSink::Json"),
            Self::Memory(lines) => write!(f, "TraceSink::Memory({} lines)", lines.len()),
        }
    }
}

impl TraceSink {
    fn record(&mut self, line: TraceLine) {
        match self {
            Self::Json(out) => {
                // A broken trace file must not change the run.
                let _ = serde_json::to_writer(&mut *out, &line);
                let _ = out.write_all(b"\n");
            }
            Self::Memory(lines) => lines.push(line),
        }
    }
}

impl World {
    /// Whether anything records the trace (so callers can skip gathering what it would say).
    pub(crate) fn tracing(&self) -> bool {
        self.trace || self.sink.is_some()
    }

    /// Records a trace event: to stderr with `SIM_TRACE` set, and to the trace sink if there
    /// is one.
    pub(crate) fn log(&mut self, event: impl FnOnce() -> TraceEvent) {
        if !self.tracing() {
            return;
        }
        let line = TraceLine {
            t_ns: self.now.as_nanos(),
            event: event(),
        };
        self.record(line);
    }

    /// Records a trace line made elsewhere (at a time of its own).
    pub(crate) fn record(&mut self, line: TraceLine) {
        if self.trace {
            eprintln!("{} {}", shoal_core::Instant(line.t_ns), line.event);
        }
        if let Some(sink) = &mut self.sink {
            sink.record(line);
        }
    }

    /// Turns on the trace to `sink` (which also records every message and delivery); it opens
    /// with the processes already running.
    pub(crate) fn trace_to(&mut self, sink: TraceSink) {
        self.sink = Some(sink);
        self.trace_all = true;
        let running: Vec<String> = self.nodes.values().map(|n| n.id.to_string()).collect();
        for member in running {
            self.log(|| TraceEvent::ProcessStarted { member });
        }
    }

    /// Records how many shards each running member's region hosts, once per simulated second
    /// (reads the nodes only, so the run is the same traced or not).
    pub(crate) fn sample_hosting(&mut self) {
        self.next_sample = self.now + std::time::Duration::from_secs(1);
        let ty = &self.ty;
        let samples: Vec<(String, usize)> = self
            .nodes
            .values()
            .map(|n| (n.id.to_string(), n.driver.node().hosted_shards(ty).len()))
            .collect();
        for (member, shards) in samples {
            self.log(|| TraceEvent::Hosting { member, shards });
        }
    }

    /// Takes the trace sink back at the end of a run.
    pub(crate) fn take_sink(&mut self) -> Option<TraceSink> {
        if let Some(TraceSink::Json(out)) = &mut self.sink {
            let _ = out.flush();
        }
        self.sink.take()
    }

    pub(crate) fn mark(&mut self, marker: &'static str) {
        *self.coverage.entry(marker).or_default() += 1;
    }
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

    #[test]
    fn trace_lines_read_back_as_written() {
        let lines = vec![
            TraceLine {
                t_ns: 1500,
                event: TraceEvent::EntityStarted {
                    member: "n1#1".into(),
                    entity: "e\"7".into(),
                    shard: "s3".into(),
                },
            },
            TraceLine {
                t_ns: 2000,
                event: TraceEvent::Healed,
            },
        ];
        let mut out = Vec::new();
        for line in &lines {
            serde_json::to_writer(&mut out, line).unwrap();
            out.push(b'\n');
        }
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(text.starts_with(r#"{"t_ns":1500,"kind":"entity_started","member":"n1#1""#));
        assert_eq!(read_trace(&out[..]).unwrap(), lines);
        let bad = read_trace(&b"{\"t_ns\":1}\n"[..]).unwrap_err();
        assert!(bad.to_string().contains("line 1"), "{bad}");
    }
}
