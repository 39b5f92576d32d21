//! The client side: workers asking increments of every counter through the harness's proxy
//! node, each with its own sequence per counter, recording what was acknowledged, when asks
//! failed and how long they took.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use shoal::{AskError, Region};

use crate::member::{Counter, CounterOp, entity_id};

/// How long an increment may take before it counts as failed.
pub(crate) const ASK_TIMEOUT: Duration = Duration::from_secs(3);

/// What one worker saw.
#[derive(Default)]
pub(crate) struct WorkerReport {
    /// `(entity, seq)` of every acknowledged increment.
    pub(crate) acknowledged: Vec<(u32, u64)>,
    /// Ask latencies in microseconds (acknowledged asks only).
    pub(crate) latencies: Vec<u32>,
    /// Failed asks by error, and when the last one failed.
    pub(crate) failures: std::collections::BTreeMap<String, u64>,
    /// Times of failed asks (since the run's start), for recovery figures.
    pub(crate) failed_at: Vec<Duration>,
}

/// Shared live counters for the progress view.
#[derive(Default)]
pub(crate) struct Progress {
    pub(crate) acknowledged: AtomicU64,
    pub(crate) failed: AtomicU64,
}

/// Runs worker `sender` until `stop`: visits every counter in turn from its own offset.
pub(crate) async fn worker(
    sender: u32,
    workers: u32,
    entities: u32,
    region: Region<Counter>,
    started: Instant,
    stop: Arc<AtomicBool>,
    progress: Arc<Progress>,
) -> WorkerReport {
    let mut report = WorkerReport::default();
    let mut seqs = vec![0u64; entities as usize];
    let mut next = (u64::from(sender) * u64::from(entities) / u64::from(workers)) as u32;
    while !stop.load(Ordering::Relaxed) {
        let entity = next;
        next = (next + 1) % entities;
        seqs[entity as usize] += 1;
        let seq = seqs[entity as usize];
        let asked = Instant::now();
        let outcome = region
            .entity_ref(entity_id(entity))
            .ask(&CounterOp::Increment { sender, seq }, ASK_TIMEOUT)
            .await;
        match outcome {
            Ok(_) => {
                report.acknowledged.push((entity, seq));
                report
                    .latencies
                    .push(asked.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
                progress.acknowledged.fetch_add(1, Ordering::Relaxed);
            }
            Err(AskError::ShuttingDown) => {
                // The harness's own node stopped: nothing more can be asked.
                *report.failures.entry("ShuttingDown".into()).or_default() += 1;
                break;
            }
            Err(error) => {
                *report.failures.entry(label(&error)).or_default() += 1;
                report.failed_at.push(started.elapsed());
                progress.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    report
}

fn label(error: &AskError) -> String {
    match error {
        AskError::DeadLetter(reason) => format!("dead letter ({reason:?})"),
        other => format!("{other:?}")
            .split(['(', ' '])
            .next()
            .unwrap_or_default()
            .to_string(),
    }
}

/// Asks every counter's total (at most `within`, retrying): the totals, `None` for a counter
/// that never answered.
pub(crate) async fn totals(
    region: &Region<Counter>,
    entities: u32,
    within: Duration,
) -> Vec<Option<u64>> {
    let deadline = Instant::now() + within;
    let mut totals = vec![None; entities as usize];
    loop {
        let missing: Vec<u32> = (0..entities)
            .filter(|&e| totals[e as usize].is_none())
            .collect();
        if missing.is_empty() || Instant::now() >= deadline {
            return totals;
        }
        for chunk in missing.chunks(256) {
            let asks = chunk.iter().map(|&e| {
                let counter = region.entity_ref(entity_id(e));
                async move { (e, counter.ask(&CounterOp::Get, ASK_TIMEOUT).await.ok()) }
            });
            for (e, total) in futures_util::future::join_all(asks).await {
                totals[e as usize] = total;
            }
        }
    }
}
