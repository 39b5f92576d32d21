//! Queries a region asked of another member for the application (an entity's location, the
//! coordinator's regions or statistics). Each one is answered exactly once: by the member
//! asked, or by a timeout after `shard_region_query_timeout`. Answers nobody is waiting for
//! (late, duplicated, or from a member that was not asked) are rejected, not relayed.

use std::collections::BTreeMap;

use crate::id::{MemberId, RequestId};
use crate::time::Instant;

/// What a pending query asked.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub(super) enum QueryKind {
    /// `LocateEntity`, answered by `EntityLocated`.
    Locate,
    /// `GetCurrentRegions`, answered by `CurrentRegions`.
    CurrentRegions,
    /// `GetClusterShardingStats`, answered by `ClusterShardingStats`.
    Stats,
    /// `GetCoordinatorState`, answered by `CoordinatorState`.
    CoordinatorState,
}

#[derive(Clone, Copy, Debug)]
struct Pending {
    asked: MemberId,
    kind: QueryKind,
    deadline: Instant,
}

/// Queries in flight, by request id.
#[derive(Debug, Default)]
pub(super) struct PendingQueries {
    by_request: BTreeMap<RequestId, Pending>,
}

impl PendingQueries {
    /// Records a query; `false` if one with this request id is already in flight.
    pub(super) fn insert(
        &mut self,
        request: RequestId,
        asked: MemberId,
        kind: QueryKind,
        deadline: Instant,
    ) -> bool {
        if self.by_request.contains_key(&request) {
            return false;
        }
        let pending = Pending {
            asked,
            kind,
            deadline,
        };
        self.by_request.insert(request, pending);
        true
    }

    /// Whether `from`'s answer of `kind` to `request` is awaited; if so it is no longer.
    pub(super) fn take_answer(
        &mut self,
        request: RequestId,
        from: MemberId,
        kind: QueryKind,
    ) -> bool {
        let awaited = self
            .by_request
            .get(&request)
            .is_some_and(|p| p.asked == from && p.kind == kind);
        if awaited {
            self.by_request.remove(&request);
        }
        awaited
    }

    /// The earliest deadline.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.by_request.values().map(|p| p.deadline).min()
    }

    /// Removes the queries due at `now`, returning each with the member that did not answer.
    pub(super) fn take_expired(&mut self, now: Instant) -> Vec<(RequestId, MemberId)> {
        let expired: Vec<(RequestId, MemberId)> = self
            .by_request
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(r, p)| (*r, p.asked))
            .collect();
        for (request, _) in &expired {
            self.by_request.remove(request);
        }
        expired
    }
}
