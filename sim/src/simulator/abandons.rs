//! A handoff is never held up by a region its coordinator knows is gone. A region that crashed
//! or was downed counts as having acknowledged every handoff once its coordinator's view no
//! longer holds it (the README's protocol decision 5); only one that left gracefully is still waited for
//! after its removal, its acknowledgement coming through the owner. So when a coordinator
//! abandons a round (`Event::HandoffAbandoned`), every region it waited for is still in its
//! view, or was asked to leave.

use std::collections::BTreeMap;

use shoal_core::{Instant, MemberId, NodeId, ShardId};

use crate::check::Property;

use super::Simulator;

/// Members that were asked to leave gracefully, and when (first).
#[derive(Debug, Default)]
pub(super) struct Leavers(BTreeMap<MemberId, Instant>);

impl Leavers {
    /// `member` was asked to leave at `now`.
    pub(super) fn insert(&mut self, now: Instant, member: MemberId) {
        self.0.entry(member).or_insert(now);
    }

    /// Members asked to leave before `before`, with when.
    pub(super) fn asked_before(
        &self,
        before: Instant,
    ) -> impl Iterator<Item = (MemberId, Instant)> + '_ {
        (self.0.iter())
            .filter(move |(_, at)| **at < before)
            .map(|(m, at)| (*m, *at))
    }
}

impl Simulator {
    /// The coordinator on node `n` abandoned handing `shard` off, `waiting_for` these regions,
    /// in a call that did not change its view after that.
    pub(super) fn handoff_abandoned(
        &mut self,
        n: NodeId,
        shard: ShardId,
        waiting_for: &[MemberId],
    ) {
        let Some(node) = self.nodes.get(&n) else {
            return;
        };
        let view = node.driver.node().view();
        let gone: Vec<MemberId> = (waiting_for.iter())
            .filter(|r| view.member(**r).is_none() && !self.leavers.0.contains_key(r))
            .copied()
            .collect();
        if !gone.is_empty() {
            let detail = format!(
                "the handoff of {shard} was abandoned waiting for {gone:?}, which crashed or were \
                 downed and are out of the coordinator's view: they count as having acknowledged"
            );
            self.check
                .fail(self.now, Property::GracefulStall, node.id, detail);
        }
    }
}
