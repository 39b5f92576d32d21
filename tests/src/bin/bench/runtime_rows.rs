//! One runtime node on loopback: `tell` throughput against raw tokio mpsc, activations against
//! bare `tokio::spawn`, `ask` latency against an mpsc + oneshot round trip, and heap bytes per
//! idle entity against an idle task with its channel.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use shoal::Node;
use tokio::sync::{mpsc, oneshot};

use crate::ROUNDS;
use crate::alloc::live_bytes;
use crate::nodes::{ASK, Counter, Ordered, Setup, Tally, wait_for_count};
use crate::table::{Row, Target};

/// Runs `baseline` and `figure` alternately [`ROUNDS`] times (each told its round) and keeps
/// the highest rate of each.
pub(crate) async fn best_rates<B, F>(
    mut baseline: impl FnMut(usize) -> B,
    mut figure: impl FnMut(usize) -> F,
) -> (f64, f64)
where
    B: Future<Output = f64>,
    F: Future<Output = f64>,
{
    let (mut best_baseline, mut best_figure) = (0f64, 0f64);
    for round in 0..ROUNDS {
        best_baseline = best_baseline.max(baseline(round).await);
        best_figure = best_figure.max(figure(round).await);
    }
    (best_baseline, best_figure)
}

/// Tells `per_entity` messages to each of `entities` running entities from `node`, then asks
/// each for its total (so every tell was handled): messages per second.
pub(crate) async fn tell_rate(node: &Node, ids: &[String], per_entity: u64) -> f64 {
    let region = node.region::<Counter>("counter").expect("hosted");
    let refs: Vec<_> = ids.iter().map(|i| region.entity_ref(i.as_str())).collect();
    // Started first: activation is not what is measured here.
    let before: Vec<u64> = join_all(refs.iter().map(|r| r.ask(&0, ASK)))
        .await
        .into_iter()
        .map(|r| r.expect("answers"))
        .collect();
    let start = Instant::now();
    for _ in 0..per_entity {
        for r in &refs {
            r.tell(&1).await.expect("accepted");
        }
    }
    let after = join_all(refs.iter().map(|r| r.ask(&0, ASK))).await;
    let elapsed = start.elapsed();
    for (b, a) in before.iter().zip(after) {
        assert_eq!(a.expect("answers"), b + per_entity, "a tell was lost");
    }
    (ids.len() as u64 * per_entity) as f64 / elapsed.as_secs_f64()
}

/// The same messages, serialized the same way, through raw tokio channels to one task per
/// entity: messages per second.
pub(crate) async fn mpsc_rate(entities: usize, per_entity: u64) -> f64 {
    let mut senders = Vec::new();
    let mut tasks = Vec::new();
    for _ in 0..entities {
        let (tx, mut rx) = mpsc::channel::<Vec<u8>>(100_000);
        senders.push(tx);
        tasks.push(tokio::spawn(async move {
            let mut total = 0u64;
            while let Some(bytes) = rx.recv().await {
                total += postcard::from_bytes::<u64>(&bytes).expect("decodes");
            }
            total
        }));
    }
    let start = Instant::now();
    for _ in 0..per_entity {
        for tx in &senders {
            let bytes = postcard::to_allocvec(&1u64).expect("encodes");
            tx.send(bytes).await.expect("open");
        }
    }
    drop(senders);
    for task in tasks {
        assert_eq!(task.await.expect("ran"), per_entity);
    }
    (entities as u64 * per_entity) as f64 / start.elapsed().as_secs_f64()
}

/// First messages to `n` new entities until each handled it: activations per second.
async fn activation_rate(node: &Node, tally: &AtomicUsize, n: usize, tag: &str) -> f64 {
    let region = node.region::<Tally>("tally").expect("hosted");
    let already = tally.load(Ordering::Relaxed);
    let start = Instant::now();
    for i in 0..n {
        region
            .entity_ref(format!("{tag}{i}"))
            .tell(&1)
            .await
            .expect("accepted");
    }
    wait_for_count(tally, already + n).await;
    n as f64 / start.elapsed().as_secs_f64()
}

/// `n` tasks spawned, each handed its first message: tasks per second.
async fn spawn_rate(n: usize) -> f64 {
    let handled = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    for _ in 0..n {
        let handled = handled.clone();
        let bytes = postcard::to_allocvec(&1u64).expect("encodes");
        tokio::spawn(async move {
            let m: u64 = postcard::from_bytes(&bytes).expect("decodes");
            handled.fetch_add(m as usize, Ordering::Relaxed);
        });
    }
    wait_for_count(&handled, n).await;
    n as f64 / start.elapsed().as_secs_f64()
}

fn percentiles(mut latencies: Vec<Duration>) -> (Duration, Duration) {
    latencies.sort();
    let n = latencies.len();
    (latencies[n / 2], latencies[n * 99 / 100])
}

/// `asks` sequential asks over 1,000 running entities: p50 and p99.
pub(crate) async fn ask_latencies(node: &Node, asks: usize) -> (Duration, Duration) {
    let region = node.region::<Counter>("counter").expect("hosted");
    let mut latencies = Vec::with_capacity(asks);
    for i in 0..asks {
        let r = region.entity_ref(format!("e{}", i % 1000));
        let start = Instant::now();
        r.ask(&1, ASK).await.expect("answers");
        latencies.push(start.elapsed());
    }
    percentiles(latencies)
}

/// The baseline round trip: a request over mpsc to a task that answers on a oneshot.
async fn mpsc_ask_latencies(asks: usize) -> (Duration, Duration) {
    let (tx, mut rx) = mpsc::channel::<(Vec<u8>, oneshot::Sender<Vec<u8>>)>(1024);
    let task = tokio::spawn(async move {
        let mut total = 0u64;
        while let Some((bytes, reply)) = rx.recv().await {
            total += postcard::from_bytes::<u64>(&bytes).expect("decodes");
            let _ = reply.send(postcard::to_allocvec(&total).expect("encodes"));
        }
    });
    let mut latencies = Vec::with_capacity(asks);
    for _ in 0..asks {
        let start = Instant::now();
        let (reply, answer) = oneshot::channel();
        let bytes = postcard::to_allocvec(&1u64).expect("encodes");
        tx.send((bytes, reply)).await.expect("open");
        let bytes = answer.await.expect("answered");
        let _: u64 = postcard::from_bytes(&bytes).expect("decodes");
        latencies.push(start.elapsed());
    }
    drop(tx);
    task.await.expect("ran");
    percentiles(latencies)
}

/// Request/reply over `entities` running entities, one ask in flight per entity: each of
/// `entities` clients asks its own entity `per_entity` times in turn. Asks per second.
async fn request_reply_rate(node: &Node, entities: usize, per_entity: usize) -> f64 {
    let region = node.region::<Counter>("counter").expect("hosted");
    let refs: Vec<_> = (0..entities)
        .map(|i| region.entity_ref(format!("rr{i}")))
        .collect();
    // Started first: activation is not what is measured here.
    join_all(refs.iter().map(|r| r.ask(&0, ASK))).await;
    let start = Instant::now();
    join_all(refs.iter().map(|r| async move {
        for _ in 0..per_entity {
            r.ask(&1, ASK).await.expect("answers");
        }
    }))
    .await;
    (entities * per_entity) as f64 / start.elapsed().as_secs_f64()
}

/// The baseline: the same pattern against plain tokio actors, each a task with an mpsc
/// mailbox answering on a oneshot, with the same postcard payloads.
async fn actor_request_reply_rate(entities: usize, per_entity: usize) -> f64 {
    type Request = (Vec<u8>, oneshot::Sender<Vec<u8>>);
    let actors: Vec<mpsc::Sender<Request>> = (0..entities)
        .map(|_| {
            let (tx, mut rx) = mpsc::channel::<Request>(16);
            tokio::spawn(async move {
                let mut total = 0u64;
                while let Some((bytes, reply)) = rx.recv().await {
                    total += postcard::from_bytes::<u64>(&bytes).expect("decodes");
                    let _ = reply.send(postcard::to_allocvec(&total).expect("encodes"));
                }
            });
            tx
        })
        .collect();
    let start = Instant::now();
    join_all(actors.iter().map(|actor| async move {
        for _ in 0..per_entity {
            let (reply, answer) = oneshot::channel();
            let bytes = postcard::to_allocvec(&1u64).expect("encodes");
            actor.send((bytes, reply)).await.expect("open");
            let bytes = answer.await.expect("answered");
            let _: u64 = postcard::from_bytes(&bytes).expect("decodes");
        }
    }))
    .await;
    (entities * per_entity) as f64 / start.elapsed().as_secs_f64()
}

/// Request/reply with `in_flight` asks in flight per entity: one client per entity of
/// `entities` sends sequence numbers 1..=`in_flight` at once and awaits every reply; the
/// entities count numbers that arrive out of order. Asks per second (entities named by
/// `tag`, started first).
async fn pipelined_rate(
    node: &Node,
    misordered: &AtomicUsize,
    (entities, in_flight): (usize, u64),
    tag: &str,
) -> f64 {
    let region = node.region::<Ordered>("ordered").expect("hosted");
    let refs: Vec<_> = (0..entities)
        .map(|i| region.entity_ref(format!("{tag}{i}")))
        .collect();
    join_all(refs.iter().map(|r| r.ask(&0, ASK))).await;
    let start = Instant::now();
    join_all(refs.iter().map(|r| async move {
        let asks = (1..=in_flight).map(|seq| async move { r.ask(&seq, ASK).await });
        for (seq, reply) in (1..).zip(join_all(asks).await) {
            assert_eq!(reply.expect("answers"), seq);
        }
    }))
    .await;
    let rate = (entities as u64 * in_flight) as f64 / start.elapsed().as_secs_f64();
    assert_eq!(
        misordered.load(Ordering::Relaxed),
        0,
        "per-sender order broke"
    );
    rate
}

/// The baseline: plain tokio actors, each client sending its `in_flight` requests one after
/// the other on the actor's mpsc mailbox (concurrent sends of one task need not keep their
/// order there), then awaiting their oneshot replies; the actors check order.
async fn actor_pipelined_rate(entities: usize, in_flight: u64) -> f64 {
    type Request = (Vec<u8>, oneshot::Sender<Vec<u8>>);
    let misordered = Arc::new(AtomicUsize::new(0));
    let actors: Vec<mpsc::Sender<Request>> = (0..entities)
        .map(|_| {
            let (tx, mut rx) = mpsc::channel::<Request>(in_flight as usize);
            let misordered = misordered.clone();
            tokio::spawn(async move {
                let mut next = 1u64;
                while let Some((bytes, reply)) = rx.recv().await {
                    let seq: u64 = postcard::from_bytes(&bytes).expect("decodes");
                    if seq != next {
                        misordered.fetch_add(1, Ordering::Relaxed);
                    }
                    next = seq + 1;
                    let _ = reply.send(postcard::to_allocvec(&seq).expect("encodes"));
                }
            });
            tx
        })
        .collect();
    let start = Instant::now();
    join_all(actors.iter().map(|actor| async move {
        let mut answers = Vec::with_capacity(in_flight as usize);
        for seq in 1..=in_flight {
            let (reply, answer) = oneshot::channel();
            let bytes = postcard::to_allocvec(&seq).expect("encodes");
            actor.send((bytes, reply)).await.expect("open");
            answers.push(answer);
        }
        for (seq, answer) in (1..).zip(join_all(answers).await) {
            let bytes = answer.expect("answered");
            assert_eq!(postcard::from_bytes::<u64>(&bytes).expect("decodes"), seq);
        }
    }))
    .await;
    let rate = (entities as u64 * in_flight) as f64 / start.elapsed().as_secs_f64();
    assert_eq!(
        misordered.load(Ordering::Relaxed),
        0,
        "per-sender order broke"
    );
    rate
}

/// Heap bytes per idle entity: `n` entities each handled one message and wait for more.
async fn runtime_bytes_per_entity(node: &Node, tally: &AtomicUsize, n: usize) -> f64 {
    // Settle what the earlier rows left (mailboxes shrinking, transports idle).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = live_bytes();
    activation_rate(node, tally, n, "idle-").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    (live_bytes() - before) as f64 / n as f64
}

/// The baseline: `n` idle tasks, each holding its mailbox receiver, after one message.
async fn task_bytes_per_entity(n: usize) -> f64 {
    let handled = Arc::new(AtomicUsize::new(0));
    let before = live_bytes();
    let mut senders = Vec::with_capacity(n);
    for _ in 0..n {
        let (tx, mut rx) = mpsc::channel::<Vec<u8>>(16);
        let handled = handled.clone();
        tokio::spawn(async move {
            while let Some(bytes) = rx.recv().await {
                let m: u64 = postcard::from_bytes(&bytes).expect("decodes");
                handled.fetch_add(m as usize, Ordering::Relaxed);
            }
        });
        tx.send(postcard::to_allocvec(&1u64).expect("encodes"))
            .await
            .expect("open");
        senders.push(tx);
    }
    wait_for_count(&handled, n).await;
    let bytes = (live_bytes() - before) as f64 / n as f64;
    drop(senders);
    bytes
}

/// A request/reply row over 1,000 entities (`what`: how many in flight) against plain tokio
/// actors, in asks per second.
fn request_reply_row(what: &str, asked: f64, baseline: f64) -> Row {
    Row::ratio(
        &format!("runtime: request/reply, 1,000 entities, {what}"),
        format!("{:.0} k asks/s", asked / 1e3),
        format!("plain tokio actors {:.0} k asks/s", baseline / 1e3),
        asked / baseline,
        Target::AtLeast(0.5),
    )
}

/// Every one-node row.
pub(crate) async fn rows(quick: bool) -> Vec<Row> {
    let (entities, per_entity, asks) = if quick {
        (2_000, 10, 2_000)
    } else {
        (10_000, 20, 20_000)
    };
    let mut rows = Vec::new();
    let setup = Setup::new();
    let node = setup.cluster(1).await.remove(0);
    let ids: Vec<String> = (0..entities).map(|i| format!("e{i}")).collect();

    let (node, ids) = (&node, &ids);
    let (baseline, local) = best_rates(
        |_| mpsc_rate(entities, per_entity),
        |_| tell_rate(node, ids, per_entity),
    )
    .await;
    rows.push(Row::ratio(
        &format!("runtime: tell throughput, one node, {entities} entities"),
        format!("{:.0} k msg/s", local / 1e3),
        format!("raw tokio mpsc {:.0} k msg/s", baseline / 1e3),
        local / baseline,
        Target::AtLeast(0.6),
    ));

    let n = if quick { 5_000 } else { 50_000 };
    let tally = &setup.tally;
    let (baseline, activations) = best_rates(
        |_| spawn_rate(n),
        |round| async move { activation_rate(node, tally, n, &format!("a{round}-")).await },
    )
    .await;
    rows.push(Row::ratio(
        &format!("runtime: entity activations ({n} new entities, one message each)"),
        format!("{:.0} k/s", activations / 1e3),
        format!("bare tokio::spawn {:.0} k/s", baseline / 1e3),
        activations / baseline,
        Target::AtLeast(0.5),
    ));

    let per_entity_asks = if quick { 10 } else { 100 };
    let (baseline, asked) = best_rates(
        |_| actor_request_reply_rate(1_000, per_entity_asks),
        |_| request_reply_rate(node, 1_000, per_entity_asks),
    )
    .await;
    rows.push(request_reply_row(
        &format!("one in flight each ({} asks)", 1_000 * per_entity_asks),
        asked,
        baseline,
    ));

    let in_flight = if quick { 10 } else { 100 };
    let misordered = &setup.misordered;
    let (baseline, asked) = best_rates(
        |_| actor_pipelined_rate(1_000, in_flight),
        |round| async move {
            let tag = format!("p{round}-");
            pipelined_rate(node, misordered, (1_000, in_flight), &tag).await
        },
    )
    .await;
    rows.push(request_reply_row(
        &format!(
            "{in_flight} in flight each, order checked ({} asks)",
            1_000 * in_flight
        ),
        asked,
        baseline,
    ));

    let (b50, b99) = mpsc_ask_latencies(asks).await;
    let (p50, p99) = ask_latencies(node, asks).await;
    rows.push(Row::ratio(
        "runtime: ask p50, one node",
        format!("{p50:.1?}"),
        format!("mpsc + oneshot round trip {b50:.1?}"),
        p50.as_secs_f64() / b50.as_secs_f64(),
        Target::None,
    ));
    rows.push(Row::ratio(
        "runtime: ask p99, one node",
        format!("{p99:.1?}"),
        format!("mpsc + oneshot round trip {b99:.1?}"),
        p99.as_secs_f64() / b99.as_secs_f64(),
        Target::None,
    ));

    let n = if quick { 5_000 } else { 20_000 };
    let baseline = task_bytes_per_entity(n).await;
    let per_entity = runtime_bytes_per_entity(node, tally, n).await;
    rows.push(Row::ratio(
        &format!("runtime: heap bytes per idle entity ({n} entities)"),
        format!("{per_entity:.0} B"),
        format!("idle task + mpsc channel {baseline:.0} B"),
        per_entity / baseline,
        Target::Value("≤ 512 B", per_entity <= 512.0),
    ));
    node.abort().await;
    rows
}
