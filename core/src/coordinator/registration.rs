//! How regions join and leave a coordinator: registration (which rebuilds the allocation
//! table) and removal of regions that stopped or left the cluster.

use std::collections::{BTreeMap, BTreeSet};

use crate::coordinator::handoff::Handoff;
use crate::coordinator::{Coordinator, SHARD_HOMES_BATCH};
use crate::effect::Effects;
use crate::id::{MemberId, ShardId};
use crate::members::MembershipView;
use crate::message::{Body, RegionShards};
use crate::time::Instant;

impl Coordinator {
    pub(super) fn handle_register(
        &mut self,
        now: Instant,
        region: MemberId,
        hosted: Vec<ShardId>,
        handing_off: Vec<ShardId>,
        out: &mut Effects,
    ) {
        self.regions.entry(region).or_default();
        let reported: BTreeSet<ShardId> = hosted.iter().chain(&handing_off).copied().collect();
        if self.regions[&region]
            .iter()
            .any(|s| !reported.contains(s) && self.unacked.contains_key(s))
        {
            // Its `HostShard` is still on its way (or its `ShardStarted` is): the shard stays
            // allocated, or it would be allocated again elsewhere while this region starts it.
            crate::probe::hit("coordinator: a registration races an unacknowledged allocation");
        }
        // Acknowledged shards it no longer reports have stopped (their `ShardStopped` was lost).
        let vanished: Vec<ShardId> = self.regions[&region]
            .iter()
            .filter(|s| {
                !reported.contains(s)
                    && !self.unacked.contains_key(s)
                    && !self.handoffs.contains_key(s)
            })
            .copied()
            .collect();
        for shard in vanished {
            crate::probe::hit(
                "coordinator: a registration no longer reporting a shard deallocates it",
            );
            self.deallocate(shard);
        }
        for shard in hosted.iter().chain(&handing_off).copied() {
            match self.shards.get(&shard) {
                None => self.assign(shard, region),
                Some(&owner) if owner == region => {
                    self.unacked.remove(shard);
                }
                Some(&owner) => {
                    // Two regions claim the shard (only after a split brain). Keep the first
                    // and have the second stop its copy.
                    tracing::warn!(%shard, %owner, claimant = %region, "shard claimed twice");
                    crate::probe::hit("coordinator: a second claim for a shard is told to stop it");
                    out.send(region, &self.entity_type, Body::HandOff { shard });
                }
            }
        }
        for shard in handing_off {
            if self.shards.get(&shard) == Some(&region) && !self.handoffs.contains_key(&shard) {
                self.handoffs.insert(
                    shard,
                    Handoff::stopping(region, now, now + self.settings.handoff_timeout),
                );
            }
        }
        self.send_homes(region, out);
        out.send(region, &self.entity_type, Body::RegisterAck);
    }

    /// Removes a region (graceful stop, or removal margin over): its shards are deallocated and
    /// re-allocated at once, and handoffs from it complete.
    pub(super) fn remove_region(
        &mut self,
        now: Instant,
        view: &MembershipView,
        region: MemberId,
        out: &mut Effects,
    ) {
        self.proxies.remove(&region);
        // Whether the region counts as having acknowledged handoffs is settled when its member
        // leaves the view (`handle_membership`): a region removed here may still be routing.
        let Some(shards) = self.regions.remove(&region) else {
            return;
        };
        self.shutting_down.remove(&region);
        self.terminating.remove(&region);
        for shard in shards.iter().copied() {
            let requesters = self
                .handoffs
                .remove(&shard)
                .map(|h| h.requesters)
                .unwrap_or_default();
            self.shards.remove(&shard);
            self.unacked.remove(shard);
            self.waiting.entry(shard).or_default().extend(requesters);
        }
        self.serve_waiting(now, view, out);
    }

    pub(super) fn send_homes(&self, to: MemberId, out: &mut Effects) {
        let homes: Vec<(ShardId, MemberId)> = self
            .shards
            .iter()
            .filter(|(s, r)| {
                !self.handoffs.contains_key(s)
                    && !self.unacked.contains_key(s)
                    && !self.terminating.contains_key(r)
            })
            .map(|(s, r)| (*s, *r))
            .collect();
        for batch in homes.chunks(SHARD_HOMES_BATCH) {
            let mut grouped: BTreeMap<MemberId, Vec<ShardId>> = BTreeMap::new();
            for &(shard, region) in batch {
                grouped.entry(region).or_default().push(shard);
            }
            let homes = grouped
                .into_iter()
                .map(|(region, shards)| RegionShards { region, shards })
                .collect();
            out.send(to, &self.entity_type, Body::ShardHomes { homes });
        }
    }

    pub(super) fn is_registered(&self, member: MemberId) -> bool {
        self.regions.contains_key(&member) || self.proxies.contains(&member)
    }

    pub(super) fn has_role(&self, view: &MembershipView, member: MemberId) -> bool {
        view.member(member)
            .is_some_and(|m| m.has_role(self.role.as_deref()))
    }
}
