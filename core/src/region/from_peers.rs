//! How a region handles messages from other regions (relays of handoff acks and exits,
//! entity lookups) and the answers to its queries.

use crate::effect::{Effects, Reply};
use crate::id::MemberId;
use crate::message::{Body, Handled};
use crate::region::Region;
use crate::region::pending_queries::QueryKind;
use crate::time::Instant;

impl Region {
    /// A message from another region, or an answer to one of this region's queries.
    pub(super) fn handle_from_peer(
        &mut self,
        now: Instant,
        from: MemberId,
        body: Body,
        out: &mut Effects,
    ) -> Handled {
        match body {
            Body::RelayHandOffAck {
                shard,
                coordinator,
                round,
            } => {
                // Everything `from` forwarded before this ack has been routed by now (FIFO).
                let ack = Body::BeginHandOffAck {
                    shard,
                    region: from,
                    round,
                };
                out.send(coordinator, &self.entity_type, ack);
            }
            Body::RelayExit { coordinator } => {
                // Everything `from` forwarded before it exited has been routed by now (FIFO).
                let exited = Body::RegionExited { region: from };
                out.send(coordinator, &self.entity_type, exited);
            }
            Body::LocateEntity { request, entity } => {
                self.handle_locate(from, request, entity, out)
            }
            Body::EntityLocated {
                request,
                entity,
                shard,
                hosted,
                alive,
            } => {
                let region = hosted.then_some(from);
                let reply = Reply::EntityLocation {
                    entity,
                    shard,
                    region,
                    alive,
                };
                return self.handle_answer(from, request, QueryKind::Locate, reply, out);
            }
            Body::CurrentRegions { request, regions } => {
                let reply = Reply::CurrentRegions { regions };
                return self.handle_answer(from, request, QueryKind::CurrentRegions, reply, out);
            }
            Body::ClusterShardingStats {
                request,
                regions,
                failed,
            } => {
                let reply = Reply::ClusterShardingStats { regions, failed };
                return self.handle_answer(from, request, QueryKind::Stats, reply, out);
            }
            Body::StartEntityAck {
                request,
                entity,
                outcome,
            } => return self.handle_start_ack(from, request, entity, outcome, out),
            Body::Explanation {
                request,
                records,
                forgotten_before,
            } => {
                let part = (records, forgotten_before);
                return self.handle_explanation(now, from, request, part, out);
            }
            Body::CoordinatorState { request, state } => {
                let reply = Reply::CoordinatorState(state);
                let kind = QueryKind::CoordinatorState;
                return self.handle_answer(from, request, kind, reply, out);
            }
            other => {
                tracing::debug!(%from, ?other, "not a message between regions");
                return Handled::Rejected;
            }
        }
        Handled::Accepted
    }
}
