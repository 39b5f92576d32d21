//! `Command::Explain` at a region: the decisions it holds about an entity's letters (the dead
//! letters it reported), with those the type's coordinator holds about the entity's shard.

use std::time::Duration;

use crate::effect::{Effects, Reply};
use crate::explain::{DecisionRecord, Explanation};
use crate::hash::shard_of;
use crate::id::{EntityId, MemberId, RequestId};
use crate::message::{Body, Handled};
use crate::region::Region;
use crate::region::pending_queries::QueryKind;
use crate::time::Instant;

/// What the coordinator answered: who, its records, and its log's reach if full.
type CoordinatorPart = (MemberId, Vec<DecisionRecord>, Option<Duration>);

impl Region {
    /// Explains `entity`: the coordinator is asked for its part; without one known, this
    /// region's part is the answer.
    pub(crate) fn handle_explain_query(
        &mut self,
        now: Instant,
        request: RequestId,
        entity: EntityId,
        out: &mut Effects,
    ) {
        match self.registration.coordinator {
            Some(coordinator) => {
                let shard = shard_of(&entity, self.number_of_shards);
                let body = Body::Explain {
                    request,
                    entity: entity.clone(),
                    shard,
                };
                let kind = QueryKind::Explain(entity);
                self.ask(now, request, coordinator, kind, body, out);
            }
            None => {
                let explanation = self.explanation(now, entity, None);
                out.reply(request, Ok(Reply::Explanation(Box::new(explanation))));
            }
        }
    }

    /// The coordinator's part of an explanation this region asked for.
    pub(super) fn handle_explanation(
        &mut self,
        now: Instant,
        from: MemberId,
        request: RequestId,
        (records, forgotten): (Vec<DecisionRecord>, Option<Duration>),
        out: &mut Effects,
    ) -> Handled {
        let Some(entity) = self.queries.take_explain(request, from) else {
            tracing::debug!(%from, %request, "an explanation nobody waits for");
            return Handled::Rejected;
        };
        let explanation = self.explanation(now, entity, Some((from, records, forgotten)));
        out.reply(request, Ok(Reply::Explanation(Box::new(explanation))));
        Handled::Accepted
    }

    /// This region's decisions about `entity`, with the coordinator's, oldest first (by age:
    /// each member's clock is its own).
    fn explanation(
        &self,
        now: Instant,
        entity: EntityId,
        coordinator: Option<CoordinatorPart>,
    ) -> Explanation {
        let shard = shard_of(&entity, self.number_of_shards);
        let (mut records, forgotten) = self.decisions.about(now, self.me, shard, &entity);
        let mut forgotten_before: Vec<(MemberId, Duration)> =
            forgotten.map(|f| (self.me, f)).into_iter().collect();
        let by = coordinator.as_ref().map(|(c, ..)| *c);
        if let Some((c, theirs, forgotten)) = coordinator {
            records.extend(theirs.into_iter().filter(|r| r.by == c));
            forgotten_before.extend(forgotten.map(|f| (c, f)));
        }
        records.sort_by_key(|r| std::cmp::Reverse(r.ago));
        Explanation {
            entity,
            shard,
            coordinator: by,
            records,
            forgotten_before,
        }
    }
}
