//! Explaining a failure: the run is replayed (deterministically) with a JSON-lines trace, and
//! the trace events about the first violation's subject leading up to it are picked out.

use std::collections::VecDeque;
use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Write as _};
use std::path::{Path, PathBuf};

use crate::report::Report;
use crate::run::run_recorded;
use crate::trace::{TraceEvent, TraceLine};

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
    pub events: Vec<TraceLine>,
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "  events that led to it:")?;
        for line in &self.events {
            writeln!(f, "    [{:.6}s] {}", line.t_ns as f64 / 1e9, line.event)?;
        }
        writeln!(f, "  trace: {}", self.trace.display())
    }
}

/// Replays `report`'s run writing its trace to `dir/seed-<seed>.jsonl`, and collects the
/// events about its first violation.
///
/// # Errors
/// The trace file cannot be written.
pub fn explain(report: &Report, dir: &Path) -> io::Result<Explanation> {
    std::fs::create_dir_all(dir)?;
    let trace = dir.join(format!("seed-{}.jsonl", report.options.seed));
    let (_, lines) = run_recorded(report.options.clone());
    let mut out = BufWriter::new(File::create(&trace)?);
    crate::trace::write_trace(&mut out, &lines)?;
    out.flush()?;
    let events = match report.violations.first() {
        Some(first) => leading_to(&lines, first.at.as_nanos(), &first.subject),
        None => Vec::new(),
    };
    Ok(Explanation { trace, events })
}

/// The last events about `subject` up to `until` (ns): its lifecycle and the messages to it.
fn leading_to(lines: &[TraceLine], until: u64, subject: &str) -> Vec<TraceLine> {
    // (position, line), newest last, for each kind.
    let mut lifecycle = VecDeque::new();
    let mut messages = VecDeque::new();
    for (n, line) in lines.iter().enumerate() {
        if line.t_ns > until {
            break;
        }
        // Dead letters are consequences (counted and checked elsewhere), not causes; the
        // violations are what is being explained.
        let consequence = matches!(
            line.event,
            TraceEvent::DeadLetter { .. } | TraceEvent::Violation { .. }
        );
        if consequence || !line.event.mentions(subject) {
            continue;
        }
        let (kept, cap) = if line.event.is_message() {
            (&mut messages, MESSAGE_EVENTS)
        } else {
            (&mut lifecycle, LIFECYCLE_EVENTS)
        };
        kept.push_back((n, line));
        if kept.len() > cap {
            kept.pop_front();
        }
        // At the violation's instant, the first event about its subject is the one that broke
        // it; what follows at that instant is aftermath.
        if line.t_ns == until {
            break;
        }
    }
    let mut events: Vec<(usize, &TraceLine)> = lifecycle.into_iter().chain(messages).collect();
    events.sort_by_key(|(n, _)| *n);
    events.into_iter().map(|(_, line)| line.clone()).collect()
}

/// The default trace directory: `$SIM_TRACE_DIR`, or `target/sim-traces`.
pub fn trace_dir() -> PathBuf {
    std::env::var_os("SIM_TRACE_DIR")
        .map_or_else(|| PathBuf::from("target/sim-traces"), PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t_ns: u64, event: TraceEvent) -> TraceLine {
        TraceLine { t_ns, event }
    }

    fn start(member: &str, entity: &str) -> TraceEvent {
        TraceEvent::EntityStarted {
            member: member.into(),
            entity: entity.into(),
            shard: "s1".into(),
        }
    }

    #[test]
    fn the_subjects_events_up_to_the_violation_are_kept() {
        let deliver = |entity: &str| TraceEvent::Delivered {
            member: "n1#1".into(),
            entity: entity.into(),
            message: "from n2#1 seq 1".into(),
        };
        let lines = vec![
            at(1, start("n1#1", "e1")),
            at(2, start("n1#1", "e12")),
            at(3, deliver("e1")),
            at(4, start("n2#1", "e1")),
            at(4, start("n3#1", "e1")),
            at(5, start("n4#1", "e1")),
        ];
        let kept = leading_to(&lines, 4, "e1");
        let times: Vec<u64> = kept.iter().map(|l| l.t_ns).collect();
        // e12 is another entity; the second start at t=4 is aftermath; t=5 is later.
        assert_eq!(times, [1, 3, 4]);
        assert!(
            matches!(&kept[2].event, TraceEvent::EntityStarted { member, .. } if member == "n2#1")
        );
    }

    #[test]
    fn messages_do_not_crowd_out_lifecycle_events() {
        let mut lines = vec![at(0, start("n1#1", "e1"))];
        for t in 1..=50 {
            lines.push(at(
                t,
                TraceEvent::Forwarded {
                    from: "n2#1".into(),
                    to: "n1#1".into(),
                    shard: "s1".into(),
                    entity: "e1".into(),
                    message: format!("seq {t}"),
                },
            ));
        }
        let kept = leading_to(&lines, 50, "e1");
        assert_eq!(kept.len(), 1 + MESSAGE_EVENTS);
        assert_eq!(kept[0].t_ns, 0);
    }
}
