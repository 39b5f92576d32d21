//! The lease holder alone, and against a store on a true clock while the holder's clock
//! drifts within the bound.

use std::time::Duration;

use super::*;
use crate::time::Instant;

fn at(ms: u64) -> Instant {
    Instant::ZERO + Duration::from_millis(ms)
}

fn terms() -> LeaseTerms {
    LeaseTerms {
        ttl: Duration::from_millis(10_000),
        renew_every: Duration::from_millis(2_000),
        max_drift_ppm: 10_000,
        safety_margin: Duration::from_millis(100),
        retry_interval: Duration::from_millis(500),
        operation_timeout: Duration::from_millis(1_000),
    }
}

fn owner() -> LeaseOwner {
    LeaseOwner {
        member: MemberId::new(1, 1),
        holder: 1,
    }
}

fn name(shard: u32) -> LeaseName {
    LeaseName::Shard {
        entity_type: EntityType::new("t"),
        shard: ShardId(shard),
    }
}

/// Takes the acquire call due at `now`.
fn acquire(holder: &mut LeaseHolder, now: Instant) {
    assert!(matches!(
        holder.poll_call(now),
        Some(LeaseCall::Acquire { sent, .. }) if sent == now
    ));
}

#[test]
fn a_holder_acquires_renews_before_expiry_and_releases() {
    let mut holder = LeaseHolder::new(name(1), owner(), terms());
    assert_eq!(holder.poll_call(at(0)), None, "not wanted");
    holder.handle_want(at(0));
    acquire(&mut holder, at(0));
    assert_eq!(holder.poll_call(at(0)), None, "one call out");
    let granted = holder.handle_answer(at(50), at(0), LeaseAnswer::Granted(FencingToken(7)));
    assert_eq!(granted, Some(LeaseChange::Acquired(FencingToken(7))));
    // Valid for the ttl less 1 % drift and the margin, from when the request was sent.
    assert_eq!(terms().validity(), Duration::from_millis(9_800));
    assert_eq!(holder.token(at(9_799)), Some(FencingToken(7)));
    assert_eq!(holder.token(at(9_800)), None);
    assert_eq!(holder.poll_timeout(), Some(at(2_000)), "the renewal");
    acquire(&mut holder, at(2_000));
    assert_eq!(
        holder.handle_answer(at(2_010), at(2_000), LeaseAnswer::Granted(FencingToken(7))),
        None
    );
    assert_eq!(holder.token(at(11_799)), Some(FencingToken(7)), "extended");
    holder.handle_release();
    assert_eq!(holder.token(at(3_000)), None);
    assert_eq!(
        holder.poll_call(at(3_000)),
        Some(LeaseCall::Release {
            name: name(1),
            owner: owner(),
            token: FencingToken(7),
        })
    );
    assert_eq!(holder.poll_timeout(), None);
}

#[test]
fn a_refusal_is_retried_and_failed_renewals_lose_the_lease_when_validity_runs_out() {
    let mut holder = LeaseHolder::new(name(1), owner(), terms());
    holder.handle_want(at(0));
    acquire(&mut holder, at(0));
    assert_eq!(
        holder.handle_answer(at(10), at(0), LeaseAnswer::Refused),
        None
    );
    assert_eq!(holder.poll_timeout(), Some(at(510)), "retried");
    acquire(&mut holder, at(510));
    assert!(
        holder
            .handle_answer(at(520), at(510), LeaseAnswer::Granted(FencingToken(3)))
            .is_some()
    );
    // Every renewal from now on times out.
    let mut now = at(520);
    let mut lost = None;
    for _ in 0..100 {
        now = holder.poll_timeout().expect("work ahead");
        if holder.poll_call(now).is_some() {
            continue;
        }
        if let Some(change) = holder.handle_timeout(now) {
            lost = Some((now, change));
            break;
        }
    }
    assert_eq!(lost, Some((at(510 + 9_800), LeaseChange::Lost)));
    assert_eq!(holder.token(now), None);
    // A grant answering a renewal sent before the validity ran out, arriving after it, is
    // not acted on.
    let mut late = LeaseHolder::new(name(2), owner(), terms());
    late.handle_want(at(0));
    acquire(&mut late, at(0));
    late.handle_answer(at(1), at(0), LeaseAnswer::Granted(FencingToken(1)));
    acquire(&mut late, at(2_000));
    let stale = late.handle_answer(at(12_000), at(2_000), LeaseAnswer::Granted(FencingToken(1)));
    assert_eq!(stale, Some(LeaseChange::Lost));
    assert_eq!(late.token(at(12_000)), None);
}

/// Whether a holder on `terms`, whose clock runs at `1 + rate_ppm / 10⁶` of true time and
/// whose calls take `delay_ms` each way, ever acts on a grant a store on true time has let
/// expire (every fourth renewal lost on the way).
fn acts_after_expiry(terms: &LeaseTerms, rate_ppm: i64, delay_ms: u64) -> bool {
    let mut holder = LeaseHolder::new(name(3), owner(), terms.clone());
    let local = |truth: u64| {
        let skew = truth as i128 * i128::from(rate_ppm) / 1_000_000;
        Instant::ZERO + Duration::from_nanos((truth as i128 + skew) as u64)
    };
    let mut store_expiry = 0u64;
    holder.handle_want(local(0));
    let mut renewals = 0;
    let step = 10_000_000; // 10 ms of true time
    for truth in (0..60_000_000_000u64).step_by(step) {
        let now = local(truth);
        if holder.poll_call(now).is_some() {
            renewals += 1;
            if renewals % 4 != 0 {
                // Granted as the call arrives: the store's expiry counts from then.
                let arrives = truth + delay_ms * 1_000_000;
                store_expiry = arrives + terms.ttl.as_nanos() as u64;
                let answered = local(arrives + delay_ms * 1_000_000);
                holder.handle_answer(answered, now, LeaseAnswer::Granted(FencingToken(1)));
            }
        }
        holder.handle_timeout(now);
        if holder.token(now).is_some() && truth >= store_expiry {
            return true;
        }
    }
    false
}

#[test]
fn the_holder_never_acts_on_a_grant_the_store_has_let_expire() {
    for (rate_ppm, delay_ms) in [(-10_000i64, 0u64), (10_000, 0), (-10_000, 900), (0, 300)] {
        assert!(
            !acts_after_expiry(&terms(), rate_ppm, delay_ms),
            "rate {rate_ppm} ppm, delay {delay_ms} ms"
        );
    }
    // Negative control: without the drift and the margin, a slow clock acts past the expiry.
    let unsafe_terms = LeaseTerms {
        max_drift_ppm: 0,
        safety_margin: Duration::ZERO,
        renew_every: Duration::from_millis(9_000),
        ..terms()
    };
    assert!(acts_after_expiry(&unsafe_terms, -10_000, 0));
}

#[test]
fn an_answer_to_a_call_an_earlier_holder_sent_is_ignored() {
    let mut earlier = LeaseHolder::new(name(1), owner(), terms());
    earlier.handle_want(at(0));
    acquire(&mut earlier, at(0));
    drop(earlier);
    // The shard stopped and started again on the same member: its new holder asks at 3 s.
    let mut holder = LeaseHolder::new(name(1), owner(), terms());
    holder.handle_want(at(3_000));
    acquire(&mut holder, at(3_000));
    let early = holder.handle_answer(at(3_010), at(0), LeaseAnswer::Granted(FencingToken(4)));
    assert_eq!(
        early, None,
        "granted at 0 s: valid 3 s less than its own would be"
    );
    assert_eq!(holder.token(at(3_010)), None);
    let own = holder.handle_answer(at(3_020), at(3_000), LeaseAnswer::Granted(FencingToken(4)));
    assert_eq!(own, Some(LeaseChange::Acquired(FencingToken(4))));
    assert_eq!(holder.token(at(3_000 + 9_799)), Some(FencingToken(4)));
}
