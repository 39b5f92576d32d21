//! What each node process reports about its entities, one line per fact, appended to its own
//! file: starts, stops and every delivery with its sender and sequence number. Lines are
//! written with one `write` each (no buffering), so a SIGKILL loses at most the line being
//! written, and the harness reads every file at the end to check the run.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

/// Microseconds on the machine's wall clock: every process of the run shares it.
pub(crate) fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// One fact about an entity.
#[derive(Clone, Debug, Eq, PartialEq)]
pub(crate) enum Fact {
    /// An incarnation of the entity started in process `node` at `at`.
    Started { entity: u32, node: u32, at: u64 },
    /// It stopped (passivation, handoff or leave).
    Stopped { entity: u32, node: u32, at: u64 },
    /// It handled the `seq`-th increment of `sender`.
    Delivered {
        entity: u32,
        node: u32,
        sender: u32,
        seq: u64,
    },
    /// Process `node`'s member stopped (it left, or was downed): whatever was still running
    /// there ended by `at`.
    Exited { node: u32, at: u64 },
    /// Process `node` dead-lettered a message for `reason`.
    DeadLetter { node: u32, reason: String },
}

impl Fact {
    fn line(&self) -> String {
        match self {
            Self::Started { entity, node, at } => format!("start {entity} {node} {at}\n"),
            Self::Stopped { entity, node, at } => format!("stop {entity} {node} {at}\n"),
            Self::Delivered {
                entity,
                node,
                sender,
                seq,
            } => format!("deliver {entity} {node} {sender} {seq}\n"),
            Self::Exited { node, at } => format!("exit {node} {at}\n"),
            Self::DeadLetter { node, reason } => format!("dead {node} {reason}\n"),
        }
    }

    /// Parses a line; a torn last line (the process was killed mid-write) is `None`.
    pub(crate) fn parse(line: &str) -> Option<Self> {
        if let Some(rest) = line.strip_prefix("dead ") {
            let (node, reason) = rest.split_once(' ')?;
            return Some(Self::DeadLetter {
                node: node.parse().ok()?,
                reason: reason.to_string(),
            });
        }
        let mut words = line.split(' ');
        let kind = words.next()?;
        let mut number = || words.next()?.parse::<u64>().ok();
        let fact = match kind {
            "start" => Self::Started {
                entity: number()? as u32,
                node: number()? as u32,
                at: number()?,
            },
            "stop" => Self::Stopped {
                entity: number()? as u32,
                node: number()? as u32,
                at: number()?,
            },
            "deliver" => Self::Delivered {
                entity: number()? as u32,
                node: number()? as u32,
                sender: number()? as u32,
                seq: number()?,
            },
            "exit" => Self::Exited {
                node: number()? as u32,
                at: number()?,
            },
            _ => return None,
        };
        Some(fact)
    }
}

/// A node process's journal.
#[derive(Clone)]
pub(crate) struct Journal(Arc<Mutex<File>>);

impl Journal {
    /// Appends to `path` (created if missing).
    pub(crate) fn open(path: &Path) -> std::io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self(Arc::new(Mutex::new(file))))
    }

    /// Records `fact`; a failed write is reported once per call and otherwise ignored (the
    /// verification then finds the gap and says so).
    pub(crate) fn record(&self, fact: &Fact) {
        let mut file = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Err(error) = file.write_all(fact.line().as_bytes()) {
            eprintln!("journal write failed: {error}");
        }
    }
}

/// Every fact in the journals of `dir`, file by file (each file in the order written).
pub(crate) fn read_all(dir: &Path) -> std::io::Result<Vec<Fact>> {
    let mut facts = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.retain(|entry| entry.path().extension().is_some_and(|e| e == "journal"));
    entries.sort_by_key(|entry| entry.path());
    for entry in entries {
        let text = std::fs::read_to_string(entry.path())?;
        facts.extend(text.lines().filter_map(Fact::parse));
    }
    Ok(facts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_round_trip_and_torn_lines_are_skipped() {
        let facts = [
            Fact::Started {
                entity: 7,
                node: 2,
                at: 99,
            },
            Fact::Delivered {
                entity: 7,
                node: 2,
                sender: 3,
                seq: 12,
            },
            Fact::Stopped {
                entity: 7,
                node: 2,
                at: 120,
            },
            Fact::Exited { node: 2, at: 130 },
            Fact::DeadLetter {
                node: 2,
                reason: "NoActiveRegion".into(),
            },
        ];
        for fact in facts {
            assert_eq!(Fact::parse(fact.line().trim_end()), Some(fact));
        }
        assert_eq!(Fact::parse("deliver 7 2 3"), None);
        assert_eq!(Fact::parse("garbage"), None);
    }
}
