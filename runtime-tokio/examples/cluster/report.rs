//! The summary table at the end of a run: traffic, latency, failures, the tour's measured
//! figures, dead letters by reason and the verification's results.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::verify::Verdict;
use crate::workload::WorkerReport;

/// Everything the table shows.
pub(crate) struct Summary<'a> {
    pub(crate) setup: String,
    pub(crate) reports: &'a [(u32, WorkerReport)],
    pub(crate) traffic: Duration,
    pub(crate) figures: &'a [(String, String)],
    /// Dead letters of the harness's own node, by reason.
    pub(crate) harness_dead_letters: BTreeMap<String, u64>,
    pub(crate) verdict: &'a Verdict,
}

/// Prints the table (Markdown, so it can be pasted as it is).
pub(crate) fn print(summary: &Summary<'_>) {
    let Summary {
        reports, verdict, ..
    } = summary;
    let mut latencies: Vec<u32> = reports
        .iter()
        .flat_map(|(_, r)| r.latencies.iter().copied())
        .collect();
    latencies.sort_unstable();
    let at = |q: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * q) as usize)
            .map_or(0.0, |&micros| f64::from(micros) / 1000.0)
    };
    let mut failures: BTreeMap<String, u64> = BTreeMap::new();
    for (_, report) in reports.iter() {
        for (kind, n) in &report.failures {
            *failures.entry(kind.clone()).or_default() += n;
        }
    }
    let mut dead_letters = summary.harness_dead_letters.clone();
    for (reason, n) in &verdict.dead_letters {
        *dead_letters.entry(reason.clone()).or_default() += n;
    }
    let seconds = summary.traffic.as_secs_f64();
    let mut rows: Vec<(String, String)> = vec![
        ("setup".into(), summary.setup.clone()),
        (
            "increments acknowledged".into(),
            format!(
                "{} in {seconds:.1} s ({:.0}/s)",
                latencies.len(),
                latencies.len() as f64 / seconds
            ),
        ),
        (
            "increment latency p50 / p99 / max".into(),
            format!("{:.2} ms / {:.2} ms / {:.0} ms", at(0.5), at(0.99), at(1.0)),
        ),
        ("failed increments".into(), counts(&failures)),
    ];
    rows.extend(summary.figures.iter().cloned());
    rows.extend([
        ("dead letters by reason".into(), counts(&dead_letters)),
        (
            "activations / deliveries journaled".into(),
            format!("{} / {}", verdict.activations, verdict.deliveries),
        ),
        (
            "single activation violations".into(),
            verdict.double_activations.len().to_string(),
        ),
        (
            "per-sender order violations (or duplicates)".into(),
            verdict.order_violations.len().to_string(),
        ),
        (
            "acknowledged increments lost".into(),
            verdict.lost.len().to_string(),
        ),
        (
            "acknowledged, in the store, journal line lost with a killed process".into(),
            verdict.journal_died.to_string(),
        ),
        (
            "acknowledged increments missing from final totals".into(),
            verdict.missing.len().to_string(),
        ),
        (
            "increments applied though their ask failed".into(),
            verdict.applied_unacknowledged.to_string(),
        ),
        (
            "increments applied twice".into(),
            verdict.applied_twice.len().to_string(),
        ),
        (
            "increments never applied".into(),
            verdict.never_applied.len().to_string(),
        ),
        (
            "counters whose total differs from their events in the store".into(),
            verdict.mismatched.len().to_string(),
        ),
        (
            "counters silent at the end".into(),
            verdict.silent.len().to_string(),
        ),
    ]);
    println!();
    println!("| figure | value |");
    println!("|---|---|");
    for (name, value) in rows {
        println!("| {name} | {value} |");
    }
    let firsts = [
        ("double activations", first(&verdict.double_activations)),
        ("order violations", first(&verdict.order_violations)),
        ("lost", first(&verdict.lost)),
        ("missing from totals", first(&verdict.missing)),
        (
            "mismatched (counter, total, journaled)",
            first(&verdict.mismatched),
        ),
        ("silent", first(&verdict.silent)),
        ("applied twice", first(&verdict.applied_twice)),
        ("never applied", first(&verdict.never_applied)),
    ];
    for (what, list) in firsts {
        if let Some(list) = list {
            println!("first {what}: {list}");
        }
    }
}

fn counts(by: &BTreeMap<String, u64>) -> String {
    if by.is_empty() {
        return "none".into();
    }
    by.iter()
        .map(|(what, n)| format!("{what} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn first<T: std::fmt::Debug>(items: &[T]) -> Option<String> {
    (!items.is_empty()).then(|| format!("{:?}", &items[..items.len().min(10)]))
}
