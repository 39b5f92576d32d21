//! The queue roles write their effects into: one FIFO across the roles of a node, with
//! envelopes to the node itself kept apart and delivered after the current handler.

use std::collections::VecDeque;

use super::{Effect, EntityEffect, Event, Reply, Transmit};
use crate::error::CommandError;
use crate::id::{Address, EntityId, EntityType, MemberId, RequestId};
use crate::lease::LeaseCall;
use crate::message::ClusterMessage;
use crate::message::{Body, Envelope, Message, Payload};
use crate::message::{Delivery, Letter, StartOutcome};
use crate::reason::DeadLetterReason;
use crate::remember::StoreRequest;

/// The FIFO effect queue owned by the `Node`; roles write into it through `&mut Effects`.
/// Envelopes addressed to this member itself are kept on a local queue that the node delivers
/// after the current handler returns, so roles on one node talk exactly as remote ones do.
#[derive(Debug)]
pub(crate) struct Effects {
    me: MemberId,
    queue: VecDeque<Effect>,
    local: VecDeque<Envelope>,
    /// Letters dead-lettered since the node last took them, for its regions' decision logs
    /// (`Command::Explain`): every dead letter passes through here, whichever role drops it.
    dead_lettered: Vec<(EntityType, EntityId, DeadLetterReason)>,
}

impl Effects {
    pub(crate) fn new(me: MemberId) -> Self {
        Self {
            me,
            queue: VecDeque::new(),
            local: VecDeque::new(),
            dead_lettered: Vec::new(),
        }
    }

    /// The letters dead-lettered since the last call.
    pub(crate) fn take_dead_lettered(
        &mut self,
    ) -> impl Iterator<Item = (EntityType, EntityId, DeadLetterReason)> + '_ {
        self.dead_lettered.drain(..)
    }

    /// Sends `body` of `entity_type` to `to` (locally if `to` is this member).
    pub(crate) fn send(&mut self, to: MemberId, entity_type: &EntityType, body: Body) {
        let message = Message::Sharding {
            entity_type: entity_type.clone(),
            body,
        };
        if to == self.me {
            let envelope = self.envelope(to, message);
            self.local.push_back(envelope);
        } else {
            self.transmit(None, to, message);
        }
    }

    /// Sends a membership message to `to` (never this member itself).
    pub(crate) fn send_cluster(&mut self, to: MemberId, message: ClusterMessage) {
        self.transmit(None, to, Message::Cluster(message));
    }

    /// Sends a membership message to `to` at `address`: for a member no view names yet (a
    /// joiner, a seed).
    pub(crate) fn send_cluster_at(
        &mut self,
        to: MemberId,
        address: Address,
        message: ClusterMessage,
    ) {
        self.transmit(Some(address), to, Message::Cluster(message));
    }

    /// Sends an application message to another member.
    pub(crate) fn send_app(&mut self, to: MemberId, payload: Payload) {
        self.transmit(None, to, Message::App { payload });
    }

    /// Queues `message` for `to`; the node fills in the link number and, when `address` is
    /// `None`, the address its book knows.
    fn transmit(&mut self, address: Option<Address>, to: MemberId, message: Message) {
        let envelope = Box::new(self.envelope(to, message));
        self.push(Effect::Send(Transmit { address, envelope }));
    }

    /// An envelope from this member, to be numbered when it leaves.
    fn envelope(&self, to: MemberId, message: Message) -> Envelope {
        Envelope {
            from: self.me,
            to,
            seq: 0,
            message,
        }
    }

    pub(crate) fn pop_local(&mut self) -> Option<Envelope> {
        self.local.pop_front()
    }

    pub(crate) fn push(&mut self, effect: Effect) {
        self.queue.push_back(effect);
    }

    /// How many effects are queued.
    pub(crate) fn queued(&self) -> usize {
        self.queue.len()
    }

    /// The members the queued envelopes go to, in order.
    pub(crate) fn receivers(&self) -> impl Iterator<Item = MemberId> + '_ {
        self.queue.iter().filter_map(|effect| match effect {
            Effect::Send(transmit) => Some(transmit.envelope.to),
            _ => None,
        })
    }

    pub(crate) fn pop(&mut self) -> Option<Effect> {
        let effect = self.queue.pop_front();
        if effect.is_none() {
            // Drained: the next call's effects go to the front of the buffer again (a ring
            // buffer goes round all its slots otherwise, each a cache line to fetch; across
            // a thousand simulated nodes, lines long evicted).
            self.queue.clear();
        }
        effect
    }

    pub(crate) fn event(&mut self, event: Event) {
        self.push(Effect::Event(event));
    }

    pub(crate) fn store(&mut self, request: StoreRequest) {
        self.push(Effect::Store(request));
    }

    pub(crate) fn lease(&mut self, call: LeaseCall) {
        self.push(Effect::Lease(call));
    }

    pub(crate) fn entity(&mut self, effect: EntityEffect) {
        self.push(Effect::Entity(effect));
    }

    /// Reports an application message for `to` that is dropped for `reason`.
    pub(crate) fn app_dead_letter(
        &mut self,
        to: MemberId,
        payload: Payload,
        reason: DeadLetterReason,
    ) {
        tracing::debug!(%to, ?reason, "application message dropped");
        self.event(Event::AppDeadLetter {
            to,
            payload,
            reason,
        });
    }

    /// Reports a letter to `entity` that is dropped for `reason`; a start request's requester
    /// hears it too (wherever it is), so its command is answered at once.
    pub(crate) fn dead_letter(
        &mut self,
        entity_type: &EntityType,
        (entity, letter): Delivery,
        reason: DeadLetterReason,
    ) {
        tracing::debug!(%entity_type, %entity, ?reason, "dead letter");
        if let Letter::Start(Some(ack)) = letter {
            let outcome = StartOutcome::Dropped(reason);
            let answer = Body::StartEntityAck {
                request: ack.request,
                entity: entity.clone(),
                outcome,
            };
            self.send(ack.requester, entity_type, answer);
        }
        (self.dead_lettered).push((entity_type.clone(), entity.clone(), reason));
        self.event(Event::DeadLetter {
            entity_type: entity_type.clone(),
            entity,
            payload: letter.into_payload(),
            reason,
        });
    }

    pub(crate) fn reply(&mut self, request: RequestId, result: Result<Reply, CommandError>) {
        self.event(Event::Reply { request, result });
    }
}

#[cfg(test)]
impl Effects {
    /// Everything queued: effects for the host, then envelopes for this member itself.
    pub(crate) fn drain(&mut self) -> (Vec<Effect>, Vec<Envelope>) {
        (
            self.queue.drain(..).collect(),
            self.local.drain(..).collect(),
        )
    }

    /// The effects for the host, asserting that nothing was sent to this member itself.
    pub(crate) fn take(&mut self) -> Vec<Effect> {
        let (effects, local) = self.drain();
        assert!(local.is_empty(), "unexpected local envelopes: {local:?}");
        effects
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receivers_are_the_queued_envelopes_members_in_order() {
        let (me, a, b) = (
            MemberId::new(1, 1),
            MemberId::new(2, 1),
            MemberId::new(3, 1),
        );
        let ty = EntityType::new("counter");
        let mut out = Effects::new(me);
        out.send(b, &ty, Body::RegisterAck);
        out.event(Event::CoordinatorStarted {
            entity_type: ty.clone(),
        });
        out.send(me, &ty, Body::RegisterAck); // to itself: handled locally, never sent
        out.send(a, &ty, Body::RegisterAck);
        assert_eq!(out.queued(), 3);
        assert_eq!(out.receivers().collect::<Vec<_>>(), [b, a]);
    }
}
