//! The coordinator's lease, for a type with `coordinator_lease` (Akka's singleton lease): a
//! coordinator allocates only while it holds the type's lease in the host's lease store.
//! Two coordinators of one type can exist at once (a member cut off from the rest, or paused,
//! still believes it is the oldest until it downs itself); without the lease both allocate,
//! and the one cut off may hand a shard to a region on its side under a newer epoch than the
//! other's. With it, the one that cannot renew stops allocating on its own clock before the
//! store can grant the lease to the other.
//!
//! The lease is part of the allocation gate: the gate opens only while the lease is held, and
//! closes when it is lost (allocation, rebalancing and handoffs wait; homes already known are
//! still answered). Regaining it, a coordinator that remembers reads the store's shards again
//! before the gate reopens: another coordinator may have allocated meanwhile.

use crate::coordinator::Coordinator;
use crate::effect::Effects;
use crate::lease::{
    LeaseAnswer, LeaseCall, LeaseChange, LeaseHolder, LeaseName, LeaseOwner, LeaseTerms,
};
use crate::members::MembershipView;
use crate::time::Instant;

impl Coordinator {
    /// The type's lease for a coordinator started on `owner`'s member at `now`, wanted from
    /// then on (its first acquire goes out at the coordinator's first timer).
    pub(super) fn new_lease(&self, terms: LeaseTerms, now: Instant) -> LeaseHolder {
        let name = LeaseName::Coordinator {
            entity_type: self.entity_type.clone(),
        };
        // A new holder per coordinator started here: a release of an earlier one's grant
        // cannot end this one's. Its start time, on this member's clock, numbers it.
        let owner = LeaseOwner {
            member: self.me,
            holder: now.as_nanos().saturating_add(1),
        };
        let mut holder = LeaseHolder::new(name, owner, terms);
        holder.handle_want(now);
        holder
    }

    /// Whether the coordinator may allocate as far as its lease goes: it holds a grant still
    /// valid on its clock, or the type has no coordinator lease.
    pub(super) fn lease_allows(&self, now: Instant) -> bool {
        self.lease.as_ref().is_none_or(|l| l.token(now).is_some())
    }

    /// The lease store answered `call` about this coordinator's lease.
    pub(crate) fn handle_lease_answered(
        &mut self,
        now: Instant,
        call: &LeaseCall,
        answer: LeaseAnswer,
        view: &MembershipView,
        out: &mut Effects,
    ) {
        let LeaseCall::Acquire { sent, .. } = call else {
            return;
        };
        let Some(lease) = &mut self.lease else {
            return;
        };
        let change = lease.handle_answer(now, *sent, answer);
        self.apply_lease_change(now, change, view, out);
    }

    /// The lease's timers: renewals, retries, a call out too long, a validity running out.
    /// Also what an input runs first: a paused process resumes with its inputs before the
    /// timer that would have said its lease ran out, and nothing may be allocated past it.
    pub(super) fn handle_lease_timeout(
        &mut self,
        now: Instant,
        view: &MembershipView,
        out: &mut Effects,
    ) {
        let Some(lease) = &mut self.lease else {
            return;
        };
        let change = lease.handle_timeout(now);
        self.apply_lease_change(now, change, view, out);
    }

    /// When the lease next needs [`Coordinator::handle_lease_timeout`].
    pub(super) fn lease_timeout(&self) -> Option<Instant> {
        self.lease.as_ref().and_then(LeaseHolder::poll_timeout)
    }

    /// The coordinator stops here: the call that gives its lease up, if it held it.
    pub(crate) fn take_lease_release(&mut self) -> Option<LeaseCall> {
        self.lease.as_mut()?.give_up()
    }

    fn apply_lease_change(
        &mut self,
        now: Instant,
        change: Option<LeaseChange>,
        view: &MembershipView,
        out: &mut Effects,
    ) {
        match change {
            Some(LeaseChange::Acquired(_)) => {
                crate::probe::hit("coordinator: its lease acquired, the gate may open");
                self.try_open_gate(now, view, out);
            }
            Some(LeaseChange::Lost) => {
                crate::probe::hit("coordinator: its lease lost, allocation stops");
                self.gate_open = false;
                // Another coordinator may allocate while this one cannot: the store's shards
                // are read again before the gate reopens.
                self.reread_remembered();
            }
            None => {}
        }
        if let Some(lease) = &mut self.lease {
            while let Some(call) = lease.poll_call(now) {
                out.lease(call);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;
    use crate::config::{EntityTypeConfig, ShardingSettings};
    use crate::effect::Effect;
    use crate::id::{MemberId, ShardId};
    use crate::lease::FencingToken;
    use crate::members::Member;
    use crate::message::{Body, Message};

    fn m(n: u64) -> MemberId {
        MemberId::new(n, 1)
    }

    fn at(millis: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(millis)
    }

    fn terms() -> LeaseTerms {
        LeaseTerms {
            ttl: Duration::from_secs(10),
            renew_every: Duration::from_secs(1),
            max_drift_ppm: 0,
            safety_margin: Duration::from_secs(1),
            retry_interval: Duration::from_secs(1),
            operation_timeout: Duration::from_secs(20),
        }
    }

    /// What the coordinator emitted: lease calls, and the bodies it sent (to whom).
    fn drain(out: &mut Effects) -> (Vec<LeaseCall>, Vec<(u64, Body)>) {
        let (effects, local) = out.drain();
        let mut calls = Vec::new();
        let mut envelopes = Vec::new();
        for effect in effects {
            match effect {
                Effect::Lease(call) => calls.push(call),
                Effect::Send(transmit) => envelopes.push(*transmit.envelope),
                _ => {}
            }
        }
        let sent = (envelopes.into_iter().chain(local))
            .filter_map(|env| match env.message {
                Message::Sharding { body, .. } => Some((env.to.node.0, body)),
                _ => None,
            })
            .collect();
        (calls, sent)
    }

    /// Member 1's coordinator of a type whose coordinator holds a lease.
    fn leased_coordinator() -> Coordinator {
        let mut config = EntityTypeConfig::new("counter");
        config.coordinator_lease = Some(terms());
        let settings = ShardingSettings::default();
        Coordinator::new(m(1), &config, &settings, &BTreeMap::new(), [].into(), at(0))
    }

    fn hosts(sent: &[(u64, Body)], shard: u32) -> bool {
        sent.iter()
            .any(|(_, b)| matches!(b, Body::HostShard { shard: s, .. } if *s == ShardId(shard)))
    }

    /// A shard the store fenced while the lease was lost is hosted again by the region holding
    /// its letters once the lease is held, not by a newcomer with fewer shards (simulator,
    /// rolling-restart seed 9300001427: the letters were dropped).
    #[test]
    fn a_fenced_shard_waits_for_the_lease_at_its_region() {
        let mut c = leased_coordinator();
        let three = MembershipView::new((1..=3).map(|n| Member::up(m(n), n, &[])).collect());
        let four = MembershipView::new((1..=4).map(|n| Member::up(m(n), n, &[])).collect());
        let mut out = Effects::new(m(1));
        let register = || Body::Register {
            shards: vec![],
            handing_off: vec![],
        };
        c.handle_timeout(at(0), &three, &mut out);
        let (calls, _) = drain(&mut out);
        for n in 1..=3 {
            c.handle_message(at(1), &three, m(n), register(), &mut out);
        }
        let granted = LeaseAnswer::Granted(FencingToken(3));
        c.handle_lease_answered(at(2), &calls[0], granted, &three, &mut out);
        // Seven shards over three regions: the last one's region keeps more than a newcomer
        // once that one is fenced.
        let mut home = 0;
        for shard in 1..=7 {
            let ask = Body::GetShardHome {
                shard: ShardId(shard),
            };
            c.handle_message(at(3), &three, m(2), ask, &mut out);
            let (_, sent) = drain(&mut out);
            let host = sent
                .iter()
                .find(|(_, b)| matches!(b, Body::HostShard { .. }));
            home = host.expect("hosted").0;
            let started = Body::ShardStarted {
                shard: ShardId(shard),
            };
            c.handle_message(at(4), &three, m(home), started, &mut out);
        }
        // The lease runs out unrenewed; a newcomer registers; the store fences shard 7.
        c.handle_timeout(at(9_000), &three, &mut out);
        let (calls, _) = drain(&mut out);
        let reacquire = calls.last().expect("asked for again").clone();
        c.handle_message(at(9_100), &four, m(4), register(), &mut out);
        let fenced = Body::ShardFenced {
            shard: ShardId(7),
            current: crate::id::Epoch(1_000_000),
        };
        c.handle_message(at(9_200), &four, m(home), fenced, &mut out);
        assert!(
            !hosts(&drain(&mut out).1, 7),
            "nothing hosted without the lease"
        );
        let granted = LeaseAnswer::Granted(FencingToken(5));
        c.handle_lease_answered(at(9_300), &reacquire, granted, &four, &mut out);
        let (_, sent) = drain(&mut out);
        let again = sent
            .iter()
            .find(|(_, b)| matches!(b, Body::HostShard { .. }));
        assert_eq!(again.map(|(to, _)| *to), Some(home), "{sent:?}");
    }

    #[test]
    fn a_coordinator_allocates_only_while_it_holds_the_types_lease() {
        let mut c = leased_coordinator();
        let view = MembershipView::new((1..=3).map(|n| Member::up(m(n), n, &[])).collect());
        let mut out = Effects::new(m(1));
        let ask_home = |c: &mut Coordinator, now, from, shard, out: &mut Effects| {
            let ask = Body::GetShardHome {
                shard: ShardId(shard),
            };
            c.handle_message(now, &view, m(from), ask, out);
        };
        // Its first timer asks for the lease.
        assert_eq!(c.poll_timeout(), Some(at(0)));
        c.handle_timeout(at(0), &view, &mut out);
        let (calls, _) = drain(&mut out);
        let [acquire @ LeaseCall::Acquire { name, .. }] = calls.as_slice() else {
            panic!("one acquire: {calls:?}");
        };
        assert_eq!(name.to_string(), "coordinator-counter");
        // Every region registered: the gate still waits for the lease.
        for n in 1..=3 {
            let register = Body::Register {
                shards: vec![],
                handing_off: vec![],
            };
            c.handle_message(at(10), &view, m(n), register, &mut out);
        }
        ask_home(&mut c, at(20), 2, 7, &mut out);
        assert!(
            !hosts(&drain(&mut out).1, 7),
            "nothing allocated without the lease"
        );
        assert!(c.gate(&view).lease_pending && !c.gate(&view).open);
        // Granted: the gate opens and the waiting shard is allocated.
        let granted = LeaseAnswer::Granted(FencingToken(3));
        c.handle_lease_answered(at(30), acquire, granted, &view, &mut out);
        let (_, sent) = drain(&mut out);
        assert!(hosts(&sent, 7), "allocated once the lease is held");
        let home = sent
            .iter()
            .find(|(_, b)| matches!(b, Body::HostShard { .. }));
        let home = home.expect("hosted").0;
        let started = Body::ShardStarted { shard: ShardId(7) };
        c.handle_message(at(40), &view, m(home), started, &mut out);
        assert!(c.gate(&view).open && !c.gate(&view).lease_pending);
        // No renewal answered: once its validity (ttl less the margin, from the ask) has run
        // out, the gate closes; a known home is still answered, a new shard waits.
        c.handle_timeout(at(8_999), &view, &mut out);
        assert!(c.gate(&view).open, "still valid");
        ask_home(&mut c, at(9_000), 3, 8, &mut out);
        let (calls, sent) = drain(&mut out);
        assert!(
            !hosts(&sent, 8),
            "nothing allocated past the lease's validity"
        );
        let reacquire = calls.last().expect("asked for again").clone();
        assert!(!c.gate(&view).open && c.gate(&view).lease_pending);
        ask_home(&mut c, at(9_100), 3, 7, &mut out);
        let (_, sent) = drain(&mut out);
        assert!(
            sent.iter()
                .any(|(to, b)| *to == 3 && matches!(b, Body::ShardHome { .. })),
            "{sent:?}"
        );
        // A handoff of shard 7 ending without the lease does not allocate it (simulator, oracle
        // seed 46: a handoff's end allocated past the grant, the next coordinator's running).
        c.start_handoff(at(9_200), ShardId(7), &mut out);
        for n in 1..=3 {
            let ack = Body::BeginHandOffAck {
                shard: ShardId(7),
                region: m(n),
                round: crate::id::HandoffRound(0),
            };
            c.handle_message(at(9_300), &view, m(n), ack, &mut out);
        }
        let stopped = Body::ShardStopped { shard: ShardId(7) };
        c.handle_message(at(9_400), &view, m(home), stopped, &mut out);
        assert!(!hosts(&drain(&mut out).1, 7), "the handed-off shard waits");
        // Granted again: both waiting shards are allocated.
        let granted = LeaseAnswer::Granted(FencingToken(5));
        c.handle_lease_answered(at(9_500), &reacquire, granted, &view, &mut out);
        let (_, sent) = drain(&mut out);
        assert!(hosts(&sent, 7) && hosts(&sent, 8), "{sent:?}");
        // Stopping, it gives a held lease up.
        let mut c = leased_coordinator();
        c.handle_timeout(at(0), &view, &mut out);
        let (calls, _) = drain(&mut out);
        c.handle_lease_answered(
            at(1),
            &calls[0],
            LeaseAnswer::Granted(FencingToken(4)),
            &view,
            &mut out,
        );
        assert!(matches!(
            c.take_lease_release(),
            Some(LeaseCall::Release {
                token: FencingToken(4),
                ..
            })
        ));
    }
}
