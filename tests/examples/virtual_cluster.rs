//! A multi-node Shoal cluster in one process, on the embedded defaults.
//!
//! Five nodes run the real core through the shared `Driver`, on the simulator's scripted
//! cluster (`sim::scripted`): an in-memory network that encodes every message with the real
//! codec (FIFO per link, 1–5 ms latency), entities that take 2 ms to stop, virtual time. The
//! demo:
//!
//! 1. starts three nodes and sends 10 000 messages to 1 000 `counter` entities;
//! 2. adds two nodes and lets the coordinator rebalance shards onto them;
//! 3. shuts node 2 down gracefully (its shards are handed off, no message is lost);
//! 4. crashes the coordinator's node and shows the new coordinator rebuilding its table;
//! 5. checks that every message was delivered exactly once, in order, and prints statistics.
//!
//! Run: `cargo run -p shoal-tests --example virtual_cluster`

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use shoal_core::{
    Command, EntityId, EntityType, EntityTypeConfig, Input, MemberStatus, NodeId, Payload, Reply,
    StopReason,
};
use sim::scripted::{Cluster, EntityBehaviour, StopAnswer, TYPE, config};

const ENTITIES: u64 = 1_000;

/// Counters take a moment to stop, as real entities would.
struct Counters;

impl EntityBehaviour for Counters {
    fn on_stop(&mut self, _: NodeId, _: &EntityId, _: StopReason) -> StopAnswer {
        StopAnswer::After(Duration::from_millis(2))
    }
}

/// SplitMix64: the demo's traffic is deterministic.
struct Traffic(u64);

impl Traffic {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % bound
    }
}

/// Starts node `n` on the embedded defaults (100 shards) and publishes it Up.
fn start_node(c: &mut Cluster, n: u64) {
    let mut entity_type = EntityTypeConfig::new(TYPE);
    entity_type.number_of_shards = 100;
    c.add_node(config(n, entity_type));
    c.publish_view();
}

fn shards_per_node(c: &Cluster) -> String {
    (c.hosting().iter())
        .map(|(n, shards)| format!("n{n}: {:>3}", shards.len()))
        .collect::<Vec<_>>()
        .join("  ")
}

fn main() {
    let mut c = Cluster::new();
    c.set_latency(Duration::from_millis(1), Duration::from_millis(5), 0x5eed);
    c.set_behaviour(Counters);
    // Tens of thousands of messages: the trace keeps entity effects and events only.
    c.trace_network(false);
    let mut traffic = Traffic(0x5eed);
    let mut sent: BTreeMap<String, u32> = BTreeMap::new();
    let mut send_burst = |c: &mut Cluster, count: u32, from: u64| {
        for _ in 0..count {
            let entity = format!("user-{}", traffic.below(ENTITIES));
            let seq = sent.entry(entity.clone()).or_default();
            let payload = Payload(seq.to_le_bytes().to_vec());
            *seq += 1;
            let tell = Input::Tell {
                entity_type: EntityType::new(TYPE),
                entity: EntityId::new(entity),
                payload,
            };
            c.input(from, tell);
        }
    };

    println!("Shoal demo: an in-process cluster driven by shoal-core's Driver (virtual time)\n");
    for n in 1..=3 {
        start_node(&mut c, n);
    }
    c.advance(Duration::from_millis(100));
    println!("[{}] 3 nodes up; node 1 runs the coordinator", c.now());
    // Every message comes from one node at a time, so per-entity order is one sequence to check.
    send_burst(&mut c, 10_000, 1);
    c.advance(Duration::from_secs(1));
    println!(
        "[{}] 10 000 messages sent; {} entities started; shards per node: {}",
        c.now(),
        c.starts(),
        shards_per_node(&c)
    );

    start_node(&mut c, 4);
    start_node(&mut c, 5);
    println!(
        "[{}] nodes 4 and 5 joined; rebalancing every 10 s, at most 10 shards per round",
        c.now()
    );
    for _ in 0..6 {
        send_burst(&mut c, 500, 1);
        c.advance(Duration::from_secs(10));
        println!("[{}] shards per node: {}", c.now(), shards_per_node(&c));
    }

    c.command(2, Command::GracefulShutdown { entity_type: None });
    send_burst(&mut c, 1_000, 1);
    c.advance(Duration::from_secs(5));
    println!(
        "[{}] node 2 shut down gracefully; shards per node: {}",
        c.now(),
        shards_per_node(&c)
    );
    c.member_mut(2).status = MemberStatus::Leaving;
    c.publish_view();
    // Its process exits.
    c.crash(2);
    c.publish_view();

    println!("[{}] node 1 (the coordinator) crashes", c.now());
    c.crash(1);
    c.publish_view();
    c.advance(Duration::from_secs(1));
    let t = EntityType::new(TYPE);
    let table = c
        .node(3)
        .coordinator_allocations(&t)
        .map_or(0, BTreeMap::len);
    println!(
        "[{}] node 3 took over and rebuilt its table from registrations: {table} shards known",
        c.now()
    );
    // Node 1's shards are unknown to the new coordinator until the removal margin passes.
    send_burst(&mut c, 2_000, 3);
    c.advance(Duration::from_secs(30));
    println!(
        "[{}] after down-removal-margin (20 s) node 1's shards were re-allocated: {}",
        c.now(),
        shards_per_node(&c)
    );

    let stats = c.command(3, Command::GetClusterShardingStats { entity_type: t });
    c.advance(Duration::from_secs(1));
    if let Some(Ok(Reply::ClusterShardingStats { regions, failed })) = c.reply(stats) {
        for r in regions {
            let entities: u32 = r.shards.iter().map(|(_, n)| n).sum();
            println!(
                "  stats: region {} hosts {} shards, {} live entities",
                r.region,
                r.shards.len(),
                entities
            );
        }
        println!("  stats: {} regions did not answer", failed.len());
    }

    // Every message was delivered at most once and in order; those in flight to node 1 when it
    // crashed may be lost (at-most-once under crashes); all others arrive exactly once.
    let mut complete = 0;
    let mut lost_in_crash = 0;
    for (entity, count) in &sent {
        let inbox: Vec<u32> = (c.received(entity).into_iter())
            .map(|(_, p)| u32::from_le_bytes(p.0[..4].try_into().expect("4-byte payload")))
            .collect();
        let unique: BTreeSet<u32> = inbox.iter().copied().collect();
        assert_eq!(unique.len(), inbox.len(), "{entity}: no duplicates");
        assert!(inbox.windows(2).all(|p| p[0] < p[1]), "{entity}: in order");
        if inbox.len() == *count as usize {
            complete += 1;
        } else {
            lost_in_crash += 1;
        }
    }
    let messages: u32 = sent.values().sum();
    let (frames, bytes) = c.wire();
    println!(
        "\n{messages} messages to {} entities: {complete} entities got every message exactly once and in order; {lost_in_crash} lost messages in flight to the crashed node; {} dead letters",
        sent.len(),
        c.dead_letters()
    );
    println!(
        "{frames} frames, {} KiB on the wire (postcard + 1 version byte)",
        bytes / 1024
    );
}
