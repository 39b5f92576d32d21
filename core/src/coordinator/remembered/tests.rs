//! The coordinator with remembering on: the store's shards first, then epochs above them.

use std::collections::BTreeMap;

use super::*;
use crate::config::{EntityTypeConfig, ShardingSettings};
use crate::effect::{Effect, Event};
use crate::id::EntityType;
use crate::members::Member;
use crate::message::Body;

fn m(n: u64) -> MemberId {
    MemberId::new(n, 1)
}

fn at(secs: u64) -> Instant {
    Instant::from_secs(secs)
}

struct Fixture {
    c: Coordinator,
    view: MembershipView,
    out: Effects,
}

impl Fixture {
    /// A remembering coordinator on member 1, regions 1 and 2 registered.
    fn new() -> Self {
        Self::with(|config| config.remember = Some(RememberSettings::default()))
    }

    /// A coordinator of a type `configure`d, on member 1, regions 1 and 2 registered.
    fn with(configure: impl FnOnce(&mut EntityTypeConfig)) -> Self {
        let mut config = EntityTypeConfig::new("counter");
        configure(&mut config);
        let settings = ShardingSettings::default();
        let c = Coordinator::new(
            m(1),
            &config,
            &settings,
            &BTreeMap::new(),
            BTreeMap::new(),
            at(0),
        );
        let view = MembershipView::new(vec![Member::up(m(1), 1, &[]), Member::up(m(2), 2, &[])]);
        let mut f = Self {
            c,
            view,
            out: Effects::new(m(1)),
        };
        f.c.handle_membership(at(0), &f.view.clone(), &Default::default(), &mut f.out);
        for n in [1, 2] {
            let register = Body::Register {
                shards: vec![],
                handing_off: vec![],
            };
            f.c.handle_message(at(0), &f.view.clone(), m(n), register, &mut f.out);
        }
        f
    }

    /// Store requests and `HostShard`s sent since the last call.
    fn taken(&mut self) -> (Vec<StoreRequest>, Vec<(ShardId, Epoch)>) {
        let (effects, local) = self.out.drain();
        let mut stores = Vec::new();
        let mut hosts = Vec::new();
        for envelope in effects
            .into_iter()
            .filter_map(|e| match e {
                Effect::Store(request) => {
                    stores.push(request);
                    None
                }
                Effect::Send(transmit) => Some(*transmit.envelope),
                _ => None,
            })
            .chain(local)
        {
            if let crate::message::Message::Sharding {
                body: Body::HostShard { shard, epoch },
                ..
            } = envelope.message
            {
                hosts.push((shard, epoch));
            }
        }
        (stores, hosts)
    }

    fn complete(&mut self, secs: u64, completion: StoreCompletion) {
        let view = self.view.clone();
        self.c
            .handle_store_completed(at(secs), &view, completion, &mut self.out);
    }
}

#[test]
fn the_gate_waits_for_the_stores_shards_and_then_starts_each_above_its_epoch() {
    let mut f = Fixture::new();
    let (stores, hosts) = f.taken();
    let read = StoreRequest::Shards {
        entity_type: EntityType::new("counter"),
        number_of_shards: 1000,
    };
    assert_eq!(stores, [read]);
    assert!(hosts.is_empty());
    assert!(
        !f.c.gate_open,
        "every region registered, but the store has not answered"
    );
    assert!(f.c.gate(&f.view).store_pending);

    let old = Epoch(41 << TIEBREAK_BITS | 5);
    f.complete(
        1,
        StoreCompletion::Shards(vec![(ShardId(7), old), (ShardId(9), Epoch(3))]),
    );
    assert!(f.c.gate_open);
    let (_, hosts) = f.taken();
    let mut shards: Vec<ShardId> = hosts.iter().map(|(s, _)| *s).collect();
    shards.sort();
    assert_eq!(
        shards,
        [ShardId(7), ShardId(9)],
        "started without a message"
    );
    assert!(hosts.iter().all(|(_, e)| *e > old), "{hosts:?}");
    assert_ne!(hosts[0].1, hosts[1].1, "one epoch per allocation");
}

/// A type that persists state without remembering entities reads the store's epochs too, and
/// allocates above them, but starts none of the listed shards: nothing asks it to.
#[test]
fn a_persistent_type_allocates_above_the_stores_epochs_without_starting_its_shards() {
    let mut f = Fixture::with(|config| config.persistent = true);
    let (stores, _) = f.taken();
    assert!(
        matches!(stores[..], [StoreRequest::Shards { .. }]),
        "{stores:?}"
    );
    assert!(
        !f.c.gate_open,
        "the epochs are read before anything is allocated"
    );
    let old = Epoch(41 << TIEBREAK_BITS | 5);
    f.complete(1, StoreCompletion::Shards(vec![(ShardId(7), old)]));
    assert!(f.c.gate_open);
    assert!(f.taken().1.is_empty(), "no shard starts unasked");
    let view = f.view.clone();
    let ask = Body::GetShardHome { shard: ShardId(7) };
    f.c.handle_message(at(2), &view, m(2), ask, &mut f.out);
    let (_, hosts) = f.taken();
    assert_eq!(hosts.len(), 1, "{hosts:?}");
    assert!(hosts[0].1 > old, "{hosts:?}");
}

#[test]
fn a_failed_read_is_retried_with_backoff_and_reported() {
    let mut f = Fixture::new();
    f.taken();
    f.complete(1, StoreCompletion::Failed("down".into()));
    let (effects, _) = f.out.drain();
    assert!(matches!(
        &effects[..],
        [Effect::Event(Event::RememberStoreFailed {
            shard: None,
            ..
        })]
    ));
    let retry = f.c.poll_timeout().expect("a retry is armed");
    assert!(retry <= at(1) + RememberSettings::default().retry_min);
    let view = f.view.clone();
    f.c.handle_timeout(retry, &view, &mut f.out);
    assert_eq!(f.taken().0.len(), 1, "the read is sent again");
}

/// Allocates shard 4, its `HostShard` not acknowledged yet: (shard, epoch, region).
fn allocated_shard(f: &mut Fixture) -> (ShardId, Epoch, MemberId) {
    f.taken();
    f.complete(1, StoreCompletion::Shards(vec![]));
    let view = f.view.clone();
    let ask = Body::GetShardHome { shard: ShardId(4) };
    f.c.handle_message(at(2), &view, m(2), ask, &mut f.out);
    let (_, hosts) = f.taken();
    let [(shard, epoch)] = hosts[..] else {
        panic!("one allocation: {hosts:?}");
    };
    (shard, epoch, f.c.allocations()[&shard])
}

/// Allocates shard 4 and has its region acknowledge it: (shard, epoch, region).
fn started_shard(f: &mut Fixture) -> (ShardId, Epoch, MemberId) {
    let (shard, epoch, region) = allocated_shard(f);
    let view = f.view.clone();
    let started = Body::ShardStarted { shard };
    f.c.handle_message(at(2), &view, region, started, &mut f.out);
    f.taken();
    (shard, epoch, region)
}

/// `region` reports its instance of `shard` fenced by an epoch far above `epoch`; returns
/// that epoch and the allocations that followed.
fn fence(
    f: &mut Fixture,
    (shard, epoch, region): (ShardId, Epoch, MemberId),
) -> (Epoch, Vec<(ShardId, Epoch)>) {
    let newer = Epoch(epoch.0 + (100 << TIEBREAK_BITS));
    let fenced = Body::ShardFenced {
        shard,
        current: newer,
    };
    let view = f.view.clone();
    f.c.handle_message(at(3), &view, region, fenced, &mut f.out);
    (newer, f.taken().1)
}

#[test]
fn a_fenced_shard_is_hosted_again_by_its_region_above_the_epoch_that_fenced_it() {
    let mut f = Fixture::new();
    let started = started_shard(&mut f);
    let (shard, _, region) = started;
    let (newer, hosts) = fence(&mut f, started);
    assert_eq!(hosts.len(), 1, "allocated again at once");
    assert!(
        hosts[0].1 > newer,
        "{:?} is not above {newer:?}",
        hosts[0].1
    );
    // Letters its instance could not deliver wait in that region's buffer: anywhere else
    // they would race the newer letters their senders send to the new home.
    assert_eq!(
        f.c.allocations()[&shard],
        region,
        "hosted by the same region"
    );
}

/// A fence of the very allocation still in flight (its `ShardStarted` is slow) is not taken
/// for a report racing the `HostShard`: resent at that epoch it would be refused again, so it
/// is allocated again above the fence at once; a fence older than the allocation in flight is
/// about an earlier instance, and changes nothing.
#[test]
fn a_fence_of_the_allocation_in_flight_allocates_it_again_at_once() {
    let mut f = Fixture::new();
    let (shard, epoch, region) = allocated_shard(&mut f);
    let view = f.view.clone();
    let older = Body::ShardFenced {
        shard,
        current: Epoch(epoch.0 - 1),
    };
    f.c.handle_message(at(2), &view, region, older, &mut f.out);
    assert!(f.taken().1.is_empty(), "a fence of an earlier instance");
    let (newer, hosts) = fence(&mut f, (shard, epoch, region));
    assert_eq!(hosts.len(), 1, "allocated again before any acknowledgement");
    assert!(hosts[0].1 > newer, "{hosts:?} is not above {newer:?}");
}

#[test]
fn a_fenced_shard_is_hosted_again_by_its_region_even_while_it_shuts_down() {
    let mut f = Fixture::new();
    let started = started_shard(&mut f);
    let (shard, _, region) = started;
    let view = f.view.clone();
    f.c.handle_message(at(3), &view, region, Body::GracefulShutdownReq, &mut f.out);
    f.taken();
    assert!(
        f.c.handoffs.contains_key(&shard),
        "the shutdown hands it off"
    );
    let (_, hosts) = fence(&mut f, started);
    assert_eq!(hosts.len(), 1, "allocated again at once");
    assert_eq!(
        f.c.allocations()[&shard],
        region,
        "hosted by the same region"
    );
    // Once the region acknowledges it, the shutdown hands it off again.
    let started = Body::ShardStarted { shard };
    f.c.handle_message(at(4), &view, region, started, &mut f.out);
    assert!(f.c.handoffs.contains_key(&shard), "handed off again");
}

#[test]
fn a_fenced_shard_of_a_region_being_removed_is_allocated_elsewhere() {
    let mut f = Fixture::new();
    let started = started_shard(&mut f);
    let (shard, _, region) = started;
    let other = if region == m(1) { m(2) } else { m(1) };
    f.view = MembershipView::new(vec![Member::up(other, other.node.0, &[])]);
    let view = f.view.clone();
    f.c.handle_membership(at(3), &view, &Default::default(), &mut f.out);
    f.taken();
    fence(&mut f, started);
    assert_ne!(f.c.allocations().get(&shard), Some(&region));
}

/// Flapping-links seed 50012233: the old coordinator, cut off before it downed itself, started
/// a shard and remembered an entity in it after its successor had read the list; the entity
/// never ran again. A removal the gate waits out makes the list stale: it is read again once
/// the margin has passed (and not during it, while the removed member may still write).
#[test]
fn the_list_is_read_again_after_a_removal_the_gate_waits_out() {
    let mut f = Fixture::new();
    let mut down = Member::up(m(3), 3, &[]);
    down.status = crate::members::MemberStatus::Down;
    f.view = MembershipView::new(vec![
        Member::up(m(1), 1, &[]),
        Member::up(m(2), 2, &[]),
        down,
    ]);
    let view = f.view.clone();
    f.c.handle_membership(at(0), &view, &Default::default(), &mut f.out);
    assert_eq!(f.taken().0.len(), 1, "the first read");
    f.complete(1, StoreCompletion::Shards(vec![]));
    assert!(!f.c.gate_open, "a Down member may still run shards");

    f.view = MembershipView::new(vec![Member::up(m(1), 1, &[]), Member::up(m(2), 2, &[])])
        .with_removed([m(3)]);
    let view = f.view.clone();
    f.c.note_removal(m(3), at(5));
    f.c.handle_membership(at(5), &view, &Default::default(), &mut f.out);
    f.c.handle_timeout(at(10), &view, &mut f.out);
    assert!(f.taken().0.is_empty(), "not read while the margin runs");
    assert!(f.c.gate(&view).store_pending);

    let margin = ShardingSettings::default().down_removal_margin;
    f.c.handle_timeout(at(5) + margin, &view, &mut f.out);
    assert_eq!(f.taken().0.len(), 1, "read again");
    let started_meanwhile = vec![(ShardId(15), Epoch(7 << TIEBREAK_BITS))];
    f.complete(26, StoreCompletion::Shards(started_meanwhile));
    assert!(f.c.gate_open);
    let (_, hosts) = f.taken();
    assert_eq!(hosts.len(), 1, "{hosts:?}");
    assert_eq!(
        hosts[0].0,
        ShardId(15),
        "the shard it never heard of starts"
    );
}
