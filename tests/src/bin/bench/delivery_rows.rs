//! Reliable delivery: sends that complete when the entity confirms them, against plain asks to
//! the same entities in the same run (each waits for its entity's answer, so both measure a
//! round trip per message), on one node and across three.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use shoal::Node;
use shoal::delivery::{ProducerSettings, ReliableProducer};

use crate::nodes::{ASK, Counter, Setup};
use crate::runtime_rows::best_rates;
use crate::table::{Row, Target};

/// Concurrent senders, each sending to entities of its own in turn.
const SENDERS: usize = 64;

/// Entities addressed (spread over every node's shards).
const ENTITIES: usize = 256;

/// Messages per second of `SENDERS` tasks each making `per_sender` calls of `call` in turn
/// (the calls of one task go to its own entities, one after another).
async fn rate<F, Fut>(per_sender: usize, call: F) -> f64
where
    F: Fn(String) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let start = Instant::now();
    let tasks = (0..SENDERS).map(|s| {
        let call = call.clone();
        tokio::spawn(async move {
            for i in 0..per_sender {
                let entity = (s + i * SENDERS) % ENTITIES;
                call(format!("d{entity}")).await;
            }
        })
    });
    for task in join_all(tasks).await {
        task.expect("a sender finishes");
    }
    (SENDERS * per_sender) as f64 / start.elapsed().as_secs_f64()
}

/// The rows for a cluster of `n` nodes; the producer and the asker are on the first.
async fn rows_on(n: usize, quick: bool, round: &mut usize) -> Row {
    let nodes: Vec<Node> = Setup::new().cluster(n).await;
    let region = nodes[0].region::<Counter>("counter").expect("hosted");
    // Every entity started first: activation is not what is measured.
    let refs: Vec<_> = (0..ENTITIES)
        .map(|e| region.entity_ref(format!("d{e}")))
        .collect();
    for answer in join_all(refs.iter().map(|r| r.ask(&0, ASK))).await {
        answer.expect("answers");
    }
    let settings = ProducerSettings {
        resend_after: Duration::from_secs(5),
        ..ProducerSettings::default()
    };
    let per_sender = if quick { 100 } else { 1_000 };
    let (asks, reliable) = best_rates(
        |_| {
            let region = region.clone();
            rate(per_sender, move |id| {
                let counter = region.entity_ref(id);
                async move {
                    counter.ask(&1, ASK).await.expect("answers");
                }
            })
        },
        |_| {
            *round += 1;
            let name = format!("bench-{n}-{round}");
            let region = region.clone();
            async move {
                let producer: ReliableProducer<Counter> = region
                    .reliable_producer(name, settings)
                    .await
                    .expect("a producer starts");
                rate(per_sender, move |id| {
                    let producer = producer.clone();
                    async move {
                        producer.send(id, &1).await.expect("confirmed");
                    }
                })
                .await
            }
        },
    )
    .await;
    for node in &nodes {
        node.leave().await;
    }
    let figure = match n {
        1 => "reliable sends / s, one node (confirmed; vs asks to the same entities)",
        _ => "reliable sends / s, three nodes (confirmed; vs asks to the same entities)",
    };
    Row::ratio(
        figure,
        format!("{reliable:.0}"),
        format!("{asks:.0}"),
        reliable / asks,
        Target::None,
    )
}

/// One node, then three.
pub(crate) async fn rows(quick: bool) -> Vec<Row> {
    let mut round = 0;
    let mut rows = Vec::new();
    for n in [1, 3] {
        rows.push(rows_on(n, quick, &mut round).await);
    }
    rows
}
