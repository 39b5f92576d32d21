//! The host's [`Io`]: executes the core's effects without ever blocking, and nothing else.
//! Sends go into the transport's bounded queues, entity effects into the entity runtime, store
//! requests and lease calls to their own tasks. What a full queue refuses, and every event, is collected in a
//! [`Feedback`] that the host handles after the driver call (a refusal becomes a dead letter
//! with its reason; replies and answers complete the host's request tables).

use shoal_core::lease::{LeaseAnswer, LeaseCall};
use shoal_core::{EntityEffect, Event, Input, Io, StoreCompletion, StoreRequest, Transmit};

use crate::entity::runtime::EntityRuntime;
use crate::metric_names;
use crate::store::{LeaseLink, StoreLink};
use crate::transport::Transport;

/// What the effects of a driver call left for the host.
#[derive(Debug, Default)]
pub(crate) struct Feedback {
    /// Inputs the core must hear after the call.
    pub(crate) inputs: Vec<Input>,
    /// The core's events, in the order it emitted them.
    pub(crate) events: Vec<Event>,
}

impl Feedback {
    pub(crate) fn is_empty(&self) -> bool {
        self.inputs.is_empty() && self.events.is_empty()
    }
}

/// Everything the driver's effects act on.
pub(crate) struct TokioIo {
    pub(crate) transport: Transport,
    pub(crate) entities: EntityRuntime,
    /// The remember store, if the node has one.
    pub(crate) store: Option<StoreLink>,
    /// The lease store, if the node has one.
    pub(crate) leases: Option<LeaseLink>,
    pub(crate) feedback: Feedback,
}

impl Io for TokioIo {
    fn send(&mut self, transmit: Transmit) {
        let Transmit { address, envelope } = transmit;
        // Membership carries every member's address, but a member can reach this one first
        // (a node that just joined through another forwards to an entity here at once): it is
        // answered at the address it advertised when it connected.
        let address = address.or_else(|| {
            let heard = self.transport.heard_from(envelope.to);
            if let Some(address) = &heard {
                tracing::debug!(to = %envelope.to, %address, "answered where it connected from");
            }
            heard
        });
        let Some(address) = address else {
            metrics::counter!(metric_names::ENVELOPES_UNADDRESSED_TOTAL).increment(1);
            tracing::error!(to = %envelope.to, "no address for a member; envelope dropped");
            return;
        };
        if let Err(envelope) = self.transport.send(&address, envelope) {
            metrics::counter!(metric_names::OUTBOUND_QUEUE_FULL_TOTAL).increment(1);
            self.feedback
                .inputs
                .push(Input::OutboundQueueFull { envelope });
        }
    }

    fn entity(&mut self, effect: EntityEffect) {
        self.entities
            .handle_effect(effect, &mut self.feedback.inputs);
    }

    fn store(&mut self, request: StoreRequest) {
        let Some(link) = &self.store else {
            // The builder refuses remembering types without a store; answered anyway, so the
            // core reports it rather than waiting forever.
            let completion = StoreCompletion::Failed("no remember store on this node".into());
            self.feedback.inputs.push(Input::StoreCompleted {
                request,
                completion,
            });
            return;
        };
        link.spawn(request);
    }

    fn lease(&mut self, call: LeaseCall) {
        let Some(link) = &self.leases else {
            // The builder refuses types with shard leases without a lease store; answered
            // anyway, so the core retries and reports it rather than waiting forever.
            let answer = LeaseAnswer::Failed("no lease store on this node".into());
            self.feedback
                .inputs
                .push(Input::LeaseAnswered { call, answer });
            return;
        };
        link.spawn(call);
    }

    fn emit(&mut self, event: Event) {
        self.feedback.events.push(event);
    }
}
