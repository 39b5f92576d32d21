//! Entities under the runtime: asks that time out, panics restarted, full mailboxes,
//! passivation with its stop hook, forced stops, and a stopped node.

mod common;

use std::time::Duration;

use common::{Counter, Op, builder, counter, eventually, logs};
use shoal::{AskError, DeadLetterReason, EntityTypeConfig, NodeBuilder};

const ASK: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_without_a_reply_in_time_times_out_and_the_late_reply_is_counted() {
    logs();
    let node = builder(&[]).start().await.unwrap();
    let counter = counter(&node, "slow");
    let asked = counter
        .ask(&Op::Sleep(600), Duration::from_millis(100))
        .await;
    assert_eq!(asked, Err(AskError::Timeout));
    assert_eq!(counter.ask(&Op::Add(2), ASK).await, Ok(2));
    assert_eq!(node.stats().await.unwrap().late_replies, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_entity_fails_that_ask_and_is_restarted_without_its_state() {
    logs();
    let node = builder(&[]).start().await.unwrap();
    let counter = counter(&node, "fragile");
    assert_eq!(counter.ask(&Op::Add(5), ASK).await, Ok(5));
    assert_eq!(
        counter.ask(&Op::Panic, ASK).await,
        Err(AskError::EntityPanicked)
    );
    // Restarted after its backoff, from its factory.
    assert_eq!(counter.ask(&Op::Add(1), ASK).await, Ok(1));
    let stats = node.stats().await.unwrap();
    assert_eq!(stats.entities, 1, "one task, restarted in place");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_mailbox_turns_asks_into_dead_letters_with_their_reason() {
    logs();
    let node = builder(&[]).mailbox_capacity(2).start().await.unwrap();
    let counter = counter(&node, "busy");
    assert_eq!(counter.ask(&Op::Get, ASK).await, Ok(0));
    let mut events = node.events();
    let asks: Vec<_> = (0..10)
        .map(|_| {
            let counter = counter.clone();
            tokio::spawn(async move { counter.ask(&Op::Sleep(200), ASK).await })
        })
        .collect();
    let mut refused = 0;
    for ask in asks {
        match ask.await.unwrap() {
            Ok(_) => {}
            Err(AskError::DeadLetter(DeadLetterReason::MailboxFull)) => refused += 1,
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert!(refused >= 5, "only {refused} refused with a mailbox of 2");
    let mut dead_letters = 0;
    while let Ok(event) = events.try_recv() {
        if let shoal::NodeEvent::Sharding(shoal::Event::DeadLetter { reason, .. }) = event {
            assert_eq!(reason, DeadLetterReason::MailboxFull);
            dead_letters += 1;
        }
    }
    assert_eq!(dead_letters, refused, "each refusal is an event");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passivation_runs_the_stop_hook_and_a_later_message_starts_the_entity_afresh() {
    logs();
    let (stops, mut stopped) = tokio::sync::mpsc::unbounded_channel();
    let node = NodeBuilder::new("test")
        .entity(EntityTypeConfig::new("counter"), move |_| Counter {
            total: 0,
            stops: Some(stops.clone()),
        })
        .start()
        .await
        .unwrap();
    let counter = counter(&node, "idle");
    assert_eq!(counter.ask(&Op::Add(3), ASK).await, Ok(3));
    assert_eq!(counter.ask(&Op::Passivate, ASK).await, Ok(3));
    let id = tokio::time::timeout(ASK, stopped.recv()).await.unwrap();
    assert_eq!(id.as_deref(), Some("idle"));
    assert_eq!(
        counter.ask(&Op::Get, ASK).await,
        Ok(0),
        "started again, fresh"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_node_refuses_with_shutting_down() {
    logs();
    let node = builder(&[]).start().await.unwrap();
    let counter = counter(&node, "x");
    assert_eq!(counter.ask(&Op::Add(1), ASK).await, Ok(1));
    node.abort().await;
    assert!(node.is_stopped());
    assert_eq!(
        counter.ask(&Op::Get, ASK).await,
        Err(AskError::ShuttingDown)
    );
    assert_eq!(
        counter.tell(&Op::Get).await,
        Err(shoal::TellError::ShuttingDown)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_is_typed_by_its_registration() {
    let node = builder(&[]).start().await.unwrap();
    assert!(node.region::<Counter>("counter").is_ok());
    assert_eq!(
        node.region::<Counter>("nope").err(),
        Some(shoal::RegionError::NotRegistered("nope".into()))
    );
    node.abort().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entity_type_only_a_newer_member_serves_works_without_the_oldest() {
    logs();
    // The oldest member (the coordinators' home) does not know "ledger"; a newer one does,
    // as in a rolling deployment that adds an entity type.
    let old = builder(&[]).start().await.unwrap();
    let seeds = vec![old.address().to_string()];
    let new = builder(&seeds)
        .entity(EntityTypeConfig::new("ledger"), |_| Counter {
            total: 0,
            stops: None,
        })
        .start()
        .await
        .unwrap();
    common::await_regions(&old, 2).await;
    // The type's coordinator runs on the oldest member serving it, so it works at once.
    let ledger = new.region::<Counter>("ledger").unwrap().entity_ref("l1");
    assert_eq!(ledger.ask(&Op::Add(1), ASK).await, Ok(1));
    let old_stats = old.stats().await.unwrap();
    assert_eq!(old_stats.routes, shoal::RouteCounts::default());
    assert_eq!(old_stats.core.unknown_entity_type, 0);
    assert_eq!(new.stats().await.unwrap().routes.delivered, 1);
}

/// One shard, so both entities share its driver: one stuck in a message for an hour does not
/// hold its shard mate up, and when its passivation times out the forced stop drops it in the
/// middle of that message (no stop hook), after which a message starts it afresh. Were the
/// driver to wait for the stuck turn, no new incarnation would ever start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_stop_drops_an_entity_stuck_in_a_message_while_its_shard_mates_run_on() {
    logs();
    let (stops, mut stopped) = tokio::sync::mpsc::unbounded_channel();
    let mut config = EntityTypeConfig::new("counter");
    config.number_of_shards = 1;
    config.passivate_idle_after = Some(Duration::from_millis(300));
    let node = NodeBuilder::new("test")
        .settings(shoal::ShardingSettings {
            passivation_stop_timeout: Duration::from_millis(300),
            ..shoal::ShardingSettings::default()
        })
        .entity(config, move |_| Counter {
            total: 0,
            stops: Some(stops.clone()),
        })
        .start()
        .await
        .unwrap();
    let (stuck, mate) = (counter(&node, "stuck"), counter(&node, "mate"));
    assert_eq!(stuck.ask(&Op::Add(5), ASK).await, Ok(5));
    stuck.tell(&Op::Sleep(3_600_000)).await.unwrap();
    for expected in 1..=3 {
        assert_eq!(
            mate.ask(&Op::Add(1), ASK).await,
            Ok(expected),
            "the shard mate answers while the other is stuck"
        );
    }
    // Asks that reach the stuck incarnation die with it: ask again, with idle gaps, until a
    // new incarnation answers.
    let short = Duration::from_millis(200);
    eventually(
        Duration::from_secs(10),
        Duration::from_millis(800),
        || async {
            match stuck.ask(&Op::Get, short).await {
                Ok(0) => Ok(()),
                other => Err(format!("the stuck incarnation still runs: {other:?}")),
            }
        },
    )
    .await;
    let mut stopped_ids = Vec::new();
    while let Ok(id) = stopped.try_recv() {
        stopped_ids.push(id);
    }
    assert!(
        !stopped_ids.iter().any(|id| id == "stuck"),
        "a forced stop runs no stop hook: {stopped_ids:?}"
    );
}

/// A factory that panics ends that incarnation only: the entity's shard mate, on the same
/// driver, keeps its state and answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_factory_loses_its_entity_only() {
    logs();
    let mut config = EntityTypeConfig::new("counter");
    config.number_of_shards = 1;
    let node = NodeBuilder::new("test")
        .entity(config, |id: &shoal::EntityId| {
            assert_ne!(id.as_str(), "cursed", "this one cannot be made");
            Counter {
                total: 0,
                stops: None,
            }
        })
        .start()
        .await
        .unwrap();
    let (good, cursed) = (counter(&node, "good"), counter(&node, "cursed"));
    assert_eq!(good.ask(&Op::Add(2), ASK).await, Ok(2));
    let short = Duration::from_millis(300);
    assert!(cursed.ask(&Op::Get, short).await.is_err());
    assert_eq!(good.ask(&Op::Add(1), ASK).await, Ok(3), "state kept");
    assert!(
        cursed.ask(&Op::Get, short).await.is_err(),
        "made again, lost again"
    );
    assert_eq!(good.ask(&Op::Get, ASK).await, Ok(3));
}
