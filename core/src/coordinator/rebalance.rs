//! What starts handoffs: a region asking to hand off everything before it stops (graceful
//! shutdown), and the periodic rebalance round the allocation strategy decides.

use std::collections::BTreeSet;

use super::Coordinator;

/// A rebalance round whose handoffs have not all ended.
#[derive(Debug)]
pub(super) struct RoundInFlight {
    started: Instant,
    /// The shards it moved.
    shards: u32,
    /// Those whose handoff has not ended.
    remaining: BTreeSet<ShardId>,
}
use super::handoff::Handoff;
use crate::effect::{Effects, Event};
use crate::explain::Decision;
use crate::id::{MemberId, ShardId};
use crate::members::MembershipView;
use crate::message::Body;
use crate::time::Instant;

impl Coordinator {
    /// A region asks to hand off all its shards before it stops. Not limited by the
    /// strategy's rebalance limits.
    pub(super) fn handle_graceful_shutdown(
        &mut self,
        now: Instant,
        region: MemberId,
        out: &mut Effects,
    ) {
        if !self.regions.contains_key(&region) {
            return;
        }
        if !self.shutting_down.insert(region) {
            // Repeated while its handoffs run (they are left alone), or after one was
            // abandoned: that one starts again.
            if self.regions[&region]
                .iter()
                .any(|shard| !self.handoffs.contains_key(shard))
            {
                crate::probe::hit("coordinator: a repeated shutdown request hands off again");
            }
        }
        // A handoff needs the acks of every region that may forward to the owner; before the gate
        // opens some have not registered yet, so the handoffs start when it opens.
        if self.gate_open {
            self.hand_off_region(now, region, out);
        } else {
            crate::probe::hit("coordinator: a graceful shutdown waits for the gate");
        }
    }

    /// Starts handing off every shard of a region that is shutting down.
    pub(super) fn hand_off_region(&mut self, now: Instant, region: MemberId, out: &mut Effects) {
        let Some(shards) = self.regions.get(&region).cloned() else {
            return;
        };
        for shard in shards.iter().copied() {
            if self.unacked.contains_key(&shard) && !self.handoffs.contains_key(&shard) {
                // Not acknowledged, so no other region was told its home and nothing can have
                // been forwarded there: no barrier is needed. But the region may have started
                // it (its `ShardStarted` lost with a broken connection), so it is told to stop
                // it like any handoff, and the shard moves on its `ShardStopped`.
                let deadline = now + self.settings.handoff_timeout;
                crate::probe::hit(
                    "coordinator: a shutting-down region's unacknowledged shard is told to stop",
                );
                self.handoffs
                    .insert(shard, Handoff::stopping(region, now, deadline));
                out.send(region, &self.entity_type, Body::HandOff { shard });
            } else {
                self.start_handoff(now, shard, out);
            }
        }
    }

    /// A handoff of `shard` ended (completed or abandoned): the rounds it was the last of are
    /// over.
    pub(super) fn handoff_ended(&mut self, now: Instant, shard: ShardId, out: &mut Effects) {
        if self.rounds.is_empty() {
            return;
        }
        for round in &mut self.rounds {
            round.remaining.remove(&shard);
        }
        let entity_type = &self.entity_type;
        self.rounds.retain(|round| {
            if !round.remaining.is_empty() {
                return true;
            }
            out.event(Event::RebalanceCompleted {
                entity_type: entity_type.clone(),
                shards: round.shards,
                took: now.saturating_duration_since(round.started),
            });
            false
        });
    }

    /// The rebalance tick: ask the strategy which shards to move and start their handoffs.
    pub(super) fn rebalance(&mut self, now: Instant, view: &MembershipView, out: &mut Effects) {
        let in_progress: BTreeSet<ShardId> = self
            .handoffs
            .keys()
            .chain(self.unacked.keys())
            .copied()
            .collect();
        let allocation = self.allocation_view(view);
        let chosen = self.strategy.rebalance(&allocation, &in_progress);
        let mut moved: Vec<(ShardId, Option<MemberId>)> = Vec::with_capacity(chosen.len());
        for shard in chosen {
            let from = self.shards.get(&shard).copied();
            if self.start_handoff(now, shard, out) {
                moved.push((shard, from));
            }
        }
        let round = u32::try_from(moved.len()).unwrap_or(u32::MAX);
        for &(shard, from) in &moved {
            let decision = Decision::Rebalanced {
                shard,
                from: from.unwrap_or(self.me),
                round,
                in_progress: u32::try_from(in_progress.len()).unwrap_or(u32::MAX),
                strategy: self.strategy_name.clone(),
            };
            self.decisions.record(now, decision);
        }
        let moved: Vec<ShardId> = moved.into_iter().map(|(shard, _)| shard).collect();
        if !moved.is_empty() {
            tracing::info!(entity_type = %self.entity_type, shards = ?moved, "rebalance");
            let shards = u32::try_from(moved.len()).unwrap_or(u32::MAX);
            let remaining = moved.iter().copied().collect();
            self.rounds.push(RoundInFlight {
                started: now,
                shards,
                remaining,
            });
            out.event(Event::Rebalance {
                entity_type: self.entity_type.clone(),
                shards: moved,
            });
        }
    }
}
