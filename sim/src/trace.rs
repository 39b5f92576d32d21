//! Readable traces (`SIM_TRACE=1`/`2` on stderr), the JSON-lines trace file of
//! `sim replay --trace`, and the coverage ("sometimes") markers.

use std::io::Write as _;

use crate::world::{TraceSink, World};

impl World {
    /// Records a trace line: to stderr with `SIM_TRACE` set, and as a JSON object to the trace
    /// file if there is one.
    pub(crate) fn log(&mut self, line: impl FnOnce() -> String) {
        if !self.trace && self.sink.is_none() {
            return;
        }
        let line = line();
        if self.trace {
            eprintln!("{} {line}", self.now);
        }
        if let Some(TraceSink(out)) = &mut self.sink {
            let escaped: String = line
                .chars()
                .flat_map(|c| match c {
                    '"' => vec!['\\', '"'],
                    '\\' => vec!['\\', '\\'],
                    c if c.is_control() => format!("\\u{:04x}", c as u32).chars().collect(),
                    c => vec![c],
                })
                .collect();
            // A broken trace file must not change the run; the error is reported at the end.
            let _ = writeln!(
                out,
                "{{\"t_ns\":{},\"event\":\"{escaped}\"}}",
                self.now.as_nanos()
            );
        }
    }

    /// Turns on the JSON-lines trace (which also records every message and delivery).
    pub(crate) fn trace_to(&mut self, sink: Box<dyn std::io::Write>) {
        self.sink = Some(TraceSink(sink));
        self.trace_all = true;
    }

    pub(crate) fn mark(&mut self, marker: &'static str) {
        *self.coverage.entry(marker).or_default() += 1;
    }
}
