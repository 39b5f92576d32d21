//! Node-level tests of remembering entities over the scripted cluster and its store: restarts
//! of entities that failed, and full cluster restarts with another number of shards.

use std::time::Duration;

use shoal_core::{EntityId, Instant, RememberSettings, shard_of};
use sim::scripted::{Cluster, config, type_config};

/// Node `n`'s config, remembering a type of `shards` shards with `remember`.
fn remembering(n: u64, shards: u32, remember: RememberSettings) -> shoal_core::Config {
    let mut t = type_config(shards);
    t.remember = Some(remember);
    config(n, t)
}

fn at_ms(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

/// Akka's RememberEntitiesFailureSpec: with a 1 s restart backoff, an entity that fails at
/// 1.01 s, is started again by a message and passivates at 1.03 s is neither started again at
/// 2.01 s nor written back to the store.
#[test]
fn a_restart_planned_for_a_failure_is_cancelled_by_an_earlier_start() {
    let remember = RememberSettings {
        restart_backoff: Duration::from_secs(1),
        ..RememberSettings::default()
    };
    let mut c = Cluster::new();
    c.add_node(remembering(1, 4, remember));
    c.publish_view();
    c.tell(1, "a", "first");
    c.run_until(at_ms(1_000));
    assert_eq!(c.alive_on(1), ["a"]);
    assert_eq!(
        c.remembered(),
        [("a".to_owned(), shard_of(&EntityId::new("a"), 4).0)]
    );

    c.run_until(at_ms(1_010));
    c.fail_entity(1, "a");
    assert!(c.alive_on(1).is_empty(), "a failed");
    c.run_until(at_ms(1_020));
    c.tell(1, "a", "second");
    c.settle();
    assert_eq!(c.alive_on(1), ["a"], "still remembered: it starts at once");
    c.run_until(at_ms(1_030));
    c.passivate(1, "a");
    c.settle();
    c.run_until(at_ms(1_100));
    assert!(c.alive_on(1).is_empty(), "a passivated");
    assert!(c.remembered().is_empty(), "and is forgotten");

    c.run_until(at_ms(5_000));
    assert!(c.alive_on(1).is_empty(), "not started again at 2.01 s");
    assert!(c.remembered().is_empty(), "nor written back as running");
    assert_eq!(c.starts(), 2);
    assert_eq!(c.inbox("a").len(), 2);
}

/// Node `n`'s incarnation `incarnation`, remembering a type of `shards` shards.
fn restarted(n: u64, incarnation: u64, shards: u32) -> shoal_core::Config {
    let mut c = remembering(n, shards, RememberSettings::default());
    c.incarnation = shoal_core::Incarnation(incarnation);
    c
}

/// Whether every one of `ids` runs exactly once in the cluster (the scripted host fails the
/// run at once if one starts a second time), and nothing else runs.
fn each_runs_once(c: &Cluster, ids: &[String]) -> bool {
    let mut running: Vec<String> = c.alive().map(|(_, e)| e.as_str().to_owned()).collect();
    running.sort();
    let mut wanted = ids.to_vec();
    wanted.sort();
    running == wanted
}

/// Akka's RememberEntitiesShardIdExtractorChangeSpec, with Shoal's one way to change the shard
/// function: the whole cluster restarts with another `number_of_shards`. Every remembered
/// entity then runs exactly once, in the shard it now maps to: none is started in its old
/// shard (where a message would start a second copy), none is lost in a shard beyond a lowered
/// count, and the store files each id under its new shard.
#[test]
fn a_full_restart_with_another_number_of_shards_runs_every_remembered_entity_once() {
    let mut c = Cluster::new();
    for n in 1..=3 {
        c.add_node(restarted(n, 1, 8));
    }
    c.publish_view();
    let ids: Vec<String> = (0..40).map(|i| format!("entity-{i}")).collect();
    for id in &ids {
        c.tell(1, id, "before");
    }
    c.advance(Duration::from_secs(2));
    assert!(each_runs_once(&c, &ids));
    let filed = |c: &Cluster, n: u32| {
        let remembered = c.remembered();
        remembered.len() == ids.len()
            && (remembered.iter()).all(|(id, s)| shard_of(&EntityId::new(id.as_str()), n).0 == *s)
    };
    assert!(filed(&c, 8));

    for (incarnation, shards) in [(2, 5), (3, 12)] {
        for n in 1..=3 {
            c.crash(n);
        }
        assert_eq!(c.alive().count(), 0);
        for n in 1..=3 {
            c.add_node(restarted(n, incarnation, shards));
        }
        c.publish_view();
        // No message: remembering alone starts them (once the removal margin of the crashed
        // incarnations has passed).
        c.advance(Duration::from_secs(30));
        assert!(
            each_runs_once(&c, &ids),
            "with {shards} shards: {:?}",
            c.alive().collect::<Vec<_>>()
        );
        assert!(filed(&c, shards), "{:?}", c.remembered());
        // Messages find the running incarnation: no second copy starts.
        let starts = c.starts();
        for id in &ids {
            c.tell(2, id, "after");
        }
        c.advance(Duration::from_secs(2));
        assert_eq!(c.starts(), starts, "with {shards} shards");
        assert!(each_runs_once(&c, &ids));
    }
    assert!(ids.iter().all(|id| c.inbox(id).len() == 3));
}
