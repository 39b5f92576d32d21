//! The run's trace as typed events: readable lines on stderr (`SIM_TRACE=1`/`2`), JSON lines in
//! the file of `sim replay --trace`, or kept in memory for the explanation of a failure, the
//! failover measurement and the picture of a run. Nothing reads a trace back as text.

use std::fmt;
use std::io::{self, BufRead, Write as _};

use serde::{Deserialize, Serialize};

mod display;
mod event;

pub(crate) use event::view_entries;
pub use event::{TraceEvent, ViewEntry};

/// One trace line: when (true simulated time, nanoseconds since the run started) and what.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceLine {
    /// True simulated time of the event, in nanoseconds.
    pub t_ns: u64,
    /// What happened.
    #[serde(flatten)]
    pub event: TraceEvent,
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

/// Where the run's trace goes, and how much of it is recorded.
#[derive(Debug)]
pub(crate) struct Tracer {
    /// Readable lines on stderr (`SIM_TRACE` set).
    echo: bool,
    /// Every message and delivery too (`SIM_TRACE=2`, or a sink).
    all: bool,
    sink: Option<TraceSink>,
    /// When the regions' hosting is next sampled (with a sink).
    next_sample: shoal_core::Instant,
}

impl Tracer {
    /// A tracer as the `SIM_TRACE` environment variable asks (off when unset).
    pub(crate) fn from_env() -> Self {
        Self {
            echo: std::env::var_os("SIM_TRACE").is_some(),
            all: std::env::var("SIM_TRACE").is_ok_and(|v| v == "2"),
            sink: None,
            next_sample: shoal_core::Instant::ZERO,
        }
    }

    /// Whether anything records the trace (so callers can skip gathering what it would say).
    pub(crate) fn is_on(&self) -> bool {
        self.echo || self.sink.is_some()
    }

    /// Whether every message and delivery is recorded too.
    pub(crate) fn wants_all(&self) -> bool {
        self.all
    }

    /// Records `line`: to stderr with `SIM_TRACE` set, and to the sink if there is one.
    pub(crate) fn record(&mut self, line: TraceLine) {
        if self.echo {
            eprintln!("{} {}", shoal_core::Instant(line.t_ns), line.event);
        }
        if let Some(sink) = &mut self.sink {
            sink.record(line);
        }
    }

    /// Sends the trace to `sink` from now on, every message and delivery included.
    pub(crate) fn start(&mut self, sink: TraceSink) {
        self.sink = Some(sink);
        self.all = true;
    }

    /// Whether the regions' hosting is due to be sampled at `now` (once per simulated second,
    /// with a sink); if so, the next sample is due a second later.
    pub(crate) fn sample_due(&mut self, now: shoal_core::Instant) -> bool {
        if self.sink.is_none() || now < self.next_sample {
            return false;
        }
        self.next_sample = now + std::time::Duration::from_secs(1);
        true
    }

    /// Takes the sink back at the end of a run.
    pub(crate) fn take_sink(&mut self) -> Option<TraceSink> {
        if let Some(TraceSink::Json(out)) = &mut self.sink {
            let _ = out.flush();
        }
        self.sink.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
