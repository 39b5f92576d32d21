//! Three nodes in one process on loopback: the whole runtime over real sockets.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{Counter, Op, cluster, logs};

const ASK: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_answer_asks_for_entities_spread_over_all_of_them() {
    logs();
    let nodes = cluster(3).await;
    let counters = nodes[0].region::<Counter>("counter").unwrap();
    for i in 0..100 {
        let entity = counters.entity_ref(format!("c{i}"));
        assert_eq!(entity.ask(&Op::Add(i), ASK).await, Ok(i));
        assert_eq!(entity.ask(&Op::Add(1), ASK).await, Ok(i + 1));
    }
    // Every node hosts some of them, and each entity runs once.
    let mut seen = BTreeSet::new();
    for node in &nodes {
        let region = node.region::<Counter>("counter").unwrap();
        let state = region.local_state().await.unwrap();
        let here: Vec<_> = state.into_iter().flat_map(|(_, e)| e).collect();
        assert!(!here.is_empty(), "{node:?} hosts nothing");
        for entity in here {
            assert!(seen.insert(entity.clone()), "{entity} runs twice");
        }
    }
    assert_eq!(seen.len(), 100);
    // Another node reaches the same entities (now remote for some of them).
    let other = nodes[2].region::<Counter>("counter").unwrap();
    for i in 0..100 {
        assert_eq!(
            other.entity_ref(format!("c{i}")).ask(&Op::Get, ASK).await,
            Ok(i + 1)
        );
    }
}
