//! Where a received envelope goes: membership, the application, or an entity type's
//! coordinator or region, after checking the type and its shards.

use super::Node;
use crate::effect::Event;
use crate::id::{EntityType, MemberId};
use crate::lease::{LeaseAnswer, LeaseCall, LeaseName};
use crate::message::{Body, Envelope, Handled, Message, Route};
use crate::reason::DeadLetterReason;
use crate::time::Instant;

impl Node {
    /// Hands a received envelope's message (or one between roles on this node) from `from` to membership, the
    /// application, or the type's coordinator or region; what fits none is counted and
    /// dead-lettered.
    pub(super) fn dispatch(&mut self, now: Instant, from: MemberId, message: Message) {
        let (entity_type, body) = match message {
            Message::Sharding { entity_type, body } => (entity_type, body),
            Message::Cluster(message) => return self.handle_cluster(now, from, message),
            Message::App { payload } => {
                return self.effects.event(Event::AppMessage { from, payload });
            }
        };
        let Some(t) = self.types.get_mut(&entity_type) else {
            self.metrics.unknown_entity_type += 1;
            tracing::debug!(%entity_type, %from, "message for an unknown entity type");
            if let Ok((_, delivery)) = body.into_letter() {
                let reason = DeadLetterReason::UnknownEntityType;
                self.effects.dead_letter(&entity_type, delivery, reason);
            }
            return;
        };
        if !body.fits(t.config.number_of_shards) {
            self.metrics.rejected += 1;
            tracing::warn!(%entity_type, %from, ?body, "shards that do not fit this type's number_of_shards");
            if let Ok((_, delivery)) = body.into_letter() {
                let reason = DeadLetterReason::ShardMismatch;
                self.effects.dead_letter(&entity_type, delivery, reason);
            }
            return;
        }
        let out = &mut self.effects;
        let handled = match body.route() {
            Route::Node => match body {
                Body::SetShardLocations { locations } => {
                    for (shard, node) in locations {
                        t.desired.insert(shard, node);
                        if let Some(c) = &mut t.coordinator {
                            c.set_desired_location(shard, node);
                        }
                    }
                    Handled::Accepted
                }
                other => {
                    // `Body::route` sends only these here; a new one must be handled above.
                    tracing::debug!(%from, ?other, "not a message for the node");
                    Handled::Rejected
                }
            },
            Route::Coordinator => match &mut t.coordinator {
                Some(c) => c.handle_message(now, &self.view, from, body, out),
                None => Handled::Rejected,
            },
            Route::Region | Route::RegionFromCoordinator => {
                t.region.handle_message(now, from, body, out)
            }
        };
        match handled {
            Handled::Accepted => {}
            Handled::Fenced => self.metrics.fenced += 1,
            Handled::Rejected => self.metrics.rejected += 1,
        }
    }

    /// Delivers messages between roles on this node until none is left.
    pub(super) fn deliver_local(&mut self, now: Instant) {
        while let Some(Envelope { from, message, .. }) = self.effects.pop_local() {
            self.dispatch(now, from, message);
        }
    }

    /// The lease store answered `call`: to the region whose shard asked, the coordinator
    /// that asked, or membership (the downing lease).
    pub(super) fn handle_lease_answered(
        &mut self,
        now: Instant,
        call: LeaseCall,
        answer: LeaseAnswer,
    ) {
        let (LeaseCall::Acquire { name, .. } | LeaseCall::Release { name, .. }) = &call;
        if let LeaseName::Coordinator { entity_type } = name {
            let entity_type = entity_type.clone();
            return self.coordinator_lease_answered(now, &entity_type, call, answer);
        }
        let LeaseName::Shard { entity_type, shard } = name else {
            match &mut self.membership {
                Some(m) => {
                    m.handle_lease_answered(now, &call, &answer, &mut self.rng, &mut self.effects);
                }
                None => tracing::warn!(?call, "downing lease answer, but membership is the host's"),
            }
            return;
        };
        let shard = *shard;
        match self.types.get_mut(entity_type) {
            Some(t) => t
                .region
                .handle_lease_answered(now, shard, call, answer, &mut self.effects),
            None => tracing::warn!(
                ?call,
                "lease answer for an entity type this node does not serve"
            ),
        }
    }

    /// The lease store answered a call about `entity_type`'s coordinator lease: to the
    /// coordinator running here; a grant arriving for one that stopped is given back.
    fn coordinator_lease_answered(
        &mut self,
        now: Instant,
        entity_type: &EntityType,
        call: LeaseCall,
        answer: LeaseAnswer,
    ) {
        let Some(t) = self.types.get_mut(entity_type) else {
            return tracing::warn!(?call, "coordinator lease answer for an unknown type");
        };
        match (&mut t.coordinator, call, answer) {
            (Some(c), call, answer) => {
                c.handle_lease_answered(now, &call, answer, &self.view, &mut self.effects);
            }
            (None, LeaseCall::Acquire { name, owner, .. }, LeaseAnswer::Granted(token)) => {
                crate::probe::hit("coordinator: a lease granted after it stopped is released");
                self.effects
                    .lease(LeaseCall::Release { name, owner, token });
            }
            (None, ..) => {}
        }
    }
}
