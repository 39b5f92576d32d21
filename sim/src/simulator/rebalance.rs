//! Each rebalance round (`Event::Rebalance`) is checked against the default least-shard
//! strategy, from the coordinator's table and its node's membership view at that instant:
//!
//! - only at a good time: nobody unreachable, nobody joining, one application version among
//!   the Up regions (those whose shutdown request the coordinator heard after they registered
//!   are out of it, for the coordinator as here: see [`Shutdowns`]);
//! - within its limit: at most `max(1, min(⌊0.1 × N⌋, 20))` of the N shards the Up regions hold;
//! - nothing it should not move: each shard was allocated to an Up region holding at least two
//!   more shards than the least loaded Up region (both of Akka's phases only move from such
//!   regions), and was not moving already;
//! - one round at a time: in a calm cluster, no other shard is being handed off or started.

use std::collections::{BTreeMap, BTreeSet};

use shoal_core::{MemberId, MemberStatus, NodeId, ShardId};

use super::Simulator;
use crate::check::Property;

/// Akka's (and the simulator's) least-shard limits.
const ABSOLUTE_LIMIT: usize = 20;
const RELATIVE_LIMIT: f64 = 0.1;

/// Which regions' graceful shutdown requests each coordinator heard, as pairs
/// `(coordinator, region)`. A request counts once the region had registered with that
/// coordinator: before, the coordinator ignores it (it knows no such region, as Akka's) and
/// may still give the region shards until the region asks again (rolling-restart seed 61269
/// with the membership oracle: a member's requests reached the coordinator before the view
/// that named it, and its next one, sent on registering, came after a rebalance round).
#[derive(Debug, Default)]
pub(crate) struct Shutdowns {
    registered: BTreeSet<(MemberId, MemberId)>,
    heard: BTreeSet<(MemberId, MemberId)>,
}

impl Shutdowns {
    /// `coordinator` acknowledged `region`'s registration.
    pub(crate) fn registered(&mut self, coordinator: MemberId, region: MemberId) {
        self.registered.insert((coordinator, region));
    }

    /// `coordinator` received `region`'s graceful shutdown request.
    pub(crate) fn heard(&mut self, coordinator: MemberId, region: MemberId) {
        if self.registered.contains(&(coordinator, region)) {
            self.heard.insert((coordinator, region));
        }
    }

    /// Whether `coordinator` heard `region` ask to shut down after it registered.
    fn is_heard(&self, coordinator: MemberId, region: MemberId) -> bool {
        self.heard.contains(&(coordinator, region))
    }
}

impl Simulator {
    /// The coordinator on node `n` began a rebalance round moving `shards`.
    pub(crate) fn check_rebalance(&mut self, n: NodeId, shards: &[ShardId]) {
        self.mark("a rebalance round began");
        // The rules below are least-shard's; the others have their own (the external strategy
        // moves every shard off its desired node at once, at any time).
        if !matches!(
            self.opts.cluster.allocation,
            shoal_core::AllocationStrategyConfig::LeastShard { .. }
        ) {
            self.mark("a rebalance round of another strategy than least-shard began");
            return;
        }
        let Some(node) = self.nodes.get(&n) else {
            return;
        };
        let view = node.driver.node().view();
        let Some(table) = node.driver.node().coordinator_allocations(&self.ty) else {
            return;
        };
        let mut wrong = Vec::new();
        if view.any_unreachable() || view.any_joining() {
            wrong.push("while a member is unreachable or joining".to_owned());
        }
        let up: Vec<&shoal_core::Member> = view
            .members()
            .iter()
            .filter(|m| m.status == MemberStatus::Up && m.hosts_type(&self.ty, None))
            .filter(|m| !self.shutdowns.is_heard(node.id, m.id))
            .collect();
        if up.windows(2).any(|w| w[0].app_version != w[1].app_version) {
            wrong.push("while members run different versions".to_owned());
        }
        let mut counts: BTreeMap<MemberId, usize> = up.iter().map(|m| (m.id, 0)).collect();
        for region in table.values() {
            if let Some(c) = counts.get_mut(region) {
                *c += 1;
            }
        }
        let total: usize = counts.values().sum();
        let least = counts.values().min().copied().unwrap_or(0);
        let limit = ((RELATIVE_LIMIT * total as f64) as usize).clamp(1, ABSOLUTE_LIMIT);
        if shards.len() > limit {
            wrong.push(format!(
                "{} shards of {total} (limit {limit})",
                shards.len()
            ));
        }
        for shard in shards {
            match table.get(shard).and_then(|r| counts.get(r).map(|c| (r, c))) {
                Some((region, &count)) if count < least + 2 => wrong.push(format!(
                    "{shard} from {region}, which holds {count} shards (least: {least})"
                )),
                Some(_) => {}
                None => wrong.push(format!("{shard}, not allocated to an Up region")),
            }
        }
        let others = self.stalls.moving_besides(self.now, shards);
        if !others.is_empty() {
            wrong.push(format!("while {others:?} were still moving"));
        }
        if !wrong.is_empty() {
            let detail = format!("rebalance round moving {shards:?}: {}", wrong.join("; "));
            let coordinator = node.id;
            self.check
                .fail(self.now, Property::Rebalance, coordinator, detail);
        }
    }
}
