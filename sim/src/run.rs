//! Running a simulation: the entry points, with or without a trace.

use crate::options::Options;
use crate::report::Report;
use crate::simulator::run_with_sink;
use crate::trace::{TraceLine, TraceSink};

/// Runs the simulation described by `options`.
pub fn run(options: Options) -> Report {
    run_traced(options, None)
}

/// Runs the simulation, writing a JSON-lines trace of every event to `trace` if given (see
/// [`crate::TraceLine`]; [`crate::read_trace`] reads it back).
pub fn run_traced(options: Options, trace: Option<Box<dyn std::io::Write>>) -> Report {
    run_with_sink(options, trace.map(TraceSink::Json)).0
}

/// Runs the simulation and returns its trace of every event with the report.
pub fn run_recorded(options: Options) -> (Report, Vec<TraceLine>) {
    match run_with_sink(options, Some(TraceSink::Memory(Vec::new()))) {
        (report, Some(TraceSink::Memory(lines))) => (report, lines),
        (report, _) => (report, Vec::new()),
    }
}
