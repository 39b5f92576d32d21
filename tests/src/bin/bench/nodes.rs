//! Runtime nodes on loopback for the runtime and remote rows, and the entities they host.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use shoal::{
    AllocationStrategyConfig, Entity, EntityContext, EntityTypeConfig, MembershipSettings, Node,
    NodeBuilder, SeedNode, ShardingSettings,
};

/// Every ask's timeout.
pub(crate) const ASK: Duration = Duration::from_secs(10);

/// Adds what it is told; answers its total.
pub(crate) struct Counter(u64);

impl Entity for Counter {
    type Message = u64;
    type Reply = u64;

    async fn handle(&mut self, _ctx: &mut EntityContext, add: u64) -> u64 {
        self.0 += add;
        self.0
    }
}

/// Counts the messages all its kind handled, in one shared counter.
pub(crate) struct Tally(Arc<AtomicUsize>);

impl Entity for Tally {
    type Message = u64;
    type Reply = ();

    async fn handle(&mut self, _ctx: &mut EntityContext, _m: u64) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Answers each sequence number it is sent; counts, in one shared counter, the numbers that
/// did not follow the one before (per-sender order broken).
pub(crate) struct Ordered {
    next: u64,
    misordered: Arc<AtomicUsize>,
}

impl Entity for Ordered {
    type Message = u64;
    type Reply = u64;

    async fn handle(&mut self, _ctx: &mut EntityContext, seq: u64) -> u64 {
        if seq != self.next {
            self.misordered.fetch_add(1, Ordering::Relaxed);
        }
        self.next = seq + 1;
        seq
    }
}

/// What a bench cluster's nodes host.
#[derive(Clone)]
pub(crate) struct Setup {
    /// Shards of each type.
    pub(crate) shards: u32,
    /// Shards moved per rebalance round at most, and the round's interval.
    pub(crate) rebalance: (u32, Duration),
    /// Counted by every `Tally` entity of the node.
    pub(crate) tally: Arc<AtomicUsize>,
    /// Counted by every `Ordered` entity of the node.
    pub(crate) misordered: Arc<AtomicUsize>,
}

impl Setup {
    /// 1,000 shards, Akka's rebalance defaults.
    pub(crate) fn new() -> Self {
        Self {
            shards: 1000,
            rebalance: (20, Duration::from_secs(10)),
            tally: Arc::default(),
            misordered: Arc::default(),
        }
    }

    fn builder(&self, seeds: &[String]) -> NodeBuilder {
        let settings = ShardingSettings {
            retry_interval: Duration::from_millis(200),
            down_removal_margin: Duration::from_millis(500),
            rebalance_interval: self.rebalance.1,
            ..ShardingSettings::default()
        };
        let config = |name: &str| {
            let mut t = EntityTypeConfig::new(name);
            t.number_of_shards = self.shards;
            t.passivate_idle_after = None;
            t.allocation = AllocationStrategyConfig::LeastShard {
                absolute_limit: self.rebalance.0,
                relative_limit: 1.0,
            };
            t
        };
        let tally = self.tally.clone();
        let misordered = self.misordered.clone();
        NodeBuilder::new("bench")
            .seed_nodes(seeds.iter().cloned())
            .membership(MembershipSettings::lan(Vec::<SeedNode>::new()))
            .settings(settings)
            .mailbox_capacity(100_000)
            .transport(shoal::TransportSettings {
                user_queue: 1_000_000,
                ..Default::default()
            })
            .entity(config("counter"), |_| Counter(0))
            .entity(config("tally"), move |_| Tally(tally.clone()))
            .entity(config("ordered"), move |_| Ordered {
                next: 0,
                misordered: misordered.clone(),
            })
    }

    /// Starts one node joining `seeds` (none: it founds the cluster).
    pub(crate) async fn start(&self, seeds: &[String]) -> Node {
        self.builder(seeds)
            .start()
            .await
            .expect("a bench node starts")
    }

    /// Starts one node listening on `address` (and reached there), joining `seeds`.
    pub(crate) async fn start_at(&self, address: &str, seeds: &[String]) -> Node {
        self.builder(seeds)
            .bind(address)
            .advertise(address)
            .start()
            .await
            .expect("a bench node starts")
    }

    /// Starts `n` nodes and waits until each sees every region.
    pub(crate) async fn cluster(&self, n: usize) -> Vec<Node> {
        let first = self.start(&[]).await;
        let seeds = vec![first.address().to_string()];
        let mut nodes = vec![first];
        for _ in 1..n {
            nodes.push(self.start(&seeds).await);
        }
        for node in &nodes {
            wait_for_regions(node, n).await;
        }
        nodes
    }
}

/// Waits until `node` knows `n` regions of `counter`.
pub(crate) async fn wait_for_regions(node: &Node, n: usize) {
    let region = node.region::<Counter>("counter").expect("hosted");
    while region.current_regions().await.map_or(0, |r| r.len()) < n {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `counter` reaches `target` (polling every millisecond, for at most 60 s).
pub(crate) async fn wait_for_count(counter: &AtomicUsize, target: usize) {
    for _ in 0..60_000 {
        if counter.load(Ordering::Relaxed) >= target {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!(
        "only {} of {target} messages were handled within 60 s",
        counter.load(Ordering::Relaxed)
    );
}
