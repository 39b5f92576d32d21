//! A shard instance gated by its lease: one call, then the exact effects it produced.

use std::time::Duration;

use super::super::tests::{SHARD, deliver, id, out, p, stop, ty};
use super::super::{Shard, ShardSettings};
use crate::effect::{Effect, Effects, EntityEffect, Event};
use crate::id::{Epoch, MemberId};
use crate::lease::{FencingToken, LeaseAnswer, LeaseCall, LeaseName, LeaseOwner, LeaseTerms};
use crate::reason::StopReason;
use crate::region::BufferBudget;
use crate::time::Instant;

fn at(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

fn owner() -> LeaseOwner {
    LeaseOwner {
        member: MemberId::new(1, 1),
        holder: 1,
    }
}

fn terms() -> LeaseTerms {
    LeaseTerms {
        ttl: Duration::from_secs(10),
        renew_every: Duration::from_secs(2),
        max_drift_ppm: 10_000,
        safety_margin: Duration::from_millis(100),
        retry_interval: Duration::from_millis(500),
        operation_timeout: Duration::from_secs(1),
    }
}

fn name() -> LeaseName {
    LeaseName::Shard {
        entity_type: ty(),
        shard: SHARD,
    }
}

fn acquire(sent: Instant) -> Effect {
    Effect::Lease(LeaseCall::Acquire {
        name: name(),
        owner: owner(),
        ttl: terms().ttl,
        sent,
    })
}

fn acquired(token: u64) -> Effect {
    Effect::Event(Event::ShardLeaseAcquired {
        entity_type: ty(),
        shard: SHARD,
        token: FencingToken(token),
    })
}

/// An entity started while the lease is held under `token`: its writes carry the token.
fn started_under(e: &str, token: u64) -> Effect {
    Effect::Entity(EntityEffect::Start {
        entity_type: ty(),
        entity: id(e),
        shard: SHARD,
        epoch: Epoch(0),
        lease_token: Some(FencingToken(token)),
    })
}

fn leased_shard(o: &mut Effects) -> Shard {
    let settings = ShardSettings {
        stop_timeout: Duration::from_secs(10),
        handoff_stop_timeout: Duration::from_secs(55),
        idle_after: None,
        limit_policy: None,
    };
    let mut shard = Shard::new((SHARD, Epoch(0)), ty(), settings, at(0));
    shard.start_lease(at(0), owner(), terms(), o);
    shard
}

#[test]
fn letters_wait_for_the_lease_then_start_their_entities_in_order() {
    let (mut o, mut b) = (out(), BufferBudget::new(10));
    let mut s = leased_shard(&mut o);
    assert_eq!(o.take(), [acquire(at(0))]);
    s.handle_delivery(at(10), id("a"), p("m1"), &mut b, &mut o);
    s.handle_delivery(at(20), id("a"), p("m2"), &mut b, &mut o);
    s.handle_delivery(at(30), id("b"), p("m3"), &mut b, &mut o);
    assert_eq!(o.take(), [], "nothing runs without the lease");
    assert_eq!(s.buffered_letters(), 3);
    assert_eq!(b.used(), 3);
    let granted = LeaseAnswer::Granted(FencingToken(5));
    s.handle_lease_answer(at(40), at(0), granted, &mut b, &mut o);
    assert_eq!(
        o.take(),
        [
            acquired(5),
            started_under("a", 5),
            deliver("a", "m1"),
            deliver("a", "m2"),
            started_under("b", 5),
            deliver("b", "m3"),
        ]
    );
    assert_eq!(b.used(), 0);
    // Renewed every two seconds from when the request went out.
    assert_eq!(s.poll_timeout(), Some(at(2_000)));
    s.handle_timeout(at(2_000), &mut b, &mut o);
    assert_eq!(o.take(), [acquire(at(2_000))]);
}

#[test]
fn a_lease_that_runs_out_stops_every_entity_and_later_letters_wait_for_it_again() {
    let (mut o, mut b) = (out(), BufferBudget::new(10));
    let mut s = leased_shard(&mut o);
    let granted = LeaseAnswer::Granted(FencingToken(5));
    s.handle_lease_answer(at(10), at(0), granted, &mut b, &mut o);
    s.handle_delivery(at(20), id("a"), p("m1"), &mut b, &mut o);
    o.take();
    // The renewals go unanswered (the store is out of reach): the lease is lost when its
    // validity runs out, 10 s less 1 % drift less the margin after the first request.
    let mut now = at(20);
    while let Some(next) = s.poll_timeout().filter(|t| *t <= at(9_800)) {
        now = next;
        s.handle_timeout(now, &mut b, &mut o);
    }
    assert_eq!(now, at(9_800));
    let effects = o.take();
    let lost = Effect::Event(Event::ShardLeaseLost {
        entity_type: ty(),
        shard: SHARD,
    });
    let tail = &effects[effects.len() - 2..];
    assert_eq!(tail, [lost, stop("a", StopReason::Forced)]);
    // A letter now waits behind the stop, then for the lease.
    s.handle_delivery(now, id("a"), p("m2"), &mut b, &mut o);
    s.handle_entity_stopped(now, &id("a"), &mut b, &mut o);
    assert_eq!(o.take(), []);
    assert_eq!(s.buffered_letters(), 1);
    // The store answers again: the next acquire out is granted.
    let mut sent = None;
    while sent.is_none() {
        now = s.poll_timeout().expect("the lease is wanted");
        s.handle_timeout(now, &mut b, &mut o);
        sent = (o.take().into_iter()).find_map(|e| match e {
            Effect::Lease(LeaseCall::Acquire { sent, .. }) => Some(sent),
            _ => None,
        });
    }
    let sent = sent.expect("an acquire");
    let regranted = LeaseAnswer::Granted(FencingToken(6));
    s.handle_lease_answer(now, sent, regranted, &mut b, &mut o);
    assert_eq!(
        o.take(),
        [acquired(6), started_under("a", 6), deliver("a", "m2")]
    );
}

#[test]
fn a_shard_waiting_for_its_lease_hands_off_once_its_waiting_letters_have_run() {
    let (mut o, mut b) = (out(), BufferBudget::new(10));
    let mut s = leased_shard(&mut o);
    o.take();
    s.handle_lease_answer(at(5), at(0), LeaseAnswer::Refused, &mut b, &mut o);
    s.handle_delivery(at(10), id("a"), p("m1"), &mut b, &mut o);
    s.handle_delivery(at(20), id("a"), p("m2"), &mut b, &mut o);
    // Handed back, the letters could be overtaken by newer ones sent to the next home.
    assert!(
        !s.handle_handoff(at(30), &mut o),
        "the waiting letters hold it"
    );
    s.handle_timeout(at(505), &mut b, &mut o);
    assert_eq!(o.take(), [acquire(at(505))], "retried");
    let granted = LeaseAnswer::Granted(FencingToken(9));
    s.handle_lease_answer(at(510), at(505), granted, &mut b, &mut o);
    let handoff_stop = stop("a", StopReason::HandOff);
    assert_eq!(
        o.take(),
        [
            acquired(9),
            started_under("a", 9),
            deliver("a", "m1"),
            deliver("a", "m2"),
            handoff_stop
        ]
    );
    s.handle_entity_stopped(at(520), &id("a"), &mut b, &mut o);
    assert!(s.is_stopped());
    assert!(s.take_lease_release().is_some(), "the lease is given up");
}

#[test]
fn a_stopped_shard_releases_the_lease_it_held() {
    let (mut o, mut b) = (out(), BufferBudget::new(10));
    let mut s = leased_shard(&mut o);
    let granted = LeaseAnswer::Granted(FencingToken(5));
    s.handle_lease_answer(at(10), at(0), granted, &mut b, &mut o);
    o.take();
    assert!(s.handle_handoff(at(20), &mut o));
    let release = LeaseCall::Release {
        name: name(),
        owner: owner(),
        token: FencingToken(5),
    };
    assert_eq!(s.take_lease_release(), Some(release));
    assert_eq!(s.take_lease_release(), None, "once");
}
