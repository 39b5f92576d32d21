//! Lease-majority downing on loopback: three nodes sharing a lease store; when one crashes,
//! the side whose leader takes the cluster's downing lease downs it and serves its shards.

mod common;

use std::time::Duration;

use common::{Counter, Op, await_regions, builder, eventually, scratch};
use shoal::store::{LeaseStore, SqliteStore};
use shoal::{Downing, MembershipSettings, NodeBuilder, StartError};

const ASK: Duration = Duration::from_secs(5);

/// How long a grant of the downing lease lasts here: longer than the test, so that the
/// winner still holds it when the test looks.
const LEASE_TTL: Duration = Duration::from_secs(120);

fn lease_majority() -> MembershipSettings {
    let mut m = common::fast_membership();
    m.downing = Downing::LeaseMajority {
        stable_after: Duration::from_millis(1500),
        acquire_delay_for_minority: Duration::from_millis(500),
        lease_ttl: LEASE_TTL,
    };
    m
}

fn node(seeds: &[String], store: &SqliteStore) -> NodeBuilder {
    builder(seeds)
        .membership(lease_majority())
        .lease_store(store.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_node_is_downed_by_the_side_holding_the_downing_lease() {
    common::logs();
    let dir = scratch("lease-downing");
    let store = SqliteStore::open(dir.join("leases.db")).unwrap();
    let first = node(&[], &store).start().await.expect("first node");
    let seeds = vec![first.address().to_string()];
    let mut nodes = vec![first];
    for _ in 1..3 {
        nodes.push(node(&seeds, &store).start().await.expect("node"));
    }
    for n in &nodes {
        await_regions(n, 3).await;
    }
    let counters = nodes[0].region::<Counter>("counter").unwrap();
    for i in 0..30 {
        let entity = counters.entity_ref(format!("c{i}"));
        entity.ask(&Op::Add(1), ASK).await.unwrap();
    }
    nodes[2].abort().await;
    // Every counter answers again: the two left downed the crashed one (only with the lease)
    // and took its shards over.
    for i in 0..30 {
        let entity = counters.entity_ref(format!("c{i}"));
        eventually(
            Duration::from_secs(30),
            Duration::from_millis(200),
            || async {
                match entity.ask(&Op::Get, Duration::from_millis(500)).await {
                    Ok(_) => Ok(()),
                    Err(e) => Err(format!("c{i} does not answer: {e}")),
                }
            },
        )
        .await;
    }
    await_regions(&nodes[0], 2).await;
    // The winners' leader holds the downing lease: nobody else is granted it now.
    let taken = store
        .acquire("test-downing", "someone else", LEASE_TTL)
        .await
        .expect("the store answers");
    assert_eq!(
        taken, None,
        "the downing lease is held by the surviving side"
    );
}

#[tokio::test]
async fn lease_majority_downing_needs_a_lease_store() {
    let refused = builder(&[])
        .membership(lease_majority())
        .start()
        .await
        .err();
    let Some(StartError::Builder(reason)) = refused else {
        panic!("expected a builder error, got {refused:?}");
    };
    assert!(reason.contains("lease store"), "{reason}");
}
