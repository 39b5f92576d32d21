//! The coordinator's side of remembering entities: it reads which shards remember entities
//! (with their newest epochs) before its gate opens, so that after a full cluster restart it
//! starts every one of them without waiting for a message, and it gives every allocation a
//! fencing epoch above any the store has seen.
//!
//! An epoch is `counter << TIEBREAK_BITS | tiebreak`: the counter grows with every allocation
//! and starts above the newest the store holds (it lists every shard it has an epoch for); the
//! tiebreak, derived from this coordinator's member id and start time, keeps two coordinators
//! that briefly coexist (a partition before downing), or one started again on the same member,
//! from handing out the same epoch (but for a 2^-20 chance). A region whose instance the store fenced reports the newer
//! epoch, and the counter jumps above it.
//!
//! A type that persists state without remembering entities reads the same list for its
//! epochs only (its entities' writes are fenced by them), and starts none of its shards.

use std::collections::BTreeMap;

use crate::coordinator::Coordinator;
use crate::effect::{Effects, Event};
use crate::id::{Epoch, MemberId, ShardId};
use crate::members::MembershipView;
use crate::remember::{RememberSettings, StoreCompletion, StoreRequest};
use crate::time::Instant;

/// Low bits of an epoch that tell coordinators apart.
const TIEBREAK_BITS: u32 = 20;

/// What the coordinator knows of the remember store.
#[derive(Debug)]
pub(super) struct RememberedShards {
    settings: RememberSettings,
    /// The type remembers entities: every listed shard is started after a full restart.
    starts_listed: bool,
    /// The shards' list arrived, and no removal was noted since it was read.
    loaded: bool,
    in_flight: bool,
    /// Removals noted while the gate was closed; a read answers for those noted when it left.
    removals: u64,
    read_for: u64,
    failures: u32,
    retry_at: Option<Instant>,
    /// The last allocation counter handed out.
    counter: u64,
    tiebreak: u64,
    /// The epoch of each shard's current allocation (resent with `HostShard`).
    epochs: BTreeMap<ShardId, Epoch>,
}

impl RememberedShards {
    /// Remembering for a coordinator `me` started at `now`: the tiebreak mixes both, so a
    /// coordinator started again on the same member does not reuse its predecessor's.
    pub(super) fn new(
        me: MemberId,
        settings: RememberSettings,
        starts_listed: bool,
        now: Instant,
    ) -> Self {
        let mixed = me.node.0.wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ me.incarnation.0.wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
            ^ now.as_nanos().wrapping_mul(0x1656_67B1_9E37_79F9);
        Self {
            settings,
            starts_listed,
            loaded: false,
            in_flight: false,
            removals: 0,
            read_for: 0,
            failures: 0,
            retry_at: None,
            counter: 0,
            tiebreak: (mixed >> 7) & ((1 << TIEBREAK_BITS) - 1),
            epochs: BTreeMap::new(),
        }
    }

    fn raise_above(&mut self, epoch: Epoch) {
        self.counter = self.counter.max(epoch.0 >> TIEBREAK_BITS);
    }
}

impl Coordinator {
    /// Whether allocation may use the store's word: always, unless remembering still waits
    /// for the shards' list.
    pub(super) fn store_ready(&self) -> bool {
        self.remember.as_ref().is_none_or(|r| r.loaded)
    }

    /// A fresh epoch for a new allocation of `shard` (zero for a type that neither remembers
    /// entities nor persists state).
    pub(super) fn allocate_epoch(&mut self, shard: ShardId) -> Epoch {
        let Some(r) = &mut self.remember else {
            return Epoch(0);
        };
        r.counter += 1;
        let epoch = Epoch(r.counter << TIEBREAK_BITS | r.tiebreak);
        r.epochs.insert(shard, epoch);
        epoch
    }

    /// The epoch of `shard`'s current allocation.
    pub(super) fn epoch_of(&self, shard: ShardId) -> Epoch {
        self.remember
            .as_ref()
            .and_then(|r| r.epochs.get(&shard).copied())
            .unwrap_or(Epoch(0))
    }

    /// A region's instance of `shard` was fenced by `current`: later epochs go above it.
    pub(super) fn note_fenced(&mut self, current: Epoch) {
        if let Some(r) = &mut self.remember {
            r.raise_above(current);
        }
    }

    /// A member was removed while the gate is closed: it may have run a coordinator of its own
    /// (a partition's other side, before it downed itself), whose allocations reached the
    /// store after the list was read. The list is read again once the removal's margin has
    /// passed, before the gate opens (flapping-links seed 50012233: the coordinator that
    /// succeeded one cut off never heard of a shard the old one started meanwhile, and its
    /// remembered entity never ran again).
    pub(super) fn removal_noted(&mut self) {
        if !self.gate_open {
            self.reread_remembered();
        }
    }

    /// Reads the store's shards again before the gate opens (an answer to a read already out
    /// is taken as stale): someone else may have allocated since they were read.
    pub(super) fn reread_remembered(&mut self) {
        if let Some(r) = &mut self.remember {
            if r.loaded || r.in_flight {
                crate::probe::hit(
                    "coordinator: the remembered shards are read again after a removal",
                );
            }
            r.removals += 1;
            r.loaded = false;
        }
    }

    /// Sends the read of the remembered shards when it is due: not while a removal's margin
    /// runs before the gate opens (its member may still be writing).
    pub(super) fn poll_store(&mut self, now: Instant, out: &mut Effects) {
        let waiting_out = !self.gate_open && !self.recent_removals.is_empty();
        let Some(r) = &mut self.remember else { return };
        if r.loaded || r.in_flight || waiting_out || r.retry_at.is_some_and(|at| at > now) {
            return;
        }
        r.retry_at = None;
        r.in_flight = true;
        r.read_for = r.removals;
        out.store(StoreRequest::Shards {
            entity_type: self.entity_type.clone(),
            number_of_shards: self.number_of_shards,
        });
    }

    /// When the read is next retried.
    pub(super) fn store_timeout(&self) -> Option<Instant> {
        // While a removal's margin runs, its end is the coordinator's own timer.
        let waiting_out = !self.gate_open && !self.recent_removals.is_empty();
        self.remember
            .as_ref()
            .filter(|r| !r.loaded && !r.in_flight && !waiting_out)
            .and_then(|r| r.retry_at)
    }

    /// The store answered the read: every remembered shard this coordinator does not know
    /// waits for a home (with no requester) when the type remembers entities, and the gate may
    /// open.
    pub(crate) fn handle_store_completed(
        &mut self,
        now: Instant,
        view: &MembershipView,
        completion: StoreCompletion,
        out: &mut Effects,
    ) {
        let number_of_shards = self.number_of_shards;
        let Some(r) = self.remember.as_mut().filter(|r| r.in_flight) else {
            return;
        };
        r.in_flight = false;
        match completion {
            StoreCompletion::Shards(shards) => {
                r.loaded = r.read_for == r.removals;
                r.failures = 0;
                for &(_, epoch) in &shards {
                    r.raise_above(epoch);
                }
                let starts_listed = r.starts_listed;
                for (shard, _) in shards.into_iter().filter(|_| starts_listed) {
                    if shard.0 < number_of_shards && !self.shards.contains_key(&shard) {
                        self.waiting.entry(shard).or_default();
                    }
                }
                self.try_open_gate(now, view, out);
            }
            other => {
                let reason = match other {
                    StoreCompletion::Failed(reason) => reason,
                    other => format!("unexpected answer to the shards' read: {other:?}"),
                };
                r.failures += 1;
                r.retry_at = Some(now + r.settings.retry_delay(r.failures));
                out.event(Event::RememberStoreFailed {
                    entity_type: self.entity_type.clone(),
                    shard: None,
                    reason,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests;
