//! Application messages between members (`Input::SendApp` → `Event::AppMessage`): what an
//! `ask`'s reply travels as. They share the numbered FIFO link with the sharding protocol, so
//! a copy the transport repeats is dropped and one for another incarnation never delivered.

use crate::effect::Event;
use crate::id::MemberId;
use crate::message::Payload;
use crate::node::Node;
use crate::reason::DeadLetterReason;

impl Node {
    /// Sends `payload` to `to`, or says why it cannot go.
    pub(super) fn handle_send_app(&mut self, to: MemberId, payload: Payload) {
        let reason = if payload.0.len() > self.config.settings.max_payload_size {
            DeadLetterReason::PayloadTooLarge
        } else if self.is_gone(to) {
            DeadLetterReason::MemberGone
        } else if to == self.me {
            let from = self.me;
            return self.effects.event(Event::AppMessage { from, payload });
        } else {
            return self.effects.send_app(to, payload);
        };
        self.effects.app_dead_letter(to, payload, reason);
    }

    /// Whether `member` is known to be gone: removed, or succeeded by a newer incarnation of
    /// its node. A member this node has not heard of yet is not gone (views lag).
    fn is_gone(&self, member: MemberId) -> bool {
        self.known_removed.contains(&member) || self.view.succeeded(member)
    }
}
