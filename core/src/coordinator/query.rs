//! Cluster-wide statistics: the coordinator asks every region and answers when all replied or
//! `shard-region-query-timeout` passed (listing the silent ones as failed).

use std::collections::BTreeSet;

use crate::coordinator::Coordinator;
use crate::effect::Effects;
use crate::id::{MemberId, RequestId, ShardId, StatsQueryId};
use crate::message::{Body, RegionStats};
use crate::time::Instant;

/// One statistics query in progress.
#[derive(Debug)]
pub(super) struct StatsQuery {
    requester: MemberId,
    request: RequestId,
    waiting: BTreeSet<MemberId>,
    answers: Vec<RegionStats>,
    pub(super) deadline: Instant,
}

impl Coordinator {
    pub(super) fn start_stats_query(
        &mut self,
        now: Instant,
        requester: MemberId,
        request: RequestId,
        out: &mut Effects,
    ) {
        let query = StatsQueryId(self.next_query);
        self.next_query += 1;
        let waiting: BTreeSet<MemberId> = self.regions.keys().copied().collect();
        for &region in &waiting {
            out.send(region, &self.entity_type, Body::GetRegionStats { query });
        }
        let deadline = now + self.settings.shard_region_query_timeout;
        let pending = StatsQuery {
            requester,
            request,
            waiting,
            answers: Vec::new(),
            deadline,
        };
        self.stats.insert(query, pending);
        self.finish_stats_query(query, false, out);
    }

    pub(super) fn handle_stats_reply(
        &mut self,
        query: StatsQueryId,
        region: MemberId,
        shards: Vec<(ShardId, u32)>,
        out: &mut Effects,
    ) {
        let Some(pending) = self.stats.get_mut(&query) else {
            return;
        };
        if pending.waiting.remove(&region) {
            pending.answers.push(RegionStats { region, shards });
            self.finish_stats_query(query, false, out);
        }
    }

    pub(super) fn expire_stats_queries(&mut self, now: Instant, out: &mut Effects) {
        let expired: Vec<StatsQueryId> = self
            .stats
            .iter()
            .filter(|(_, q)| q.deadline <= now)
            .map(|(id, _)| *id)
            .collect();
        for query in expired {
            self.finish_stats_query(query, true, out);
        }
    }

    /// Answers the query if every region replied (or `force`: the deadline passed).
    fn finish_stats_query(&mut self, query: StatsQueryId, force: bool, out: &mut Effects) {
        let done = self
            .stats
            .get(&query)
            .is_some_and(|q| force || q.waiting.is_empty());
        if !done {
            return;
        }
        let Some(mut q) = self.stats.remove(&query) else {
            return;
        };
        q.answers.sort_by_key(|a| a.region);
        let body = Body::ClusterShardingStats {
            request: q.request,
            regions: q.answers,
            failed: q.waiting.into_iter().collect(),
        };
        out.send(q.requester, &self.entity_type, body);
    }
}
