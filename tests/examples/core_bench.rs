//! Throughput of shoal-core's hot paths, as ratios against a baseline measured in the same run
//! (encoding + decoding the same wire frame), because the machine is shared and noisy.
//!
//! Run: `cargo run -p shoal-tests --release --example core_bench`

use std::hint::black_box;
use std::time::{Duration, Instant as WallClock};

use shoal_core::{
    Body, Config, Driver, EntityEffect, EntityId, EntityType, EntityTypeConfig, Envelope, Event,
    Incarnation, Input, Instant, Io, Member, MemberId, MembershipView, Message, Node, NodeId,
    Payload, ShardId, StoreRequest, Transmit, codec,
};

const MESSAGES: usize = 1_000_000;
const ENTITIES: usize = 10_000;

/// Counts effects; forwards sends to a queue the bench delivers by hand.
#[derive(Default)]
struct CountingIo {
    delivered: usize,
    outbox: Vec<Envelope>,
}

impl Io for CountingIo {
    fn send(&mut self, transmit: Transmit) {
        self.outbox.push(transmit.envelope);
    }
    fn entity(&mut self, effect: EntityEffect) {
        if matches!(effect, EntityEffect::Deliver { .. }) {
            self.delivered += 1;
        }
    }
    fn emit(&mut self, _event: Event) {}
    fn store(&mut self, request: StoreRequest) {
        unreachable!("the bench's type remembers nothing: {request:?}");
    }
}

fn node(n: u64) -> Driver {
    let mut t = EntityTypeConfig::new("counter");
    t.number_of_shards = 100;
    t.passivate_idle_after = None;
    let mut c = Config::new(NodeId(n), Incarnation(1)).with_entity_type(t);
    c.seed = n;
    Driver::new(Node::new(c, Instant::ZERO).expect("valid"), Instant::ZERO)
}

fn tell(entity: &EntityId) -> Input {
    Input::Tell {
        entity_type: EntityType::new("counter"),
        entity: entity.clone(),
        payload: Payload(vec![7; 32]),
    }
}

/// Delivers every queued envelope (a lossless, instant network), decoding each frame.
fn pump(drivers: &mut [Driver], io: &mut [CountingIo], now: Instant) {
    loop {
        let mut moved = false;
        for i in 0..io.len() {
            for env in std::mem::take(&mut io[i].outbox) {
                let frame = codec::encode(&env).expect("encodes");
                let env = codec::decode(&frame).expect("decodes");
                let to = (env.to.node.0 - 1) as usize;
                drivers[to].handle_input(now, Input::Receive(env), &mut io[to]);
                moved = true;
            }
        }
        if !moved {
            return;
        }
    }
}

fn cluster(nodes: u64) -> (Vec<Driver>, Vec<CountingIo>) {
    let mut drivers: Vec<Driver> = (1..=nodes).map(node).collect();
    let mut io: Vec<CountingIo> = (1..=nodes).map(|_| CountingIo::default()).collect();
    let view = MembershipView::new(
        (1..=nodes)
            .map(|n| Member::up(MemberId::new(n, 1), n, &[]))
            .collect(),
    );
    for (d, o) in drivers.iter_mut().zip(io.iter_mut()) {
        d.handle_input(Instant::ZERO, Input::MembershipChanged(view.clone()), o);
    }
    pump(&mut drivers, &mut io, Instant::ZERO);
    (drivers, io)
}

fn per_message(elapsed: Duration, n: usize) -> f64 {
    elapsed.as_nanos() as f64 / n as f64
}

fn main() {
    let entities: Vec<EntityId> = (0..ENTITIES)
        .map(|i| EntityId::new(format!("user-{i}")))
        .collect();

    // Baseline: one Forward frame encoded and decoded.
    let frame_env = Envelope {
        from: MemberId::new(2, 1),
        to: MemberId::new(1, 1),
        seq: 1,
        message: Message::Sharding {
            entity_type: EntityType::new("counter"),
            body: Body::Forward {
                shard: ShardId(1),
                entity: entities[1].clone(),
                payload: Payload(vec![7; 32]),
            },
        },
    };
    let start = WallClock::now();
    for _ in 0..MESSAGES {
        let frame = codec::encode(black_box(&frame_env)).expect("encodes");
        black_box(codec::decode(&frame).expect("decodes"));
    }
    let baseline = per_message(start.elapsed(), MESSAGES);

    // Local path: one node hosting every shard; Tell -> shard -> Deliver.
    let (mut d, mut io) = cluster(1);
    for e in &entities {
        d[0].handle_input(Instant::ZERO, tell(e), &mut io[0]);
    }
    pump(&mut d, &mut io, Instant::ZERO);
    io[0].delivered = 0;
    let start = WallClock::now();
    for i in 0..MESSAGES {
        d[0].handle_input(Instant::ZERO, tell(&entities[i % ENTITIES]), &mut io[0]);
    }
    let local = per_message(start.elapsed(), MESSAGES);
    assert_eq!(io[0].delivered, MESSAGES);

    // Remote path: Tell on node 2 for shards node 1 hosts: Forward, encode, decode, Deliver.
    let (mut d, mut io) = cluster(2);
    for e in &entities {
        d[1].handle_input(Instant::ZERO, tell(e), &mut io[1]);
        pump(&mut d, &mut io, Instant::ZERO);
    }
    io[0].delivered = 0;
    io[1].delivered = 0;
    let remote_target: Vec<&EntityId> = entities
        .iter()
        .filter(|e| {
            d[0].node()
                .hosted_shards(&EntityType::new("counter"))
                .contains(&shoal_core::shard_of(e, 100))
        })
        .collect();
    let start = WallClock::now();
    for i in 0..MESSAGES {
        d[1].handle_input(
            Instant::ZERO,
            tell(remote_target[i % remote_target.len()]),
            &mut io[1],
        );
        pump(&mut d, &mut io, Instant::ZERO);
    }
    let remote = per_message(start.elapsed(), MESSAGES);
    assert_eq!(io[0].delivered, MESSAGES);

    println!(
        "shoal-core hot paths ({MESSAGES} messages, {ENTITIES} entities, 32-byte payloads, release build)"
    );
    println!("  baseline: encode + decode one Forward frame   {baseline:8.1} ns/msg   1.00x");
    println!(
        "  local:    Tell -> hosted shard -> Deliver     {local:8.1} ns/msg   {:.2}x baseline  ({:.2} M msg/s)",
        local / baseline,
        1e3 / local
    );
    println!(
        "  remote:   Tell -> Forward -> wire -> Deliver  {remote:8.1} ns/msg   {:.2}x baseline  ({:.2} M msg/s)",
        remote / baseline,
        1e3 / remote
    );
}
