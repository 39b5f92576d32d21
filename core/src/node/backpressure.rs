//! What a host's bounded queues refuse: an envelope its outbound queue to a peer had no room
//! for (`Input::OutboundQueueFull`), a message an entity's mailbox had no room for
//! (`Input::MailboxFull`). Either way the application hears of it as a dead letter, so a
//! message is never dropped silently.

use crate::id::{EntityId, EntityType};
use crate::message::Letter;
use crate::message::{Envelope, Message, Payload};
use crate::node::Node;
use crate::reason::DeadLetterReason;

impl Node {
    /// The host dropped `envelope` before it left this node.
    pub(super) fn handle_outbound_queue_full(&mut self, envelope: Envelope) {
        if envelope.from != self.me {
            self.metrics.rejected += 1;
            tracing::warn!(from = %envelope.from, me = %self.me, "a refused envelope this node did not send");
            return;
        }
        let reason = DeadLetterReason::OutboundQueueFull;
        let to = envelope.to;
        match envelope.message {
            Message::Sharding { entity_type, body } => match body.into_letter() {
                Ok((_, delivery)) => self.effects.dead_letter(&entity_type, delivery, reason),
                // Hosts should not refuse these; if one does, the protocol's timers resend
                // what matters, as after a lost connection.
                Err(body) => {
                    tracing::warn!(%to, ?body, "a full outbound queue dropped a protocol message")
                }
            },
            Message::App { payload } => self.effects.app_dead_letter(to, payload, reason),
            Message::Cluster(message) => {
                tracing::warn!(%to, ?message, "a full outbound queue dropped a membership message");
            }
        }
    }

    /// The host could not hand `payload` to `entity`: its mailbox was full.
    pub(super) fn handle_mailbox_full(
        &mut self,
        entity_type: EntityType,
        entity: EntityId,
        payload: Payload,
    ) {
        let delivery = (entity, Letter::Message(payload));
        let reason = DeadLetterReason::MailboxFull;
        self.effects.dead_letter(&entity_type, delivery, reason);
    }
}
