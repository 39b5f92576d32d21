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
