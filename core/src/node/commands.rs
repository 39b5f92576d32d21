//! Commands from the host: graceful shutdown, starting an entity, external shard locations,
//! and the region and cluster queries.

use crate::effect::Reply;
use crate::error::CommandError;
use crate::id::RequestId;
use crate::input::Command;
use crate::members::MemberStatus;
use crate::message::Body;
use crate::node::Node;
use crate::time::Instant;

impl Node {
    pub(super) fn handle_command(&mut self, now: Instant, request: RequestId, command: Command) {
        let entity_type = match &command {
            Command::Leave => return self.handle_leave(now, request),
            Command::LeaveMember { member } if *member == self.me => {
                return self.handle_leave(now, request);
            }
            &Command::LeaveMember { member } => {
                return self.handle_member_command(now, request, member, MemberStatus::Leaving);
            }
            &Command::Down { member } => {
                return self.handle_member_command(now, request, member, MemberStatus::Down);
            }
            Command::GracefulShutdown { entity_type: None } => {
                for t in self.types.values_mut() {
                    t.region.handle_graceful_shutdown(&mut self.effects);
                }
                return self.effects.reply(request, Ok(Reply::Accepted));
            }
            Command::StartEntity { entity_type, .. }
            | Command::GracefulShutdown {
                entity_type: Some(entity_type),
            }
            | Command::SetShardLocation { entity_type, .. }
            | Command::SetActiveEntityLimit { entity_type, .. }
            | Command::GetShardRegionState { entity_type }
            | Command::GetEntityLocation { entity_type, .. }
            | Command::GetCurrentRegions { entity_type }
            | Command::GetClusterShardingStats { entity_type }
            | Command::GetCoordinatorState { entity_type }
            | Command::Explain { entity_type, .. } => entity_type.clone(),
        };
        let Some(t) = self.types.get_mut(&entity_type) else {
            return self
                .effects
                .reply(request, Err(CommandError::UnknownEntityType(entity_type)));
        };
        let out = &mut self.effects;
        match command {
            Command::StartEntity { entity, .. } => {
                t.region.handle_start_command(now, request, entity, out);
            }
            Command::GracefulShutdown { .. } => {
                t.region.handle_graceful_shutdown(out);
                out.reply(request, Ok(Reply::Accepted));
            }
            Command::SetShardLocation { shard, node, .. } => {
                if shard.0 >= t.config.number_of_shards {
                    return out.reply(
                        request,
                        Err(CommandError::ShardOutOfRange { entity_type, shard }),
                    );
                }
                // Every node keeps the desired locations, so any future coordinator knows them.
                let body = Body::SetShardLocations {
                    locations: vec![(shard, node)],
                };
                for member in self.view.members() {
                    out.send(member.id, &entity_type, body.clone());
                }
                if self.view.member(self.me).is_none() {
                    out.send(self.me, &entity_type, body);
                }
                out.reply(request, Ok(Reply::Accepted));
            }
            Command::SetActiveEntityLimit { limit, .. } => {
                t.region.handle_set_entity_limit(now, request, limit, out);
            }
            Command::GetShardRegionState { .. } => t.region.handle_state_query(request, out),
            Command::GetEntityLocation { entity, .. } => {
                t.region.handle_location_query(now, request, entity, out)
            }
            Command::GetCurrentRegions { .. } => {
                let body = Body::GetCurrentRegions { request };
                t.region.handle_coordinator_query(now, request, body, out);
            }
            Command::GetClusterShardingStats { .. } => {
                let body = Body::GetClusterShardingStats { request };
                t.region.handle_coordinator_query(now, request, body, out);
            }
            Command::GetCoordinatorState { .. } => {
                let body = Body::GetCoordinatorState { request };
                t.region.handle_coordinator_query(now, request, body, out);
            }
            Command::Explain { entity, .. } => {
                t.region.handle_explain_query(now, request, entity, out);
            }
            Command::Leave | Command::LeaveMember { .. } | Command::Down { .. } => {
                unreachable!("answered above")
            }
        }
    }
}
