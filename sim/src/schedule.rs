//! The fault schedule: a run's faults as an explicit list of actions, planned from the seed
//! before the run starts. Being plain data, a schedule can be printed, parsed back
//! (`sim replay <seed> --schedule "<actions>"`), and shrunk to a minimal failing one
//! (see `minimize`).
//!
//! Actions name nodes by address. When an action fires, a named node that cannot take it (it
//! is not running, or not Up for a leave) is replaced by the next eligible address in cyclic
//! order, so that removing one action from a schedule never turns the others into no-ops.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use shoal_core::NodeId;

use crate::options::Options;
use crate::rng::{SimRng, Stream};

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
    /// A member leaves gracefully.
    Leave {
        /// The member's address.
        node: NodeId,
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
    /// A node's process stops running (like a long GC pause) and then resumes.
    Pause {
        /// The node.
        node: NodeId,
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

impl Schedule {
    /// The schedule `options` describe: each enabled fault kind recurs at random intervals
    /// around its mean, with random targets, all drawn from the seed.
    pub fn plan(o: &Options) -> Self {
        let mut r = SimRng::of(o.seed, Stream::Schedule);
        // Whole milliseconds, so that a schedule reads back exactly as it prints.
        let ms = |r: &mut SimRng, lo: Duration, hi: Duration| {
            Duration::from_millis(r.duration(lo, hi).as_millis() as u64)
        };
        let f = &o.faults;
        let kinds: [(Option<Duration>, Kind); 8] = [
            (f.crash_every, Kind::Crash),
            (f.partition_every, Kind::Partition),
            (f.break_every, Kind::Break),
            (f.leave_every, Kind::Leave),
            (f.join_every, Kind::Join),
            (f.crash_oldest_every, Kind::CrashOldest),
            (f.clog_every, Kind::Clog),
            (f.pause_every, Kind::Pause),
        ];
        let mut times = Vec::new();
        for (every, kind) in kinds {
            let Some(every) = every else { continue };
            let mut at = Duration::ZERO;
            loop {
                at += ms(&mut r, every / 2, every * 3 / 2);
                if at >= o.duration {
                    break;
                }
                times.push((at, kind));
            }
        }
        times.sort();
        // Targets are drawn in time order, among the addresses that exist by then.
        let mut known = o.nodes;
        let mut actions = Vec::with_capacity(times.len());
        for (at, kind) in times {
            let node = |r: &mut SimRng| NodeId(r.range(1, known));
            let secs = Duration::from_secs;
            let act = match kind {
                Kind::Crash => Act::Crash {
                    node: node(&mut r),
                    restart_after: ms(&mut r, secs(10), secs(40)),
                },
                Kind::CrashOldest => Act::CrashOldest {
                    restart_after: ms(&mut r, secs(10), secs(40)),
                },
                Kind::Partition => {
                    // A random non-empty proper subset of the addresses known by then.
                    let mut side: BTreeSet<NodeId> =
                        (1..=known).filter(|_| r.chance(0.5)).map(NodeId).collect();
                    let pick = node(&mut r);
                    if side.is_empty() {
                        side.insert(pick);
                    } else if side.len() as u64 == known {
                        side.remove(&pick);
                    }
                    Act::Partition {
                        side,
                        one_way: r.chance(0.3),
                        heal_after: ms(&mut r, secs(5), secs(60)),
                    }
                }
                Kind::Break => Act::Break {
                    a: node(&mut r),
                    b: node(&mut r),
                },
                Kind::Leave => Act::Leave { node: node(&mut r) },
                Kind::Join => {
                    known = (known + 1).min(o.max_nodes);
                    Act::Join
                }
                Kind::Clog => Act::Clog {
                    node: node(&mut r),
                    peer: r.chance(0.5).then(|| node(&mut r)),
                    lasts: ms(&mut r, Duration::from_millis(50), secs(3)),
                },
                Kind::Pause => Act::Pause {
                    node: node(&mut r),
                    lasts: ms(&mut r, Duration::from_millis(50), MAX_PAUSE),
                },
            };
            actions.push(Action { at, act });
        }
        Self(actions)
    }

    /// Number of actions.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no actions.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[derive(Clone, Copy, Debug, Eq, Ord, PartialEq, PartialOrd)]
enum Kind {
    Crash,
    CrashOldest,
    Partition,
    Break,
    Leave,
    Join,
    Clog,
    Pause,
}

/// The first of `candidates` (sorted) at or after `wanted`, wrapping around; `None` if empty.
pub(crate) fn resolve(candidates: &[NodeId], wanted: NodeId) -> Option<NodeId> {
    candidates
        .iter()
        .find(|n| **n >= wanted)
        .or_else(|| candidates.first())
        .copied()
}

fn secs(d: Duration) -> String {
    format!("{}.{:03}", d.as_secs(), d.subsec_millis())
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "@{} ", secs(self.at))?;
        match &self.act {
            Act::Crash {
                node,
                restart_after,
            } => write!(f, "crash {node} restart {}", secs(*restart_after)),
            Act::CrashOldest { restart_after } => {
                write!(f, "crash-oldest restart {}", secs(*restart_after))
            }
            Act::Partition {
                side,
                one_way,
                heal_after,
            } => {
                let side: Vec<String> = side.iter().map(ToString::to_string).collect();
                let way = if *one_way { " one-way" } else { "" };
                write!(
                    f,
                    "partition {}{way} heal {}",
                    side.join(","),
                    secs(*heal_after)
                )
            }
            Act::Break { a, b } => write!(f, "break {a}-{b}"),
            Act::Leave { node } => write!(f, "leave {node}"),
            Act::Join => write!(f, "join"),
            Act::Clog { node, peer, lasts } => match peer {
                Some(p) => write!(f, "clog {node}-{p} {}", secs(*lasts)),
                None => write!(f, "clog {node} {}", secs(*lasts)),
            },
            Act::Pause { node, lasts } => write!(f, "pause {node} {}", secs(*lasts)),
        }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let actions: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&actions.join("; "))
    }
}

/// Why a schedule did not parse.
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct ScheduleError(pub String);

impl fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad schedule: {}", self.0)
    }
}

impl std::error::Error for ScheduleError {}

fn parse_secs(text: &str) -> Result<Duration, ScheduleError> {
    text.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| ScheduleError(format!("{text:?} is not a number of seconds")))
}

fn parse_node(text: &str) -> Result<NodeId, ScheduleError> {
    text.strip_prefix('n')
        .and_then(|n| n.parse().ok())
        .map(NodeId)
        .ok_or_else(|| ScheduleError(format!("{text:?} is not a node (n<number>)")))
}

fn parse_pair(text: &str) -> Result<(NodeId, Option<NodeId>), ScheduleError> {
    match text.split_once('-') {
        Some((a, b)) => Ok((parse_node(a)?, Some(parse_node(b)?))),
        None => Ok((parse_node(text)?, None)),
    }
}

impl FromStr for Action {
    type Err = ScheduleError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let bad = || ScheduleError(format!("cannot read action {text:?}"));
        let at = words
            .first()
            .and_then(|w| w.strip_prefix('@'))
            .ok_or_else(bad)?;
        let at = parse_secs(at)?;
        let act = match words[1..] {
            ["crash", node, "restart", d] => Act::Crash {
                node: parse_node(node)?,
                restart_after: parse_secs(d)?,
            },
            ["crash-oldest", "restart", d] => Act::CrashOldest {
                restart_after: parse_secs(d)?,
            },
            ["partition", side, ref rest @ ..] => {
                let (one_way, heal) = match rest {
                    ["one-way", "heal", d] => (true, d),
                    ["heal", d] => (false, d),
                    _ => return Err(bad()),
                };
                Act::Partition {
                    side: side.split(',').map(parse_node).collect::<Result<_, _>>()?,
                    one_way,
                    heal_after: parse_secs(heal)?,
                }
            }
            ["break", pair] => match parse_pair(pair)? {
                (a, Some(b)) => Act::Break { a, b },
                _ => return Err(bad()),
            },
            ["leave", node] => Act::Leave {
                node: parse_node(node)?,
            },
            ["join"] => Act::Join,
            ["clog", pair, d] => {
                let (node, peer) = parse_pair(pair)?;
                Act::Clog {
                    node,
                    peer,
                    lasts: parse_secs(d)?,
                }
            }
            ["pause", node, d] => {
                let lasts = parse_secs(d)?;
                if lasts > MAX_PAUSE {
                    let max = MAX_PAUSE.as_secs();
                    return Err(ScheduleError(format!(
                        "pauses last at most {max} s (longer ones would get a member downed \
                         while its entities run on): {text:?}"
                    )));
                }
                Act::Pause {
                    node: parse_node(node)?,
                    lasts,
                }
            }
            _ => return Err(bad()),
        };
        Ok(Self { at, act })
    }
}

impl FromStr for Schedule {
    type Err = ScheduleError;

    /// Actions separated by `;`, as [`Schedule`]'s `Display` writes them.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut actions: Vec<Action> = text
            .split(';')
            .filter(|a| !a.trim().is_empty())
            .map(str::parse)
            .collect::<Result<_, _>>()?;
        actions.sort_by_key(|a| a.at);
        Ok(Self(actions))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Family;

    #[test]
    fn every_family_plans_a_schedule_that_reads_back_the_same() {
        for (seed, family) in Family::ALL.into_iter().enumerate() {
            let options = Options::for_family(seed as u64 + 100, family);
            let schedule = Schedule::plan(&options);
            let text = schedule.to_string();
            assert_eq!(text.parse::<Schedule>(), Ok(schedule), "{text}");
        }
    }

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
        assert!("@1 explode n1".parse::<Schedule>().is_err());
        assert!("crash n1 restart 2".parse::<Schedule>().is_err());
        assert!("@1 crash x1 restart 2".parse::<Schedule>().is_err());
        assert!(
            "@1 pause n1 10".parse::<Schedule>().is_err(),
            "too long a pause"
        );
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
