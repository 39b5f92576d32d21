//! Loopback figures of the runtime: `tell` throughput on one node and across three, `ask`
//! latency, and the time from a node's crash to its shards serving again, each next to a
//! baseline timed in the same run where one exists.
//!
//! `cargo run --release -p shoal --example loopback_figures [-- --quick]`

#[path = "common/loopback.rs"]
mod loopback;

use std::time::{Duration, Instant};

use shoal::{Entity, EntityContext, EntityTypeConfig, Node, NodeBuilder, ShardingSettings};

struct Counter(u64);

impl Entity for Counter {
    type Message = u64;
    type Reply = u64;

    async fn handle(&mut self, _ctx: &mut EntityContext, add: u64) -> u64 {
        self.0 += add;
        self.0
    }
}

const ASK: Duration = Duration::from_secs(10);

fn builder(seeds: &[String]) -> NodeBuilder {
    let membership = loopback::quick_membership();
    let settings = ShardingSettings {
        retry_interval: Duration::from_millis(200),
        down_removal_margin: Duration::from_millis(500),
        ..ShardingSettings::default()
    };
    NodeBuilder::new("figures")
        .seed_nodes(seeds.iter().cloned())
        .membership(membership)
        .settings(settings)
        .mailbox_capacity(100_000)
        .transport(shoal::TransportSettings {
            user_queue: 1_000_000,
            ..Default::default()
        })
        .entity(EntityTypeConfig::new("counter"), |_| Counter(0))
}

async fn cluster(n: usize) -> Vec<Node> {
    let first = builder(&[]).start().await.unwrap();
    let seeds = vec![first.address().to_string()];
    let mut nodes = vec![first];
    for _ in 1..n {
        nodes.push(builder(&seeds).start().await.unwrap());
    }
    for node in &nodes {
        let region = node.region::<Counter>("counter").unwrap();
        while region.current_regions().await.map_or(0, |r| r.len()) < n {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    nodes
}

/// Tells `per_entity` messages to each of `entities` entities from `node`, then asks each for
/// its total (so every tell was handled): messages per second.
async fn tell_rate(node: &Node, entities: usize, per_entity: u64) -> f64 {
    let region = node.region::<Counter>("counter").unwrap();
    let refs: Vec<_> = (0..entities)
        .map(|i| region.entity_ref(format!("e{i}")))
        .collect();
    // Start them first: activation is not what is measured here.
    let before: Vec<u64> = futures_util::future::join_all(refs.iter().map(|r| r.ask(&0, ASK)))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let start = Instant::now();
    for _ in 0..per_entity {
        for r in &refs {
            r.tell(&1).await.unwrap();
        }
    }
    let after = futures_util::future::join_all(refs.iter().map(|r| r.ask(&0, ASK))).await;
    let elapsed = start.elapsed();
    for (b, a) in before.iter().zip(after) {
        assert_eq!(a.unwrap(), b + per_entity, "a tell was lost");
    }
    (entities as u64 * per_entity) as f64 / elapsed.as_secs_f64()
}

/// The same messages through raw tokio channels to one task per entity (the baseline).
async fn mpsc_rate(entities: usize, per_entity: u64) -> f64 {
    let mut senders = Vec::new();
    let mut tasks = Vec::new();
    for _ in 0..entities {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(100_000);
        senders.push(tx);
        tasks.push(tokio::spawn(async move {
            let mut total = 0u64;
            while let Some(bytes) = rx.recv().await {
                total += postcard::from_bytes::<u64>(&bytes).unwrap();
            }
            total
        }));
    }
    let start = Instant::now();
    for _ in 0..per_entity {
        for tx in &senders {
            tx.send(postcard::to_allocvec(&1u64).unwrap())
                .await
                .unwrap();
        }
    }
    drop(senders);
    for task in tasks {
        assert_eq!(task.await.unwrap(), per_entity);
    }
    (entities as u64 * per_entity) as f64 / start.elapsed().as_secs_f64()
}

async fn ask_latencies(node: &Node, asks: usize) -> (Duration, Duration) {
    let region = node.region::<Counter>("counter").unwrap();
    let mut latencies = Vec::with_capacity(asks);
    for i in 0..asks {
        let r = region.entity_ref(format!("e{}", i % 1000));
        let start = Instant::now();
        r.ask(&1, ASK).await.unwrap();
        latencies.push(start.elapsed());
    }
    latencies.sort();
    (latencies[asks / 2], latencies[asks * 99 / 100])
}

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (entities, per_entity, asks) = if quick {
        (1_000, 20, 2_000)
    } else {
        (10_000, 20, 20_000)
    };
    println!("| figure | value | baseline (same run) | ratio |");
    println!("|---|---|---|---|");

    let baseline = mpsc_rate(entities, per_entity).await;
    let one = cluster(1).await;
    let local = tell_rate(&one[0], entities, per_entity).await;
    println!(
        "| tell, one node, {entities} entities | {local:.0} msg/s | raw tokio mpsc {baseline:.0} msg/s | {:.2} |",
        local / baseline
    );
    let (p50, p99) = ask_latencies(&one[0], asks).await;
    println!("| ask, one node, p50 / p99 | {p50:?} / {p99:?} | | |");
    one[0].abort().await;

    let three = cluster(3).await;
    let spread = tell_rate(&three[0], entities, per_entity).await;
    println!(
        "| tell, three nodes (2/3 remote), {entities} entities | {spread:.0} msg/s | one node {local:.0} msg/s | {:.2} |",
        spread / local
    );
    let (p50, p99) = ask_latencies(&three[0], asks).await;
    println!("| ask, three nodes, p50 / p99 | {p50:?} / {p99:?} | | |");

    // Crash the third node and time until every entity answers again from the first.
    let region = three[0].region::<Counter>("counter").unwrap();
    three[2].abort().await;
    let crashed = Instant::now();
    for i in 0..1000 {
        let r = region.entity_ref(format!("e{i}"));
        while r.ask(&0, Duration::from_millis(500)).await.is_err() {}
    }
    println!(
        "| crash to every shard serving again (FD pause 1 s, stable-after 2 s) | {:?} | | |",
        crashed.elapsed()
    );
}
