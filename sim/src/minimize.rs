//! Shrinking a failing run's fault schedule: delta debugging over its actions (remove halves,
//! then quarters, ... then single actions) keeps every removal after which the run still
//! breaks the same guarantee. Everything else the seed decides (workload, entity behaviour,
//! latencies) stays as it was, so the result is a short list of faults that explains the
//! failure and replays with `sim replay <seed> --schedule "<actions>"`.

use crate::check::Property;
use crate::options::Options;
use crate::report::Report;
use crate::run::run;
use crate::schedule::Schedule;

/// The outcome of a minimization.
#[derive(Debug)]
pub struct Minimized {
    /// The smallest failing schedule found.
    pub schedule: Schedule,
    /// The run of that schedule.
    pub report: Report,
    /// Runs spent.
    pub runs: usize,
}

/// Shrinks the schedule of `failing` (a failed run) to a locally minimal one whose run still
/// breaks the first property `failing` broke, spending at most `max_runs` runs. Returns `None`
/// if `failing` did not fail.
pub fn minimize(failing: &Report, max_runs: usize) -> Option<Minimized> {
    let property = failing.violations.first()?.property;
    let mut best = failing.schedule.clone();
    let mut best_report = None;
    let mut runs = 0;
    let mut chunk = best.len().div_ceil(2).max(1);
    loop {
        let mut removed_any = false;
        let mut start = 0;
        while start < best.len() && runs < max_runs {
            let mut candidate = best.clone();
            candidate.0.drain(start..(start + chunk).min(best.len()));
            runs += 1;
            let report = run_with(&failing.options, candidate.clone());
            if breaks(&report, property) {
                best = candidate;
                best_report = Some(report);
                removed_any = true;
            } else {
                start += chunk;
            }
        }
        if runs >= max_runs || (chunk == 1 && !removed_any) || best.is_empty() {
            break;
        }
        if !removed_any {
            chunk = chunk.div_ceil(2);
        }
        chunk = chunk.min(best.len().max(1));
    }
    let report = best_report.unwrap_or_else(|| {
        runs += 1;
        run_with(&failing.options, best.clone())
    });
    Some(Minimized {
        schedule: best,
        report,
        runs,
    })
}

fn run_with(options: &Options, schedule: Schedule) -> Report {
    run(Options {
        schedule: Some(schedule),
        ..options.clone()
    })
}

fn breaks(report: &Report, property: Property) -> bool {
    report.violations.iter().any(|v| v.property == property)
}
