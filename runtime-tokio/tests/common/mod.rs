//! Shared by the runtime's tests: a counter entity, fast settings, and clusters on loopback.

#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

#[cfg(all(feature = "etcd", feature = "postgres"))]
pub(crate) mod etcd;
#[cfg(feature = "postgres")]
pub(crate) mod postgres;

use serde::{Deserialize, Serialize};
use shoal::{
    Downing, EntityContext, EntityTypeConfig, FailureDetectorSettings, MembershipSettings, Node,
    NodeBuilder, ShardingSettings,
};

/// What a counter is sent.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub(crate) enum Op {
    /// Add and answer the total.
    Add(u64),
    /// Answer the total.
    Get,
    /// Panic.
    Panic,
    /// Sleep this long, then answer the total.
    Sleep(u64),
    /// Ask to be passivated.
    Passivate,
}

/// A counter that answers its total.
pub(crate) struct Counter {
    pub(crate) total: u64,
    pub(crate) stops: Option<tokio::sync::mpsc::UnboundedSender<String>>,
}

impl shoal::Entity for Counter {
    type Message = Op;
    type Reply = u64;

    async fn handle(&mut self, ctx: &mut EntityContext, op: Op) -> u64 {
        match op {
            Op::Add(n) => self.total += n,
            Op::Get => {}
            Op::Panic => panic!("asked to panic"),
            Op::Sleep(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
            Op::Passivate => ctx.passivate(),
        }
        self.total
    }

    async fn on_stop(&mut self, ctx: &mut EntityContext) {
        if let Some(stops) = &self.stops {
            let _ = stops.send(ctx.id().to_string());
        }
    }
}

/// A fresh directory for `what`, private to this test process.
pub(crate) fn scratch(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("shoal-store-{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Membership tuned for tests: fast gossip and failure detection, quick downing.
pub(crate) fn fast_membership() -> MembershipSettings {
    let mut m = MembershipSettings::new(Vec::<shoal::SeedNode>::new());
    m.gossip_interval = Duration::from_millis(100);
    m.heartbeat_interval = Duration::from_millis(100);
    m.seed_node_timeout = Duration::from_millis(500);
    m.retry_join_after = Duration::from_secs(1);
    m.failure_detector = FailureDetectorSettings {
        acceptable_heartbeat_pause: Duration::from_millis(800),
        first_heartbeat_estimate: Duration::from_millis(100),
        ..FailureDetectorSettings::default()
    };
    m.downing = Downing::KeepMajority {
        stable_after: Duration::from_millis(1500),
    };
    m
}

/// Sharding settings tuned for tests.
pub(crate) fn fast_settings() -> ShardingSettings {
    ShardingSettings {
        retry_interval: Duration::from_millis(200),
        rebalance_interval: Duration::from_millis(500),
        down_removal_margin: Duration::from_millis(500),
        handoff_timeout: Duration::from_secs(5),
        ..ShardingSettings::default()
    }
}

/// A builder for a test node with counters, joining through `seeds`.
pub(crate) fn builder(seeds: &[String]) -> NodeBuilder {
    NodeBuilder::new("test")
        .secret("test secret")
        .seed_nodes(seeds.iter().cloned())
        .membership(fast_membership())
        .settings(fast_settings())
        .entity(EntityTypeConfig::new("counter"), |_| Counter {
            total: 0,
            stops: None,
        })
}

/// Starts `n` nodes: the first forms the cluster, the others join it. Waits until every node
/// sees `n` regions.
pub(crate) async fn cluster(n: usize) -> Vec<Node> {
    let first = builder(&[]).start().await.expect("first node");
    let seeds = vec![first.address().to_string()];
    let mut nodes = vec![first];
    for _ in 1..n {
        nodes.push(builder(&seeds).start().await.expect("node"));
    }
    for node in &nodes {
        await_regions(node, n).await;
    }
    nodes
}

/// Polls `probe` every `every` until it returns `Ok`; after `within`, fails with the last
/// `Err` it gave (what it found instead).
pub(crate) async fn eventually<F, Fut>(within: Duration, every: Duration, mut probe: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let outcome = probe().await;
        let Err(found) = outcome else {
            return;
        };
        assert!(
            tokio::time::Instant::now() < deadline,
            "after {within:?}: {found}"
        );
        tokio::time::sleep(every).await;
    }
}

/// Waits (at most 20 s) until `node`'s coordinator knows `n` regions.
pub(crate) async fn await_regions(node: &Node, n: usize) {
    let region = node.region::<Counter>("counter").unwrap();
    eventually(
        Duration::from_secs(20),
        Duration::from_millis(50),
        || async {
            match region.current_regions().await {
                Ok(regions) if regions.len() == n => Ok(()),
                _ => Err(format!("{n} regions never registered")),
            }
        },
    )
    .await;
}

/// The counter `id`, reached through `node`.
pub(crate) fn counter(node: &Node, id: &str) -> shoal::EntityRef<Counter> {
    node.region::<Counter>("counter").unwrap().entity_ref(id)
}

/// Logs for a test run (`RUST_LOG` to see them).
pub(crate) fn logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}
