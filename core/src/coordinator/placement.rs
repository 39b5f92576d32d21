//! Where shards live: answering `GetShardHome`, allocating unknown shards through the strategy
//! (re-validated against the current regions), answering requests that had to wait, and
//! re-sending `HostShard` until it is acknowledged.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::allocation::{AllocationView, RegionAllocation};
use crate::coordinator::Coordinator;
use crate::effect::{Effects, Event};
use crate::explain::{AllocationCause, Decision};
use crate::id::{MemberId, ShardId};
use crate::members::{MemberStatus, MembershipView};
use crate::message::{AllocationGate, Body};
use crate::time::Instant;

impl Coordinator {
    /// Chooses a home for an unallocated shard and sends it `HostShard`; `requesters` wait for
    /// its acknowledgement (or, if no region is available, for the next chance).
    pub(super) fn allocate(
        &mut self,
        now: Instant,
        view: &MembershipView,
        shard: ShardId,
        requesters: BTreeSet<MemberId>,
        out: &mut Effects,
    ) {
        if !self.store_ready() {
            // Remembering: epochs must start above the store's (a handoff completing before
            // the store answered would otherwise allocate below them: seed 559). The shard
            // waits for the gate like any unknown one.
            crate::probe::hit("coordinator: an allocation waits for the remember store's list");
            self.waiting.entry(shard).or_default().extend(requesters);
            return;
        }
        if !self.lease_allows(now) {
            // A handoff ending after the coordinator lost its lease: the shard waits for the
            // gate, which opens again once the lease is held.
            crate::probe::hit("coordinator: an allocation waits for the coordinator's lease");
            self.waiting.entry(shard).or_default().extend(requesters);
            return;
        }
        let fenced_region = self.fenced_regions.remove(&shard);
        if let Some(region) = fenced_region.filter(|r| Self::may_host_again(view, *r)) {
            crate::probe::hit("coordinator: a fenced shard is hosted again once the lease is held");
            let cause = AllocationCause::FencedHostedAgain;
            self.allocated(now, (shard, region, cause), out);
            self.host(now, shard, region, requesters, out);
            return;
        }
        let allocation = self.allocation_view(view);
        let requester = requesters.first().copied().unwrap_or(self.me);
        let chosen = self
            .strategy
            .allocate_shard(requester, shard, &allocation)
            .filter(|r| allocation.regions.iter().any(|a| a.region == *r));
        let Some(region) = chosen else {
            self.waiting.entry(shard).or_default().extend(requesters);
            return;
        };
        let cause = self.strategy_cause(requester, region, &allocation);
        self.allocated(now, (shard, region, cause), out);
        self.host(now, shard, region, requesters, out);
    }

    /// Notes and reports an allocation.
    fn allocated(
        &mut self,
        now: Instant,
        (shard, region, cause): (ShardId, MemberId, AllocationCause),
        out: &mut Effects,
    ) {
        (self.decisions).record(
            now,
            Decision::Allocated {
                shard,
                region,
                cause,
            },
        );
        out.event(Event::ShardAllocated {
            entity_type: self.entity_type.clone(),
            shard,
            region,
        });
    }

    /// Why the strategy chose `region`: the regions' shard counts it chose from.
    fn strategy_cause(
        &self,
        requester: MemberId,
        region: MemberId,
        allocation: &AllocationView,
    ) -> AllocationCause {
        let held = |a: &RegionAllocation| u32::try_from(a.shards.len()).unwrap_or(u32::MAX);
        let counts = allocation.regions.iter().map(held);
        AllocationCause::Strategy {
            strategy: self.strategy_name.clone(),
            requester,
            regions: u32::try_from(allocation.regions.len()).unwrap_or(u32::MAX),
            chosen_held: (allocation.regions.iter())
                .find(|a| a.region == region)
                .map_or(0, held),
            fewest: counts.clone().min().unwrap_or(0),
            most: counts.max().unwrap_or(0),
        }
    }

    /// Allocates `shard` to `region` with a new epoch and sends it `HostShard`; `requesters`
    /// wait for its acknowledgement.
    pub(super) fn host(
        &mut self,
        now: Instant,
        shard: ShardId,
        region: MemberId,
        requesters: BTreeSet<MemberId>,
        out: &mut Effects,
    ) {
        self.assign(shard, region);
        self.unacked
            .set(shard, Some(now + self.settings.shard_start_timeout));
        let epoch = self.allocate_epoch(shard);
        out.send(region, &self.entity_type, Body::HostShard { shard, epoch });
        // Requesters learn the home once the region acknowledges it (`ShardStarted`): until
        // then the allocation may still move without a handoff (a region that is shutting
        // down refuses it), and no one must have forwarded anything there.
        self.waiting.entry(shard).or_default().extend(requesters);
    }

    /// Tells each requester where `shard` lives.
    fn send_home(
        &self,
        shard: ShardId,
        region: MemberId,
        requesters: BTreeSet<MemberId>,
        out: &mut Effects,
    ) {
        for requester in requesters {
            out.send(
                requester,
                &self.entity_type,
                Body::ShardHome { shard, region },
            );
        }
    }

    /// Answers requests that were waiting, now that something changed.
    pub(super) fn serve_waiting(&mut self, now: Instant, view: &MembershipView, out: &mut Effects) {
        // Nothing the gate depends on changes during the pass: it is worked out once (every
        // shard of a large cluster's start may wait, and the gate looks at every member).
        let mut gate = None;
        for (shard, requesters) in std::mem::take(&mut self.waiting) {
            self.answer_or_defer_with(now, view, shard, requesters, &mut gate, out);
        }
    }

    /// Answers requests that were waiting for `shards`, now that something changed about them.
    pub(super) fn serve_waiting_for(
        &mut self,
        now: Instant,
        view: &MembershipView,
        shards: impl IntoIterator<Item = ShardId>,
        out: &mut Effects,
    ) {
        for shard in shards {
            if let Some(requesters) = self.waiting.remove(&shard) {
                self.answer_or_defer(now, view, shard, requesters, out);
            }
        }
    }

    /// Answers `requesters` about `shard` if that can be done now: not while it is being handed
    /// off (its owner is stopping it), not before its region acknowledged it, not while its
    /// region is being removed, and not for an unknown shard before the gate opens. Otherwise
    /// they wait.
    pub(super) fn answer_or_defer(
        &mut self,
        now: Instant,
        view: &MembershipView,
        shard: ShardId,
        requesters: BTreeSet<MemberId>,
        out: &mut Effects,
    ) {
        self.answer_or_defer_with(now, view, shard, requesters, &mut None, out);
    }

    /// [`Coordinator::answer_or_defer`], with the gate as worked out earlier in the same pass.
    fn answer_or_defer_with(
        &mut self,
        now: Instant,
        view: &MembershipView,
        shard: ShardId,
        requesters: BTreeSet<MemberId>,
        gate: &mut Option<AllocationGate>,
        out: &mut Effects,
    ) {
        if let Some(handoff) = self.handoffs.get_mut(&shard) {
            handoff.requesters.extend(requesters);
            return;
        }
        match self.shards.get(&shard) {
            Some(home)
                if !self.terminating.contains_key(home) && !self.unacked.contains_key(&shard) =>
            {
                let region = *home;
                self.send_home(shard, region, requesters, out);
            }
            None if self.gate_open => self.allocate(now, view, shard, requesters, out),
            None => {
                let first = !self.waiting.contains_key(&shard);
                self.waiting.entry(shard).or_default().extend(requesters);
                if first {
                    let gate = gate.get_or_insert_with(|| self.gate(view));
                    self.report_gate(now, gate, out);
                }
            }
            _ => {
                if self.unacked.contains_key(&shard) {
                    crate::probe::hit("coordinator: a home waits for its region's acknowledgement");
                }
                self.waiting.entry(shard).or_default().extend(requesters);
            }
        }
    }

    /// `region` acknowledged hosting `shard`: requesters waiting for it learn its home.
    pub(super) fn handle_shard_started(
        &mut self,
        now: Instant,
        view: &MembershipView,
        region: MemberId,
        shard: ShardId,
        out: &mut Effects,
    ) {
        if self.shards.get(&shard) != Some(&region) || self.unacked.remove(shard).is_none() {
            return;
        }
        self.serve_waiting_for(now, view, [shard], out);
        // A region that is shutting down hands off what it acknowledges late, too.
        if self.gate_open && self.shutting_down.contains(&region) {
            crate::probe::hit(
                "coordinator: a late ShardStarted of a shutting-down region is handed off",
            );
            self.start_handoff(now, shard, out);
        }
    }

    pub(super) fn resend_host_shards(&mut self, now: Instant, out: &mut Effects) {
        // A resend is an allocation too: not without the lease (another coordinator may have
        // allocated the shard elsewhere since); sent again once the lease is held.
        if !self.lease_allows(now) {
            return;
        }
        let next = now + self.settings.shard_start_timeout;
        let mut due = self.unacked.due(now);
        // In shard order, as a deterministic replay expects whatever the deadlines were.
        due.sort_unstable();
        for shard in due {
            self.unacked.set(shard, Some(next));
            let (region, epoch) = (self.shards[&shard], self.epoch_of(shard));
            out.send(region, &self.entity_type, Body::HostShard { shard, epoch });
        }
    }

    pub(super) fn assign(&mut self, shard: ShardId, region: MemberId) {
        self.fenced_regions.remove(&shard);
        self.shards.insert(shard, region);
        Arc::make_mut(self.regions.entry(region).or_default()).push(shard);
    }

    pub(super) fn deallocate(&mut self, shard: ShardId) {
        if let Some(region) = self.shards.remove(&shard) {
            if let Some(list) = self.regions.get_mut(&region) {
                Arc::make_mut(list).retain(|s| *s != shard);
            }
        }
        self.unacked.remove(shard);
    }

    /// Regions that may receive new shards: registered, Up, not shutting down or terminating.
    pub(super) fn allocation_view(&self, view: &MembershipView) -> AllocationView {
        let regions = self
            .regions
            .iter()
            .filter(|(r, _)| !self.shutting_down.contains(r) && !self.terminating.contains_key(r))
            .filter_map(|(r, shards)| {
                let member = view.member(*r).filter(|m| m.status == MemberStatus::Up)?;
                Some(RegionAllocation {
                    region: *r,
                    shards: shards.clone(),
                    status: member.status,
                    app_version: member.app_version,
                    up_number: member.up_number,
                })
            })
            .collect();
        // A member that is Up but has not registered its region yet is still joining as far as
        // sharding goes: rebalancing now would move shards that move again once it registers
        // (and would ignore its app version during a rolling update).
        let role = self.role.as_deref();
        let registering = view.members().iter().any(|m| {
            m.status == MemberStatus::Up
                && m.hosts_type(&self.entity_type, role)
                && !self.is_registered(m.id)
        });
        AllocationView {
            regions,
            any_unreachable: view.any_unreachable(),
            any_joining: view.any_joining() || registering,
        }
    }
}
