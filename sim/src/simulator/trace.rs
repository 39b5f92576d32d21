//! What the simulator writes to the trace, and the coverage markers it counts.

use crate::trace::{TraceEvent, TraceLine, TraceSink};

use super::Simulator;

impl Simulator {
    /// Whether anything records the trace (so callers can skip gathering what it would say).
    pub(crate) fn tracing(&self) -> bool {
        self.tracer.is_on()
    }

    /// Records a trace event now.
    pub(crate) fn log(&mut self, event: impl FnOnce() -> TraceEvent) {
        if !self.tracer.is_on() {
            return;
        }
        let line = TraceLine {
            t_ns: self.now.as_nanos(),
            event: event(),
        };
        self.tracer.record(line);
    }

    /// Turns on the trace to `sink` (which also records every message and delivery); it opens
    /// with the processes already running.
    pub(crate) fn trace_to(&mut self, sink: TraceSink) {
        self.tracer.start(sink);
        let running: Vec<String> = self.nodes.values().map(|n| n.id.to_string()).collect();
        for member in running {
            self.log(|| TraceEvent::ProcessStarted { member });
        }
    }

    /// Records how many shards each running member's region hosts, once per simulated second
    /// (reads the nodes only, so the run is the same traced or not).
    pub(crate) fn sample_hosting(&mut self) {
        if !self.tracer.sample_due(self.now) {
            return;
        }
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

    /// Counts a coverage marker.
    pub(crate) fn mark(&mut self, marker: &'static str) {
        *self.coverage.entry(marker).or_default() += 1;
    }
}
