//! The client side: workers sending increments of every counter through the harness's proxy
//! node (reliable sends, or asks: see `sending`), each with its own sequence per counter,
//! recording what was sent, what was acknowledged, why sends failed and how long they took;
//! and the sweep asking every counter's total.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use shoal::{EntityTypeConfig, Region};

use crate::member::{COUNTER, Counter, CounterOp, entity_id};
use crate::sending::{Outcome, Sender};

/// How long a worker told to stop waits for its reliable sends still unconfirmed (those of
/// counters whose home is being replaced) before it reports them unconfirmed.
const DRAIN: Duration = Duration::from_secs(60);

/// Asks a worker keeps in flight (each to a different counter), so one counter whose home is
/// down delays only its own asks, not the worker's traffic to every other counter.
const IN_FLIGHT: usize = 16;

/// What one worker saw.
#[derive(Default)]
pub(crate) struct WorkerReport {
    /// `(entity, seq)` of every increment sent.
    pub(crate) issued: Vec<(u32, u64)>,
    /// `(entity, seq)` of every acknowledged increment.
    pub(crate) acknowledged: Vec<(u32, u64)>,
    /// Latencies in microseconds (acknowledged increments only).
    pub(crate) latencies: Vec<u32>,
    /// Failed increments by error.
    pub(crate) failures: BTreeMap<String, u64>,
}

/// Shared live counters for the progress view.
#[derive(Default)]
pub(crate) struct Progress {
    pub(crate) acknowledged: AtomicU64,
    pub(crate) failed: AtomicU64,
}

/// Shards whose counters failed to answer, shared by the workers: a client's circuit breaker
/// per shard. The value says whether some worker is probing the shard already.
#[derive(Clone, Default)]
pub(crate) struct Breaker(Arc<Mutex<BTreeMap<u32, bool>>>);

impl Breaker {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u32, bool>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether to ask a counter of `shard` now (`Some`), and whether that ask is a probe:
    /// always while the shard is healthy; while it is suspect, once at a time and only by a
    /// worker that `may_probe` (one probe per worker, so probes of dead shards cannot take
    /// the slots of healthy ones).
    fn admit(&self, shard: u32, may_probe: bool) -> Option<bool> {
        match self.lock().get_mut(&shard) {
            None => Some(false),
            Some(probing) if may_probe && !*probing => {
                *probing = true;
                Some(true)
            }
            Some(_) => None,
        }
    }

    fn answered(&self, shard: u32, ok: bool) {
        let mut suspects = self.lock();
        if ok {
            suspects.remove(&shard);
        } else {
            suspects.insert(shard, false);
        }
    }
}

/// Runs worker `sender` until `stop`: visits every counter in turn from its own offset, with
/// up to `IN_FLIGHT` increments outstanding and never two to the same counter (so its
/// increments of one counter stay in order). A shard whose counter failed to answer (or, for
/// a reliable send, has not confirmed within the ask timeout: that send goes on, outside the
/// `IN_FLIGHT` slots) is probed by one increment at a time until it answers again
/// (`Breaker`), so the shards of a dead node do not take every slot while all the others
/// could be served. After `stop`, waits up to `DRAIN` for the sends still going on.
pub(crate) async fn worker(
    sender: u32,
    (workers, entities): (u32, u32),
    way: Sender,
    breaker: Breaker,
    stop: Arc<AtomicBool>,
    progress: Arc<Progress>,
) -> WorkerReport {
    let shards = EntityTypeConfig::new(COUNTER).number_of_shards;
    let shard_of: Vec<u32> = (0..entities)
        .map(|e| shoal_core::shard_of(&entity_id(e).into(), shards).0)
        .collect();
    let mut report = WorkerReport::default();
    let mut seqs = vec![0u64; entities as usize];
    let mut next = (u64::from(sender) * u64::from(entities) / u64::from(workers)) as u32;
    let in_flight = IN_FLIGHT.min(entities as usize);
    let mut busy = HashSet::new();
    let mut probing = false;
    let mut pending = FuturesUnordered::new();
    let mut lingering = FuturesUnordered::new();
    let mut drain_until = None;
    loop {
        // At most one lap over the counters per refill: busy ones and those of suspect
        // shards being probed are passed over.
        let mut lap = 0;
        while pending.len() < in_flight && lap < entities && !stop.load(Ordering::Relaxed) {
            let entity = next;
            next = (next + 1) % entities;
            lap += 1;
            if busy.contains(&entity) {
                continue;
            }
            let shard = shard_of[entity as usize];
            let Some(probe) = breaker.admit(shard, !probing) else {
                continue;
            };
            probing |= probe;
            busy.insert(entity);
            seqs[entity as usize] += 1;
            let seq = seqs[entity as usize];
            report.issued.push((entity, seq));
            let way = way.clone();
            pending.push(async move {
                let asked = Instant::now();
                let outcome = way
                    .increment(entity, CounterOp::Increment { sender, seq })
                    .await;
                (entity, seq, shard, probe, asked, outcome)
            });
        }
        if stop.load(Ordering::Relaxed) {
            if pending.is_empty() && lingering.is_empty() {
                return report;
            }
            let until = *drain_until.get_or_insert_with(|| Instant::now() + DRAIN);
            if Instant::now() >= until {
                let unconfirmed = (pending.len() + lingering.len()) as u64;
                *report
                    .failures
                    .entry("unconfirmed at the end".into())
                    .or_default() += unconfirmed;
                return report;
            }
        }
        let done = tokio::select! {
            Some(done) = pending.next() => done,
            Some(done) = lingering.next() => done,
            // Every shard left is being probed by another worker, or the drain goes on.
            () = tokio::time::sleep(Duration::from_millis(20)) => continue,
        };
        let (entity, seq, shard, probe, asked, outcome) = done;
        probing &= !probe;
        match outcome {
            Outcome::Done => {
                busy.remove(&entity);
                breaker.answered(shard, true);
                report.acknowledged.push((entity, seq));
                let micros = asked.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
                report.latencies.push(micros);
                progress.acknowledged.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::Slow(send) => {
                // Still going on: the counter stays busy, its shard suspect.
                breaker.answered(shard, false);
                lingering.push(Box::pin(async move {
                    let outcome = send
                        .await
                        .unwrap_or_else(|e| Outcome::Failed(e.to_string(), true));
                    (entity, seq, shard, false, asked, outcome)
                }));
            }
            Outcome::Failed(label, stopped) => {
                busy.remove(&entity);
                if stopped {
                    // The harness's own node stopped: nothing more can be sent.
                    stop.store(true, Ordering::Relaxed);
                } else {
                    breaker.answered(shard, false);
                    progress.failed.fetch_add(1, Ordering::Relaxed);
                }
                *report.failures.entry(label).or_default() += 1;
            }
        }
    }
}

/// How many total asks the sweep keeps in flight.
const SWEEP_IN_FLIGHT: usize = 1024;

/// Asks every counter's total (for at most `within`, asking again those that did not answer
/// each round): the totals, `None` for a counter that never answered.
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
        let left = deadline.saturating_duration_since(Instant::now());
        if missing.is_empty() || left.is_zero() {
            return totals;
        }
        // Short asks, so a round ends soon after the counters' homes are back.
        let timeout = left.min(Duration::from_secs(1));
        let asks = missing.into_iter().map(|e| {
            let counter = region.entity_ref(entity_id(e));
            async move {
                let total = counter.ask(&CounterOp::Get, timeout).await;
                (e, total.ok().and_then(Result::ok))
            }
        });
        let mut answers = futures_util::stream::iter(asks).buffer_unordered(SWEEP_IN_FLIGHT);
        while let Some((e, total)) = answers.next().await {
            totals[e as usize] = total;
        }
    }
}
