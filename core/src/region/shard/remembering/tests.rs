//! A remembering shard: one call, then the exact effects it produced.

use std::time::Duration;

use super::*;
use crate::effect::EntityEffect;
use crate::effect::{Effect, Event};
use crate::region::shard::ShardSettings;
use crate::region::shard::tests::{SHARD, asked_stop, deliver, id, out, p, stop, ty};
use crate::remember::{RecoveryStrategy, StoreRequest};

const EPOCH: Epoch = Epoch(9);

/// The start of `e` by this shard instance, at its epoch.
fn start(e: &str) -> Effect {
    Effect::Entity(EntityEffect::Start {
        entity_type: ty(),
        entity: id(e),
        shard: SHARD,
        epoch: EPOCH,
        lease_token: None,
    })
}

fn ids(names: &[&str]) -> Vec<EntityId> {
    names.iter().map(|n| id(n)).collect()
}

fn at(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

fn settings(recovery: RecoveryStrategy) -> RememberSettings {
    RememberSettings {
        recovery,
        restart_backoff: Duration::from_secs(5),
        ..RememberSettings::default()
    }
}

/// A remembering shard that has asked for its load.
fn loading(recovery: RecoveryStrategy) -> (Shard, Effects, BufferBudget) {
    loading_with(settings(recovery))
}

/// A remembering shard with `remember` settings that has asked for its load.
fn loading_with(remember: RememberSettings) -> (Shard, Effects, BufferBudget) {
    loading_under(remember, None)
}

/// `loading_with`, the shard allowed `limit` active entities (least recently used first).
fn loading_under(
    remember: RememberSettings,
    limit: Option<usize>,
) -> (Shard, Effects, BufferBudget) {
    let shard_settings = ShardSettings {
        stop_timeout: Duration::from_secs(10),
        handoff_stop_timeout: Duration::from_secs(55),
        idle_after: None,
        limit_policy: limit.map(|_| crate::passivation::ReplacementPolicy::LeastRecentlyUsed),
    };
    let mut s = Shard::new((SHARD, EPOCH), ty(), shard_settings, at(0));
    let (mut o, b) = (out(), BufferBudget::new(10));
    if let Some(limit) = limit {
        s.set_entity_limit(at(0), limit, &mut o);
    }
    s.start_remembering(remember, 1, &mut o);
    assert_eq!(o.take(), [Effect::Store(load())]);
    (s, o, b)
}

/// A remembering shard, its load answered with `loaded`.
fn loaded(names: &[&str], recovery: RecoveryStrategy) -> (Shard, Effects, BufferBudget) {
    loaded_with(names, settings(recovery))
}

/// A remembering shard with `remember` settings, its load answered with `loaded`.
fn loaded_with(names: &[&str], remember: RememberSettings) -> (Shard, Effects, BufferBudget) {
    let (mut s, mut o, mut b) = loading_with(remember);
    s.handle_store_completed(
        at(0),
        0,
        StoreCompletion::Loaded(ids(names)),
        &mut b,
        &mut o,
    );
    (s, o, b)
}

fn load() -> StoreRequest {
    StoreRequest::Load {
        entity_type: ty(),
        shard: SHARD,
        epoch: EPOCH,
    }
}

fn update(seq: u64, started: &[&str], stopped: &[&str]) -> Effect {
    update_dormant(seq, [started, stopped, &[]])
}

/// A write of `[started, stopped, dormant]`.
fn update_dormant(seq: u64, [started, stopped, dormant]: [&[&str]; 3]) -> Effect {
    Effect::Store(StoreRequest::Update {
        entity_type: ty(),
        shard: SHARD,
        epoch: EPOCH,
        seq,
        started: ids(started),
        stopped: ids(stopped),
        dormant: ids(dormant),
    })
}

/// Under a limit of one, a remembered entity the limit passivates is written dormant (not
/// forgotten), and its next message writes its start again and starts it (passivating the
/// other); an explicit passivation still forgets.
#[test]
fn an_entity_the_limit_passivates_stays_remembered_dormant_and_returns_on_its_next_message() {
    let (mut s, mut o, mut b) = loading_under(settings(RecoveryStrategy::AllAtOnce), Some(1));
    let loaded = StoreCompletion::Loaded(ids(&["a"]));
    s.handle_store_completed(at(0), 0, loaded, &mut b, &mut o);
    assert_eq!(o.take(), [start("a")]);
    s.handle_delivery(at(1), id("b"), p("m1"), &mut b, &mut o);
    assert_eq!(o.take(), [update(1, &["b"], &[])]);
    s.handle_store_completed(at(2), 1, StoreCompletion::Written, &mut b, &mut o);
    let by_limit = StopReason::Passivation(PassivationCause::Limit);
    assert_eq!(
        o.take(),
        [stop("a", by_limit), start("b"), deliver("b", "m1")],
        "room first: the victim's stop goes out before the newcomer's start"
    );
    s.handle_entity_stopped(at(3), &id("a"), &mut b, &mut o);
    assert_eq!(o.take(), [update_dormant(2, [&[], &[], &["a"]])]);
    s.handle_store_completed(at(4), 2, StoreCompletion::Written, &mut b, &mut o);
    // Dormant: a new instance's load leaves it out, so its next message writes its start.
    s.handle_delivery(at(5), id("a"), p("m2"), &mut b, &mut o);
    assert_eq!(o.take(), [update(3, &["a"], &[])]);
    s.handle_store_completed(at(6), 3, StoreCompletion::Written, &mut b, &mut o);
    assert_eq!(
        o.take(),
        [stop("b", by_limit), start("a"), deliver("a", "m2")]
    );
    // Asked to passivate, it is forgotten.
    s.handle_passivate(at(7), &id("a"), PassivationCause::Requested, &mut o);
    s.handle_entity_stopped(at(8), &id("a"), &mut b, &mut o);
    assert_eq!(o.take(), [asked_stop("a"), update(4, &[], &["a"])]);
}

#[test]
fn remembered_entities_start_when_the_shard_loads_them() {
    let (_, mut o, _) = loaded(&["a", "b"], RecoveryStrategy::AllAtOnce);
    assert_eq!(o.take(), [start("a"), start("b")]);
}

#[test]
fn throttled_recovery_starts_n_every_d() {
    let every = Duration::from_millis(100);
    let (mut s, mut o, mut b) = loaded(
        &["a", "b", "c"],
        RecoveryStrategy::Constant { number: 2, every },
    );
    assert_eq!(o.take(), [start("a"), start("b")]);
    assert_eq!(s.poll_timeout(), Some(at(100)));
    s.handle_timeout(at(99), &mut b, &mut o);
    assert_eq!(o.take(), []);
    s.handle_timeout(at(100), &mut b, &mut o);
    assert_eq!(o.take(), [start("c")]);
    assert_eq!(s.poll_timeout(), None);
}

#[test]
fn a_new_entity_runs_only_once_its_start_is_durable_and_gets_its_letters_in_order() {
    let (mut s, mut o, mut b) = loaded(&[], RecoveryStrategy::AllAtOnce);
    s.handle_delivery(at(1), id("a"), p("m1"), &mut b, &mut o);
    s.handle_delivery(at(1), id("a"), p("m2"), &mut b, &mut o);
    assert_eq!(o.take(), [update(1, &["a"], &[])]);
    assert_eq!(b.used(), 2, "the letters wait within the region's budget");
    s.handle_store_completed(at(2), 1, StoreCompletion::Written, &mut b, &mut o);
    assert_eq!(
        o.take(),
        [start("a"), deliver("a", "m1"), deliver("a", "m2")]
    );
    assert_eq!(b.used(), 0);
    s.handle_delivery(at(3), id("a"), p("m3"), &mut b, &mut o);
    assert_eq!(o.take(), [deliver("a", "m3")], "running: no write");
}

#[test]
fn letters_wait_for_the_load_and_an_entity_remembered_already_starts_without_a_write() {
    let (mut s, mut o, mut b) = loading(RecoveryStrategy::AllAtOnce);
    s.handle_delivery(at(1), id("a"), p("m1"), &mut b, &mut o);
    assert_eq!(o.take(), [], "the load is in flight");
    s.handle_store_completed(
        at(2),
        0,
        StoreCompletion::Loaded(ids(&["a", "z"])),
        &mut b,
        &mut o,
    );
    assert_eq!(o.take(), [start("a"), deliver("a", "m1"), start("z")]);
}

#[test]
fn passivation_forgets_and_a_failure_of_the_entity_restarts_it_after_the_backoff() {
    let (mut s, mut o, mut b) = loaded(&["a", "b"], RecoveryStrategy::AllAtOnce);
    o.take();
    s.handle_passivate(at(1), &id("a"), PassivationCause::Requested, &mut o);
    assert_eq!(o.take(), [asked_stop("a")]);
    s.handle_entity_stopped(at(2), &id("a"), &mut b, &mut o);
    assert_eq!(
        o.take(),
        [update(1, &[], &["a"])],
        "a passivation is forgotten"
    );
    s.handle_store_completed(at(3), 1, StoreCompletion::Written, &mut b, &mut o);
    // "b" stops on its own: it stays remembered and runs again after the backoff.
    s.handle_entity_stopped(at(10), &id("b"), &mut b, &mut o);
    assert_eq!(o.take(), []);
    assert_eq!(s.poll_timeout(), Some(at(5_010)));
    s.handle_timeout(at(5_010), &mut b, &mut o);
    assert_eq!(o.take(), [start("b")]);
}

/// Akka's RememberEntitiesFailureSpec: backoff 1 s; the entity fails at 1.01 s, a message
/// starts it at 1.02 s, it passivates at 1.03 s. The restart planned at 2.01 s is moot: the
/// entity stays stopped and forgotten, and a second failure plans its own restart afresh.
#[test]
fn a_start_before_the_backoff_ends_cancels_the_restart() {
    let backoff = RememberSettings {
        restart_backoff: Duration::from_secs(1),
        ..settings(RecoveryStrategy::AllAtOnce)
    };
    let (mut s, mut o, mut b) = loaded_with(&["a"], backoff);
    o.take();
    s.handle_entity_stopped(at(1_010), &id("a"), &mut b, &mut o);
    assert_eq!(s.poll_timeout(), Some(at(2_010)), "the restart is planned");
    s.handle_delivery(at(1_020), id("a"), p("m1"), &mut b, &mut o);
    assert_eq!(
        o.take(),
        [start("a"), deliver("a", "m1")],
        "still remembered: no write before it starts"
    );
    assert_eq!(s.poll_timeout(), None, "the restart is cancelled");
    s.handle_passivate(at(1_030), &id("a"), PassivationCause::Requested, &mut o);
    s.handle_entity_stopped(at(1_031), &id("a"), &mut b, &mut o);
    assert_eq!(o.take(), [asked_stop("a"), update(1, &[], &["a"])]);
    s.handle_store_completed(at(1_040), 1, StoreCompletion::Written, &mut b, &mut o);
    s.handle_timeout(at(2_010), &mut b, &mut o);
    assert_eq!(o.take(), [], "not started again at 2.01 s");
    assert!(!s.is_alive(&id("a")));

    // Started again, it fails twice: only the second failure's restart stands.
    s.handle_delivery(at(3_000), id("a"), p("m2"), &mut b, &mut o);
    s.handle_store_completed(at(3_001), 2, StoreCompletion::Written, &mut b, &mut o);
    o.take();
    s.handle_entity_stopped(at(3_100), &id("a"), &mut b, &mut o);
    s.handle_delivery(at(3_200), id("a"), p("m3"), &mut b, &mut o);
    s.handle_entity_stopped(at(3_300), &id("a"), &mut b, &mut o);
    o.take();
    assert_eq!(s.poll_timeout(), Some(at(4_300)));
    s.handle_timeout(at(4_300), &mut b, &mut o);
    assert_eq!(o.take(), [start("a")]);
    assert_eq!(s.poll_timeout(), None);
}

#[test]
fn a_handoff_waits_for_the_writes_and_stops_what_they_start() {
    let (mut s, mut o, mut b) = loaded(&[], RecoveryStrategy::AllAtOnce);
    s.handle_delivery(at(1), id("a"), p("m1"), &mut b, &mut o);
    o.take();
    assert!(
        !s.handle_handoff(at(2), &mut o),
        "a's start is being written"
    );
    assert_eq!(o.take(), []);
    s.handle_store_completed(
        at(3),
        1,
        StoreCompletion::Failed("down".into()),
        &mut b,
        &mut o,
    );
    assert!(matches!(
        &o.take()[..],
        [Effect::Event(Event::RememberStoreFailed { .. })]
    ));
    assert!(!s.is_stopped(), "nothing is given up while the store fails");
    s.handle_timeout(at(1_000), &mut b, &mut o);
    assert_eq!(o.take(), [update(2, &["a"], &[])]);
    s.handle_store_completed(at(1_001), 2, StoreCompletion::Written, &mut b, &mut o);
    assert_eq!(
        o.take(),
        [
            start("a"),
            deliver("a", "m1"),
            stop("a", StopReason::HandOff)
        ]
    );
    assert!(!s.is_stopped());
    s.handle_entity_stopped(at(1_002), &id("a"), &mut b, &mut o);
    assert!(s.is_stopped());
    assert_eq!(o.take(), [], "a handoff stop forgets nothing");
}

#[test]
fn a_fenced_instance_reports_the_newer_epoch() {
    let (mut s, mut o, mut b) = loaded(&["a"], RecoveryStrategy::AllAtOnce);
    o.take();
    s.handle_passivate(at(1), &id("a"), PassivationCause::Requested, &mut o);
    s.handle_entity_stopped(at(2), &id("a"), &mut b, &mut o);
    o.take();
    s.handle_store_completed(at(3), 1, StoreCompletion::Fenced(Epoch(12)), &mut b, &mut o);
    assert_eq!(s.fenced_by(), Some(Epoch(12)));
    assert!(
        s.handle_handoff(at(3), &mut o),
        "fenced: nothing more to write"
    );
}
