//! Queries a region answers: its own state, entity locations, and relaying the coordinator's
//! cluster-wide answers to the application.

use crate::effect::{Effects, Reply};
use crate::error::CommandError;
use crate::hash::shard_of;
use crate::id::{EntityId, MemberId, RequestId};
use crate::message::Body;
use crate::message::Handled;
use crate::message::{Letter, StartAck, StartOutcome};
use crate::region::pending_queries::QueryKind;
use crate::region::{Lifecycle, Region};
use crate::time::Instant;

impl Region {
    /// Hosted shards and their live entities.
    pub(crate) fn handle_state_query(&self, request: RequestId, out: &mut Effects) {
        let shards = self
            .shards
            .iter()
            .map(|(&id, s)| (id, s.entity_ids()))
            .collect();
        out.reply(request, Ok(Reply::ShardRegionState { shards }));
    }

    /// Where `entity` lives: answered here if its shard is hosted or its home unknown, else
    /// asked of the home region (whose answer comes back as `EntityLocated`).
    pub(crate) fn handle_location_query(
        &mut self,
        now: Instant,
        request: RequestId,
        entity: EntityId,
        out: &mut Effects,
    ) {
        let shard = shard_of(&entity, self.number_of_shards);
        if let Some(hosted) = self.shards.get(&shard) {
            let alive = hosted.is_alive(&entity);
            let reply = Reply::EntityLocation {
                entity,
                shard,
                region: Some(self.me),
                alive,
            };
            return out.reply(request, Ok(reply));
        }
        match self.homes.get(&shard) {
            Some(&home) => {
                let body = Body::LocateEntity { request, entity };
                self.ask(now, request, home, QueryKind::Locate, body, out);
            }
            None => {
                let reply = Reply::EntityLocation {
                    entity,
                    shard,
                    region: None,
                    alive: false,
                };
                out.reply(request, Ok(reply));
            }
        }
    }

    /// Asks the coordinator a cluster-wide question, or fails at once if none is known.
    pub(crate) fn handle_coordinator_query(
        &mut self,
        now: Instant,
        request: RequestId,
        body: Body,
        out: &mut Effects,
    ) {
        let kind = match body {
            Body::GetClusterShardingStats { .. } => QueryKind::Stats,
            Body::GetCoordinatorState { .. } => QueryKind::CoordinatorState,
            _ => QueryKind::CurrentRegions,
        };
        match self.registration.coordinator {
            Some(coordinator) => self.ask(now, request, coordinator, kind, body, out),
            None => out.reply(
                request,
                Err(CommandError::NoCoordinator(self.entity_type.clone())),
            ),
        }
    }

    /// Sends a query to `member` and waits for its answer, at most the query timeout.
    pub(super) fn ask(
        &mut self,
        now: Instant,
        request: RequestId,
        member: MemberId,
        kind: QueryKind,
        body: Body,
        out: &mut Effects,
    ) {
        // The coordinator itself gathers statistics from every region for up to the timeout,
        // so its answers get twice as long; a location comes straight from one region.
        let timeout = self.settings.shard_region_query_timeout;
        let deadline = now
            + match kind {
                QueryKind::Locate | QueryKind::Start(_) | QueryKind::Explain(_) => timeout,
                QueryKind::CurrentRegions | QueryKind::Stats | QueryKind::CoordinatorState => {
                    timeout * 2
                }
            };
        if !self.queries.insert(request, Some(member), kind, deadline) {
            return out.reply(request, Err(CommandError::RequestInFlight(request)));
        }
        out.send(member, &self.entity_type, body);
    }

    /// Answers the queries nobody answered in time.
    pub(super) fn expire_queries(&mut self, now: Instant, out: &mut Effects) {
        for (request, pending) in self.queries.take_expired(now) {
            let error = match (pending.kind, pending.asked) {
                (QueryKind::Start(entity), _) => CommandError::StartTimedOut { entity },
                (_, Some(asked)) => CommandError::QueryTimedOut { asked },
                (kind, None) => unreachable!("{kind:?} asks one member"),
            };
            out.reply(request, Err(error));
        }
    }

    /// `StartEntity`: starts the entity where its shard lives and answers once it runs (or
    /// once the request was dropped, or after it could have been served at the latest: a
    /// handoff, a passivation and a query's round trip).
    pub(crate) fn handle_start_command(
        &mut self,
        now: Instant,
        request: RequestId,
        entity: EntityId,
        out: &mut Effects,
    ) {
        if self.lifecycle == Lifecycle::Terminated {
            let error = CommandError::RegionStopped(self.entity_type.clone());
            return out.reply(request, Err(error));
        }
        let s = &self.settings;
        let deadline =
            now + s.handoff_timeout + s.passivation_stop_timeout + s.shard_region_query_timeout;
        let kind = QueryKind::Start(entity.clone());
        if !self.queries.insert(request, None, kind, deadline) {
            return out.reply(request, Err(CommandError::RequestInFlight(request)));
        }
        let ack = StartAck {
            requester: self.me,
            request,
        };
        self.handle_tell(now, entity, Letter::Start(Some(ack)), out);
    }

    /// A region started (or dropped) an entity this region asked for.
    pub(super) fn handle_start_ack(
        &mut self,
        from: MemberId,
        request: RequestId,
        entity: EntityId,
        outcome: StartOutcome,
        out: &mut Effects,
    ) -> Handled {
        let kind = QueryKind::Start(entity.clone());
        if !self.queries.take_answer(request, from, kind) {
            tracing::debug!(%from, %request, "a start acknowledgement nobody waits for");
            return Handled::Rejected;
        }
        let result = match outcome {
            StartOutcome::Started => Ok(Reply::EntityStarted {
                shard: shard_of(&entity, self.number_of_shards),
                entity,
                region: from,
            }),
            StartOutcome::Dropped(reason) => Err(CommandError::NotStarted { entity, reason }),
        };
        out.reply(request, result);
        Handled::Accepted
    }

    /// Relays `from`'s answer to the application if this region is waiting for it.
    pub(super) fn handle_answer(
        &mut self,
        from: MemberId,
        request: RequestId,
        kind: QueryKind,
        reply: Reply,
        out: &mut Effects,
    ) -> Handled {
        if !self.queries.take_answer(request, from, kind) {
            tracing::debug!(%from, %request, "an answer nobody waits for (late or duplicated)");
            return Handled::Rejected;
        }
        out.reply(request, Ok(reply));
        Handled::Accepted
    }

    pub(super) fn handle_locate(
        &self,
        from: MemberId,
        request: RequestId,
        entity: EntityId,
        out: &mut Effects,
    ) {
        let shard = shard_of(&entity, self.number_of_shards);
        let hosted = self.shards.get(&shard);
        let alive = hosted.is_some_and(|s| s.is_alive(&entity));
        let located = Body::EntityLocated {
            request,
            entity,
            shard,
            hosted: hosted.is_some(),
            alive,
        };
        out.send(from, &self.entity_type, located);
    }
}
