//! Shard role tests: one call, then the exact effects it produced.

use std::time::Duration;

use super::*;
use crate::effect::{Effect, Event};
use crate::id::{MemberId, RequestId};
use crate::message::Payload;
use crate::message::{StartAck, StartOutcome};

pub(super) fn ty() -> EntityType {
    EntityType::new("counter")
}

pub(super) fn id(s: &str) -> EntityId {
    EntityId::new(s)
}

pub(super) fn p(s: &str) -> Letter {
    Letter::Message(Payload::from(s.as_bytes()))
}

fn at(secs: u64) -> Instant {
    Instant::from_secs(secs)
}

/// The shard of these tests: the only one of its type, so every id maps to it.
pub(super) const SHARD: ShardId = ShardId(0);

fn shard_with(idle_after: Option<Duration>) -> Shard {
    let settings = ShardSettings {
        stop_timeout: Duration::from_secs(10),
        handoff_stop_timeout: Duration::from_secs(55),
        idle_after,
        limit_policy: None,
    };
    Shard::new((SHARD, Epoch(0)), ty(), settings, at(0))
}

fn shard() -> Shard {
    shard_with(None)
}

pub(super) fn out() -> Effects {
    Effects::new(MemberId::new(1, 1))
}

pub(super) fn start(e: &str) -> Effect {
    Effect::Entity(EntityEffect::Start {
        entity_type: ty(),
        entity: id(e),
        shard: SHARD,
        epoch: Epoch(0),
        lease_token: None,
    })
}

pub(super) fn deliver(e: &str, m: &str) -> Effect {
    Effect::Entity(EntityEffect::Deliver {
        entity_type: ty(),
        entity: id(e),
        payload: Payload::from(m.as_bytes()),
    })
}

pub(super) fn stop(e: &str, reason: StopReason) -> Effect {
    Effect::Entity(EntityEffect::Stop {
        entity_type: ty(),
        entity: id(e),
        reason,
    })
}

/// The stop of `e` passivated at its own request.
pub(super) fn asked_stop(e: &str) -> Effect {
    stop(e, StopReason::Passivation(PassivationCause::Requested))
}

#[test]
fn first_message_starts_the_entity_then_delivers() {
    let (mut s, mut o, mut b) = (shard(), out(), BufferBudget::new(10));
    s.handle_delivery(at(0), id("a"), p("m1"), &mut b, &mut o);
    assert_eq!(o.take(), [start("a"), deliver("a", "m1")]);
    s.handle_delivery(at(0), id("a"), p("m2"), &mut b, &mut o);
    assert_eq!(o.take(), [deliver("a", "m2")]);
}

#[test]
fn a_bare_start_starts_without_delivering() {
    let (mut s, mut o, mut b) = (shard(), out(), BufferBudget::new(10));
    s.handle_delivery(at(0), id("a"), Letter::Start(None), &mut b, &mut o);
    assert_eq!(o.take(), [start("a")]);
    s.handle_delivery(at(0), id("a"), Letter::Start(None), &mut b, &mut o);
    assert_eq!(o.take(), []);
}

/// Akka's `StartEntityAck`: the requester hears that the entity runs once it does, also when
/// it was already running, and only after a stopping incarnation made way for a new one.
#[test]
fn a_start_request_is_acknowledged_once_the_entity_runs() {
    let (mut s, mut o, mut b) = (shard(), out(), BufferBudget::new(10));
    let requester = MemberId::new(7, 1);
    let ack = |n| {
        Letter::Start(Some(StartAck {
            requester,
            request: RequestId(n),
        }))
    };
    let acked = |n| {
        let body = Body::StartEntityAck {
            request: RequestId(n),
            entity: id("a"),
            outcome: StartOutcome::Started,
        };
        Effect::Send(crate::effect::Transmit {
            address: None,
            envelope: Box::new(crate::message::Envelope {
                from: MemberId::new(1, 1),
                to: requester,
                seq: 0,
                message: crate::message::Message::Sharding {
                    entity_type: ty(),
                    body,
                },
            }),
        })
    };
    s.handle_delivery(at(0), id("a"), ack(1), &mut b, &mut o);
    assert_eq!(o.take(), [start("a"), acked(1)]);
    s.handle_delivery(at(0), id("a"), ack(2), &mut b, &mut o);
    assert_eq!(o.take(), [acked(2)], "already running");
    s.handle_passivate(at(0), &id("a"), PassivationCause::Requested, &mut o);
    o.take();
    s.handle_delivery(at(1), id("a"), ack(3), &mut b, &mut o);
    assert_eq!(o.take(), [], "waits for the passivating incarnation");
    s.handle_entity_stopped(at(2), &id("a"), &mut b, &mut o);
    assert_eq!(o.take(), [start("a"), acked(3)]);
}

#[test]
fn passivation_buffers_and_redelivers_to_a_new_incarnation() {
    let (mut s, mut o, mut b) = (shard(), out(), BufferBudget::new(10));
    s.handle_delivery(at(0), id("a"), p("m1"), &mut b, &mut o);
    o.take();
    s.handle_passivate(at(1), &id("a"), PassivationCause::Requested, &mut o);
    assert_eq!(o.take(), [asked_stop("a")]);
    s.handle_delivery(at(1), id("a"), p("m2"), &mut b, &mut o);
    s.handle_delivery(at(1), id("a"), p("m3"), &mut b, &mut o);
    assert_eq!(o.take(), []);
    assert_eq!(b.used(), 2);
    s.handle_entity_stopped(at(2), &id("a"), &mut b, &mut o);
    assert_eq!(
        o.take(),
        [start("a"), deliver("a", "m2"), deliver("a", "m3")]
    );
    assert_eq!(b.used(), 0);
}

#[test]
fn passivate_is_ignored_while_stopping_and_for_unknown_entities() {
    let (mut s, mut o, mut b) = (shard(), out(), BufferBudget::new(10));
    s.handle_delivery(at(0), id("a"), p("m1"), &mut b, &mut o);
    s.handle_passivate(at(0), &id("a"), PassivationCause::Requested, &mut o);
    o.take();
    s.handle_passivate(at(0), &id("a"), PassivationCause::Requested, &mut o);
    s.handle_passivate(at(0), &id("ghost"), PassivationCause::Requested, &mut o);
    assert_eq!(o.take(), []);
}

#[test]
fn an_entity_stopping_on_its_own_is_removed() {
    let (mut s, mut o, mut b) = (shard(), out(), BufferBudget::new(10));
    s.handle_delivery(at(0), id("a"), p("m1"), &mut b, &mut o);
    o.take();
    s.handle_entity_stopped(at(1), &id("a"), &mut b, &mut o);
    assert_eq!(o.take(), []);
    assert!(!s.is_alive(&id("a")));
}

#[test]
fn handoff_stops_every_entity_and_completes_when_all_stopped() {
    let (mut s, mut o, mut b) = (shard(), out(), BufferBudget::new(10));
    s.handle_delivery(at(0), id("a"), p("m"), &mut b, &mut o);
    s.handle_delivery(at(0), id("b"), p("m"), &mut b, &mut o);
    o.take();
    assert!(!s.handle_handoff(at(1), &mut o));
    assert_eq!(
        o.take(),
        [
            stop("a", StopReason::HandOff),
            stop("b", StopReason::HandOff)
        ]
    );
    s.handle_entity_stopped(at(2), &id("a"), &mut b, &mut o);
    assert!(!s.is_stopped());
    s.handle_entity_stopped(at(2), &id("b"), &mut b, &mut o);
    assert!(s.is_stopped());
    assert_eq!(o.take(), []);
}

#[test]
fn handoff_of_an_empty_shard_is_immediately_stopped() {
    let (mut s, mut o) = (shard(), out());
    assert!(s.handle_handoff(at(0), &mut o));
    assert_eq!(o.take(), []);
}

#[test]
fn messages_buffered_before_a_handoff_reach_a_new_incarnation_first() {
    let (mut s, mut o, mut b) = (shard(), out(), BufferBudget::new(10));
    s.handle_delivery(at(0), id("a"), p("m1"), &mut b, &mut o);
    s.handle_passivate(at(0), &id("a"), PassivationCause::Requested, &mut o);
    s.handle_delivery(at(0), id("a"), p("m2"), &mut b, &mut o);
    o.take();
    assert!(!s.handle_handoff(at(1), &mut o));
    assert_eq!(o.take(), [], "a passivating entity keeps its stop");
    s.handle_entity_stopped(at(2), &id("a"), &mut b, &mut o);
    assert_eq!(
        o.take(),
        [
            start("a"),
            deliver("a", "m2"),
            stop("a", StopReason::HandOff)
        ]
    );
    s.handle_entity_stopped(at(3), &id("a"), &mut b, &mut o);
    assert!(s.is_stopped());
}

#[test]
fn a_stop_that_is_ignored_is_forced_once_at_its_deadline() {
    let (mut s, mut o, mut b) = (shard(), out(), BufferBudget::new(10));
    s.handle_delivery(at(0), id("a"), p("m"), &mut b, &mut o);
    s.handle_passivate(at(0), &id("a"), PassivationCause::Requested, &mut o);
    o.take();
    assert_eq!(s.poll_timeout(), Some(at(10)));
    s.handle_timeout(at(9), &mut b, &mut o);
    assert_eq!(o.take(), []);
    s.handle_timeout(at(10), &mut b, &mut o);
    assert_eq!(o.take(), [stop("a", StopReason::Forced)]);
    assert_eq!(s.poll_timeout(), None);
    s.handle_timeout(at(20), &mut b, &mut o);
    assert_eq!(o.take(), []);
}

#[test]
fn idle_entities_are_passivated_at_the_check() {
    let (mut s, mut o, mut b) = (
        shard_with(Some(Duration::from_secs(10))),
        out(),
        BufferBudget::new(10),
    );
    s.handle_delivery(at(0), id("idle"), p("m"), &mut b, &mut o);
    s.handle_delivery(at(8), id("busy"), p("m"), &mut b, &mut o);
    o.take();
    assert_eq!(s.poll_timeout(), Some(at(5)), "checked every idle/2");
    s.handle_timeout(at(5), &mut b, &mut o);
    assert_eq!(o.take(), []);
    s.handle_timeout(at(10), &mut b, &mut o);
    assert_eq!(
        o.take(),
        [stop(
            "idle",
            StopReason::Passivation(PassivationCause::Idle)
        )]
    );
}

#[test]
fn an_exhausted_budget_is_a_dead_letter() {
    let (mut s, mut o, mut b) = (shard(), out(), BufferBudget::new(1));
    s.handle_delivery(at(0), id("a"), p("m1"), &mut b, &mut o);
    s.handle_passivate(at(0), &id("a"), PassivationCause::Requested, &mut o);
    s.handle_delivery(at(0), id("a"), p("m2"), &mut b, &mut o);
    o.take();
    s.handle_delivery(at(0), id("a"), p("m3"), &mut b, &mut o);
    let dead = Event::DeadLetter {
        entity_type: ty(),
        entity: id("a"),
        payload: Some(Payload::from(&b"m3"[..])),
        reason: DeadLetterReason::BufferFull,
    };
    assert_eq!(o.take(), [Effect::Event(dead)]);
}

#[test]
fn a_remembered_start_reaching_a_stopping_entity_is_kept_whatever_the_budget() {
    // The budget is spent: a letter is a dead letter, but a remembered entity's start (a shard
    // regaining its lease while the entity still stops) runs it again once it has stopped.
    let (mut s, mut o, mut b) = (shard(), out(), BufferBudget::new(0));
    s.handle_delivery(at(0), id("a"), Letter::Start(None), &mut b, &mut o);
    s.handle_delivery(at(0), id("b"), Letter::Start(None), &mut b, &mut o);
    s.handle_passivate(at(1), &id("a"), PassivationCause::Requested, &mut o);
    s.handle_passivate(at(1), &id("b"), PassivationCause::Requested, &mut o);
    o.take();
    s.handle_delivery(at(1), id("a"), Letter::Start(None), &mut b, &mut o);
    assert_eq!(o.take(), [], "kept, not a dead letter");
    assert_eq!(b.used(), 0, "outside the budget");
    s.handle_entity_stopped(at(2), &id("a"), &mut b, &mut o);
    assert_eq!(o.take(), [start("a")]);
    // Without a start waiting, a stopped entity stays stopped.
    s.handle_entity_stopped(at(2), &id("b"), &mut b, &mut o);
    assert_eq!(o.take(), []);
}

#[test]
fn terminate_forces_every_entity_and_returns_buffered_messages() {
    let (mut s, mut o, mut b) = (shard(), out(), BufferBudget::new(10));
    s.handle_delivery(at(0), id("a"), p("m1"), &mut b, &mut o);
    s.handle_passivate(at(0), &id("a"), PassivationCause::Requested, &mut o);
    s.handle_delivery(at(0), id("a"), p("m2"), &mut b, &mut o);
    s.handle_delivery(at(0), id("b"), p("m1"), &mut b, &mut o);
    o.take();
    let dropped = s.handle_terminate(&mut b, &mut o);
    assert_eq!(dropped, [(id("a"), p("m2"))]);
    assert_eq!(
        o.take(),
        [stop("a", StopReason::Forced), stop("b", StopReason::Forced)]
    );
    assert_eq!(b.used(), 0);
}
