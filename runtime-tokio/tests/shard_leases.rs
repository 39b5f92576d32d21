//! Shard leases in the runtime: a shard runs its entities only once it holds its lease in the
//! node's lease store, holds it while it serves, and gives it up when it stops.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{Counter, Op, fast_membership, fast_settings, scratch};
use shoal::lease::LeaseTerms;
use shoal::store::{LeaseStore, SqliteStore};
use shoal::{EntityId, EntityTypeConfig, NodeBuilder, StartError};

fn terms() -> LeaseTerms {
    LeaseTerms {
        ttl: Duration::from_secs(5),
        renew_every: Duration::from_millis(500),
        max_drift_ppm: 1_000,
        safety_margin: Duration::from_millis(200),
        retry_interval: Duration::from_millis(200),
        operation_timeout: Duration::from_secs(2),
    }
}

fn counters() -> EntityTypeConfig {
    let mut config = EntityTypeConfig::new("counter");
    config.number_of_shards = 4;
    config.shard_lease = Some(terms());
    config
}

fn node(store: Option<SqliteStore>) -> NodeBuilder {
    let builder = NodeBuilder::new("test")
        .secret("test secret")
        .membership(fast_membership())
        .settings(fast_settings())
        .entity(counters(), |_| Counter {
            total: 0,
            stops: None,
        });
    match store {
        Some(store) => builder.lease_store(store),
        None => builder,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_serves_while_it_holds_its_lease_and_gives_it_up_when_it_stops() {
    let dir = scratch("shard-leases");
    let path = dir.join("leases.db");
    let node = node(Some(SqliteStore::open(&path).unwrap()))
        .start()
        .await
        .expect("node starts");
    let region = node.region::<Counter>("counter").unwrap();
    let total = region
        .entity_ref("c1")
        .ask(&Op::Add(5), Duration::from_secs(10))
        .await;
    assert_eq!(total, Ok(5), "served once the lease was held");
    // The lease of c1's shard is held: nobody else is granted it.
    let shard = shoal::shard_of(&EntityId::from("c1"), 4);
    let name = format!("test-shard-counter-{}", shard.0);
    let other = SqliteStore::open(&path).unwrap();
    let ttl = Duration::from_secs(1);
    assert_eq!(
        other.acquire(&name, "someone else", ttl).await.unwrap(),
        None
    );
    // Still held after more than a ttl: renewed while the shard serves.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        other.acquire(&name, "someone else", ttl).await.unwrap(),
        None
    );
    node.leave().await;
    // Released on the way out (its call runs on a task of its own), not left to expire: the
    // last renewal was at most half a second before, the grant would run 5 s.
    let released = async {
        while other
            .acquire(&name, "someone else", ttl)
            .await
            .unwrap()
            .is_none()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(2), released)
        .await
        .expect("released when the shard stopped");
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_type_with_shard_leases_needs_a_lease_store() {
    let refused = node(None).start().await.err();
    let Some(StartError::Builder(reason)) = refused else {
        panic!("expected a builder error, got {refused:?}");
    };
    assert!(reason.contains("lease store"), "{reason}");
}
