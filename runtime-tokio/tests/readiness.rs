//! Readiness and liveness: a member is ready once it is Up, its regions are registered and
//! every coordinator allocates; not while it has no view or leaves; it says so as a call and
//! as events. A node is alive while its host loop answers.

mod common;

use std::time::Duration;

use common::{builder, cluster, eventually, logs};
use shoal::{Event, NodeEvent, Readiness};
use tokio::sync::broadcast;

const WITHIN: Duration = Duration::from_secs(20);

/// Waits until `events` reports readiness `ready`.
async fn readiness_event(events: &mut broadcast::Receiver<NodeEvent>, ready: bool) {
    let seen = tokio::time::timeout(WITHIN, async {
        loop {
            match events.recv().await {
                Ok(NodeEvent::Sharding(Event::ReadinessChanged { ready: now })) if now == ready => {
                    return;
                }
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => panic!("the node stopped"),
            }
        }
    });
    seen.await.expect("the readiness event in time");
}

fn assert_ready(readiness: &Readiness) {
    assert!(readiness.is_ready(), "{:?}", readiness.waiting_for());
    for t in &readiness.types {
        assert!(t.registered, "{t:?}");
        assert_eq!(
            t.allocating,
            Some(true),
            "every coordinator answered: {t:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_is_ready_once_up_and_registered_and_not_while_it_leaves() {
    logs();
    let nodes = cluster(2).await;
    for node in &nodes {
        eventually(WITHIN, Duration::from_millis(50), || async {
            let readiness = node.readiness().await.map_err(|e| e.to_string())?;
            match readiness.waiting_for() {
                None => Ok(()),
                Some(why) => Err(why),
            }
        })
        .await;
        assert_ready(&node.readiness().await.unwrap());
        assert!(node.is_alive(Duration::from_secs(1)).await);
    }
    // A member that joins says it became ready.
    let seeds = vec![nodes[0].address().to_string()];
    let joiner = builder(&seeds).start().await.unwrap();
    let mut events = joiner.events();
    readiness_event(&mut events, true).await;
    assert_ready(&joiner.readiness().await.unwrap());
    // Leaving, it stops being ready before it is gone.
    let leaving = joiner.clone();
    let left = tokio::spawn(async move { leaving.leave().await });
    readiness_event(&mut events, false).await;
    left.await.unwrap();
    assert!(
        !joiner.is_alive(Duration::from_secs(1)).await,
        "a stopped node is not alive"
    );
    for node in &nodes {
        node.abort().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_cannot_join_is_alive_but_not_ready() {
    logs();
    // The seed is this test's own port, bound and never answering with a node.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let seeds = vec![silent.local_addr().unwrap().to_string()];
    let node = builder(&seeds).start().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let readiness = node.readiness().await.unwrap();
    assert!(!readiness.is_ready());
    let why = readiness.waiting_for().unwrap();
    assert!(
        why == "not in a membership view yet" || why.starts_with("member is Joining"),
        "{why}"
    );
    assert!(node.is_alive(Duration::from_secs(1)).await);
    node.abort().await;
}
