//! Explaining a failure: the run is replayed (deterministically) with a JSON-lines trace, and
//! the trace events about the first violation's subject leading up to it are picked out.

use std::collections::VecDeque;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter};
use std::path::{Path, PathBuf};

use crate::run::{Report, run_traced};

/// Trace events shown per failure: the subject's last lifecycle events (starts, stops, views,
/// handoffs), and the last few messages to it, which would otherwise crowd them out.
const LIFECYCLE_EVENTS: usize = 10;
const MESSAGE_EVENTS: usize = 4;

/// Where a failed run's trace went and what led to its first violation.
#[derive(Debug)]
pub struct Explanation {
    /// The JSON-lines trace of the whole run.
    pub trace: PathBuf,
    /// The last trace events about the first violation's subject, up to its time.
    pub events: Vec<String>,
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "  events that led to it:")?;
        for e in &self.events {
            writeln!(f, "    {e}")?;
        }
        writeln!(f, "  trace: {}", self.trace.display())
    }
}

/// Replays `report`'s run writing its trace to `dir/seed-<seed>.jsonl`, and collects the
/// events about its first violation.
///
/// # Errors
/// The trace file cannot be written or read back.
pub fn explain(report: &Report, dir: &Path) -> io::Result<Explanation> {
    std::fs::create_dir_all(dir)?;
    let trace = dir.join(format!("seed-{}.jsonl", report.options.seed));
    let sink = BufWriter::new(File::create(&trace)?);
    run_traced(report.options.clone(), Some(Box::new(sink)));
    let Some(first) = report.violations.first() else {
        return Ok(Explanation {
            trace,
            events: Vec::new(),
        });
    };
    let until = first.at.as_nanos();
    // (line number, text), newest last, for each kind.
    let mut lifecycle = VecDeque::new();
    let mut messages = VecDeque::new();
    for (n, line) in BufReader::new(File::open(&trace)?).lines().enumerate() {
        let line = line?;
        let Some((t, event)) = parse_line(&line) else {
            continue;
        };
        if t > until {
            break;
        }
        // Dead letters are consequences (counted and checked elsewhere), not causes.
        if !mentions(&event, &first.subject) || event.contains(" dead letter ") {
            continue;
        }
        let is_message = event.contains(" deliver ") || event.contains(" Forward ");
        let (kept, cap) = if is_message {
            (&mut messages, MESSAGE_EVENTS)
        } else {
            (&mut lifecycle, LIFECYCLE_EVENTS)
        };
        kept.push_back((n, format!("[{:.6}s] {event}", t as f64 / 1e9)));
        if kept.len() > cap {
            kept.pop_front();
        }
        // At the violation's instant, the first event about its subject is the one that broke
        // it; what follows at that instant is aftermath.
        if t == until {
            break;
        }
    }
    let mut events: Vec<(usize, String)> = lifecycle.into_iter().chain(messages).collect();
    events.sort();
    Ok(Explanation {
        trace,
        events: events.into_iter().map(|(_, e)| e).collect(),
    })
}

/// The default trace directory: `$SIM_TRACE_DIR`, or `target/sim-traces`.
pub fn trace_dir() -> PathBuf {
    std::env::var_os("SIM_TRACE_DIR")
        .map_or_else(|| PathBuf::from("target/sim-traces"), PathBuf::from)
}

/// Reads `{"t_ns":<n>,"event":"<text>"}` as the trace writes it.
pub(crate) fn parse_line(line: &str) -> Option<(u64, String)> {
    let rest = line.strip_prefix("{\"t_ns\":")?;
    let (t, rest) = rest.split_once(',')?;
    let event = rest.strip_prefix("\"event\":\"")?.strip_suffix("\"}")?;
    Some((
        t.parse().ok()?,
        event.replace("\\\"", "\"").replace("\\\\", "\\"),
    ))
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
    fn trace_lines_parse_back() {
        let line = r#"{"t_ns":1500,"event":"n1#1 -> n2#1 \"x\""}"#;
        assert_eq!(parse_line(line), Some((1500, "n1#1 -> n2#1 \"x\"".into())));
        assert_eq!(parse_line("garbage"), None);
    }
}
