//! What fencing adds to the region: routing the remember store's answers to the shard
//! instance that asked (by epoch), and stopping an instance a store fenced (the remember store,
//! or the state store refusing an entity's write), which then reports `ShardFenced` to the
//! coordinator instead of `ShardStopped`.

use crate::effect::{Effects, Event};
use crate::hash::shard_of;
use crate::id::{EntityId, Epoch, ShardId};
use crate::region::Region;
use crate::remember::StoreCompletion;
use crate::time::Instant;

impl Region {
    /// The remember store answered request `seq` (0: the load) of the shard instance
    /// allocated at `epoch` (an answer for an earlier instance of the shard is ignored).
    pub(crate) fn handle_store_completed(
        &mut self,
        now: Instant,
        (shard_id, epoch, seq): (ShardId, Epoch, u64),
        completion: StoreCompletion,
        out: &mut Effects,
    ) {
        let Some(shard) = self
            .shards
            .get_mut(&shard_id)
            .filter(|s| s.epoch() == epoch)
        else {
            tracing::debug!(shard = %shard_id, ?epoch, "store answer for a shard instance that is gone");
            return;
        };
        shard.handle_store_completed(now, seq, completion, &mut self.budget, out);
        self.after_shard_change(now, shard_id, out);
    }

    /// A state store refused `entity`'s write at `epoch`, holding `current`: reported, and the
    /// shard's instance at that epoch (if it is still here) stops as a fenced one.
    pub(crate) fn handle_write_fenced(
        &mut self,
        now: Instant,
        entity: EntityId,
        (epoch, current): (Epoch, Epoch),
        out: &mut Effects,
    ) {
        let shard_id = shard_of(&entity, self.number_of_shards);
        out.event(Event::WriteFenced {
            entity_type: self.entity_type.clone(),
            entity,
            shard: shard_id,
            epoch,
            current,
        });
        if current <= epoch {
            crate::probe::hit("region: a write under an older lease token was refused");
            return;
        }
        let Some(shard) = self
            .shards
            .get_mut(&shard_id)
            .filter(|s| s.epoch() == epoch)
        else {
            crate::probe::hit("region: a fenced write of a shard instance that is gone");
            return;
        };
        crate::probe::hit("region: an entity's fenced write fences its shard");
        shard.handle_write_fenced(current);
        self.after_shard_change(now, shard_id, out);
    }

    /// After a shard changed: re-reads its deadline, stops it if the store fenced it, and
    /// completes its stop if it has stopped.
    pub(super) fn after_shard_change(
        &mut self,
        now: Instant,
        shard_id: ShardId,
        out: &mut Effects,
    ) {
        let Some(shard) = self.shards.get_mut(&shard_id) else {
            return;
        };
        if let Some(current) = shard.fenced_by() {
            if let std::collections::btree_map::Entry::Vacant(fenced) = self.fenced.entry(shard_id)
            {
                // A newer allocation of this shard exists: this instance must not run its
                // entities any longer. It stops like a handoff; the coordinator then hears
                // `ShardFenced` instead of `ShardStopped` and allocates it above `current`.
                crate::probe::hit("region: a fenced shard stops its entities");
                fenced.insert(current);
                self.homes.remove(&shard_id);
                shard.handle_handoff(now, out);
                out.event(Event::ShardFenced {
                    entity_type: self.entity_type.clone(),
                    shard: shard_id,
                    current,
                });
            }
        }
        let stopped = shard.is_stopped();
        self.touch(shard_id);
        if stopped {
            self.finish_shard_stop(now, shard_id, out);
        }
    }
}
