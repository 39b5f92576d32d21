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

/// Waits until `check` holds, polling every 50 ms for at most `secs` seconds.
async fn eventually<F: AsyncFnMut() -> bool>(secs: u64, what: &str, mut check: F) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until each of counters `c0..c{n}` answers through `counters` (at most `secs`
/// seconds for each).
async fn each_answers_eventually(counters: &shoal::Region<Counter>, n: u64, secs: u64) {
    for i in 0..n {
        let entity = counters.entity_ref(format!("c{i}"));
        eventually(secs, "the counter answers", async || {
            entity
                .ask(&Op::Get, Duration::from_millis(500))
                .await
                .is_ok()
        })
        .await;
    }
}

/// Adds 1 to counters `c0..c{n}` through `counters`, each acknowledged.
async fn add_one_to_each(counters: &shoal::Region<Counter>, n: u64) {
    for i in 0..n {
        let entity = counters.entity_ref(format!("c{i}"));
        entity.ask(&Op::Add(1), ASK).await.unwrap();
    }
}

async fn hosted(node: &shoal::Node) -> usize {
    let region = node.region::<Counter>("counter").unwrap();
    region.local_state().await.map_or(0, |s| s.len())
}

/// Nodes that join at the same moment are all welcomed at once: none waits for its join
/// retry (set far beyond the wait here) because the answer to its join was lost while the
/// cluster changed around it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_joining_together_are_all_welcomed_without_a_join_retry() {
    logs();
    let slow_retry = || {
        let mut membership = common::fast_membership();
        membership.retry_join_after = Duration::from_secs(60);
        membership
    };
    let first = common::builder(&[])
        .membership(slow_retry())
        .start()
        .await
        .unwrap();
    let seeds = vec![first.address().to_string()];
    let joiners = futures_util::future::join_all(
        (0..4).map(|_| common::builder(&seeds).membership(slow_retry()).start()),
    )
    .await;
    let joiners: Vec<_> = joiners.into_iter().map(Result::unwrap).collect();
    // await_regions gives up after 20 s, a third of the join retry.
    common::await_regions(&first, 5).await;
    for node in &joiners {
        common::await_regions(node, 5).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joining_node_takes_shards_in_a_rebalance_and_every_entity_still_answers() {
    logs();
    let mut nodes = cluster(2).await;
    let counters = nodes[0].region::<Counter>("counter").unwrap();
    add_one_to_each(&counters, 200).await;
    let seeds = vec![nodes[0].address().to_string()];
    nodes.push(common::builder(&seeds).start().await.unwrap());
    eventually(20, "the new node hosts shards", async || {
        hosted(&nodes[2]).await > 0
    })
    .await;
    for i in 0..200 {
        let total = counters
            .entity_ref(format!("c{i}"))
            .ask(&Op::Get, ASK)
            .await
            .unwrap();
        // Entities are not persisted: one that moved starts over.
        assert!(total <= 1, "c{i}: {total}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_leave_hands_off_without_failing_a_single_ask() {
    logs();
    let nodes = cluster(3).await;
    let counters = nodes[0].region::<Counter>("counter").unwrap();
    add_one_to_each(&counters, 60).await;
    assert!(hosted(&nodes[1]).await > 0, "the leaving node hosts shards");
    let leaving = nodes[1].clone();
    let leave = tokio::spawn(async move { leaving.leave().await });
    // Asks keep flowing while its shards move: buffered, then delivered, never refused.
    let mut asked = 0;
    while !leave.is_finished() {
        add_one_to_each(&counters, 60).await;
        asked += 60;
    }
    leave.await.unwrap();
    assert!(nodes[1].is_stopped());
    assert!(asked >= 60);
    common::await_regions(&nodes[0], 2).await;
    for i in 0..60 {
        counters
            .entity_ref(format!("c{i}"))
            .ask(&Op::Get, ASK)
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_node_is_downed_and_its_shards_serve_again_elsewhere() {
    logs();
    let nodes = cluster(3).await;
    let counters = nodes[0].region::<Counter>("counter").unwrap();
    add_one_to_each(&counters, 60).await;
    assert!(
        hosted(&nodes[2]).await > 0,
        "the crashing node hosts shards"
    );
    nodes[2].abort().await;
    let crashed = tokio::time::Instant::now();
    each_answers_eventually(&counters, 60, 30).await;
    let serving = crashed.elapsed();
    eprintln!("crash to every shard serving again: {serving:?}");
    common::await_regions(&nodes[0], 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_restarted_at_its_address_rejoins_as_a_new_incarnation() {
    logs();
    let nodes = cluster(3).await;
    let counters = nodes[0].region::<Counter>("counter").unwrap();
    add_one_to_each(&counters, 30).await;
    let old = nodes[2].member();
    let address = nodes[2].address().to_string();
    let mut events = nodes[0].events();
    nodes[2].abort().await;
    // The same address, before the others have noticed the crash: a new incarnation of the
    // same node, whose join replaces the old one.
    let seeds = vec![nodes[0].address().to_string()];
    let restarted = common::builder(&seeds)
        .bind(address.as_str())
        .start()
        .await
        .unwrap();
    let new = restarted.member();
    assert_eq!(new.node, old.node, "same address, same node id");
    assert!(new.incarnation > old.incarnation);
    eventually(20, "the old incarnation is removed", async || {
        loop {
            match events.try_recv() {
                Ok(shoal::NodeEvent::MemberRemoved { member }) if member == old => break true,
                Ok(_) => {}
                Err(_) => break false,
            }
        }
    })
    .await;
    common::await_regions(&nodes[0], 3).await;
    for node in [&nodes[0], &nodes[1], &restarted] {
        let region = node.region::<Counter>("counter").unwrap();
        each_answers_eventually(&region, 30, 20).await;
    }
    // The others' writers to that address reconnected to the new incarnation.
    assert!(nodes[0].stats().await.unwrap().transport.dialed >= 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leave_does_not_hang_on_an_entity_that_ignores_its_stop() {
    logs();
    let nodes = cluster(2).await;
    let counters = nodes[0].region::<Counter>("counter").unwrap();
    // An entity hosted by the node that will leave.
    let mut stubborn = None;
    for i in 0..1000 {
        let id = format!("s{i}");
        if counters.start_entity(id.as_str()).await.unwrap() == nodes[1].member() {
            stubborn = Some(id);
            break;
        }
    }
    let stubborn = counters.entity_ref(stubborn.expect("an entity on the leaving node"));
    // Busy for a minute: it will not finish its queue, so its stop must be forced.
    stubborn.tell(&Op::Sleep(60_000)).await.unwrap();
    // Busy there before the leave begins (were the sleep still on its way, the handoff would
    // buffer it and deliver it at the new home instead).
    let busy = stubborn.ask(&Op::Get, Duration::from_millis(300)).await;
    assert_eq!(busy, Err(shoal::AskError::Timeout));
    let left = tokio::time::timeout(Duration::from_secs(30), nodes[1].leave()).await;
    assert!(left.is_ok(), "the leave hung on the entity");
    assert_eq!(
        stubborn.ask(&Op::Get, ASK).await,
        Ok(0),
        "it runs again on the other node"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_only_node_routes_to_entities_it_never_hosts() {
    logs();
    let nodes = cluster(2).await;
    let seeds = vec![nodes[0].address().to_string()];
    let proxy = shoal::NodeBuilder::new("test")
        .secret("test secret")
        .seed_nodes(seeds)
        .membership(common::fast_membership())
        .settings(common::fast_settings())
        .proxy::<Counter>(shoal::EntityTypeConfig::new("counter"))
        .start()
        .await
        .unwrap();
    let counters = proxy.region::<Counter>("counter").unwrap();
    for i in 0..50 {
        let entity = counters.entity_ref(format!("p{i}"));
        assert_eq!(entity.ask(&Op::Add(i), ASK).await, Ok(i));
    }
    let stats = proxy.stats().await.unwrap();
    assert_eq!(stats.entities, 0, "a proxy runs no entity");
    // Every message was forwarded, none delivered here; the first for each shard waited
    // for the coordinator to name its home.
    assert_eq!(stats.routes.delivered, 0, "{:?}", stats.routes);
    assert!(stats.routes.forwarded >= 50, "{:?}", stats.routes);
    assert!(stats.routes.buffered >= 1, "{:?}", stats.routes);
    let regions = nodes[0].region::<Counter>("counter").unwrap();
    let hosting = regions.current_regions().await.unwrap();
    assert!(
        !hosting.contains(&proxy.member()),
        "a proxy is not a hosting region"
    );
}
