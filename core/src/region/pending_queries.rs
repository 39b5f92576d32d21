//! Queries a region asked of another member for the application (an entity's location, the
//! coordinator's regions, statistics or state), and start requests waiting for their entity
//! to run. Each one is answered exactly once: by the member asked (for a start, whichever
//! region starts the entity or drops the request), or by a timeout. Answers nobody is waiting
//! for (late, duplicated, or from a member that was not asked) are rejected, not relayed.

use std::collections::BTreeMap;

use crate::id::{EntityId, MemberId, RequestId};
use crate::time::Instant;

/// What a pending query asked.
#[derive(Clone, Debug, Eq, PartialEq)]
pub(super) enum QueryKind {
    /// `LocateEntity`, answered by `EntityLocated`.
    Locate,
    /// `GetCurrentRegions`, answered by `CurrentRegions`.
    CurrentRegions,
    /// `GetClusterShardingStats`, answered by `ClusterShardingStats`.
    Stats,
    /// `GetCoordinatorState`, answered by `CoordinatorState`.
    CoordinatorState,
    /// `StartEntity` of this entity, answered by `StartEntityAck`.
    Start(EntityId),
    /// `Explain` of this entity, answered by `Explanation`.
    Explain(EntityId),
}

/// A query in flight.
#[derive(Clone, Debug)]
pub(super) struct Pending {
    /// The member asked; `None`: any member may answer (a start request).
    pub(super) asked: Option<MemberId>,
    pub(super) kind: QueryKind,
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
        asked: Option<MemberId>,
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
            .is_some_and(|p| p.asked.is_none_or(|a| a == from) && p.kind == kind);
        if awaited {
            self.by_request.remove(&request);
        }
        awaited
    }

    /// If `from`'s explanation answers `request`, the entity explained (no longer awaited).
    pub(super) fn take_explain(&mut self, request: RequestId, from: MemberId) -> Option<EntityId> {
        let pending = self.by_request.get(&request)?;
        let QueryKind::Explain(entity) = &pending.kind else {
            return None;
        };
        let entity = entity.clone();
        pending.asked.is_none_or(|a| a == from).then(|| {
            self.by_request.remove(&request);
            entity
        })
    }

    /// The earliest deadline.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.by_request.values().map(|p| p.deadline).min()
    }

    /// Removes the queries due at `now`.
    pub(super) fn take_expired(&mut self, now: Instant) -> Vec<(RequestId, Pending)> {
        let due: Vec<RequestId> = self
            .by_request
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(r, _)| *r)
            .collect();
        due.into_iter()
            .filter_map(|r| self.by_request.remove(&r).map(|p| (r, p)))
            .collect()
    }
}
