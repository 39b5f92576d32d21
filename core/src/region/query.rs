//! Queries a region answers: its own state, entity locations, and relaying the coordinator's
//! cluster-wide answers to the application.

use crate::effect::{Effects, Reply};
use crate::error::CommandError;
use crate::hash::shard_of;
use crate::id::{EntityId, MemberId, RequestId, ShardId};
use crate::message::{Body, RegionStats};
use crate::region::Region;

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
        &self,
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
            Some(&home) => out.send(
                home,
                &self.entity_type,
                Body::LocateEntity { request, entity },
            ),
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
        &self,
        request: RequestId,
        body: Body,
        out: &mut Effects,
    ) {
        match self.registration.coordinator {
            Some(coordinator) => out.send(coordinator, &self.entity_type, body),
            None => out.reply(
                request,
                Err(CommandError::NoCoordinator(self.entity_type.clone())),
            ),
        }
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

    #[allow(clippy::too_many_arguments)]
    pub(super) fn handle_located(
        &self,
        from: MemberId,
        request: RequestId,
        entity: EntityId,
        shard: ShardId,
        hosted: bool,
        alive: bool,
        out: &mut Effects,
    ) {
        let region = hosted.then_some(from);
        out.reply(
            request,
            Ok(Reply::EntityLocation {
                entity,
                shard,
                region,
                alive,
            }),
        );
    }

    pub(super) fn handle_current_regions(
        &self,
        request: RequestId,
        regions: Vec<MemberId>,
        out: &mut Effects,
    ) {
        out.reply(request, Ok(Reply::CurrentRegions { regions }));
    }

    pub(super) fn handle_cluster_stats(
        &self,
        request: RequestId,
        regions: Vec<RegionStats>,
        failed: Vec<MemberId>,
        out: &mut Effects,
    ) {
        out.reply(request, Ok(Reply::ClusterShardingStats { regions, failed }));
    }
}
