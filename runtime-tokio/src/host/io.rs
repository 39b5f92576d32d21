//! The host's [`Io`]: executes the core's effects without ever blocking. Sends go into the
//! transport's bounded queues, entity effects into the entity runtime; what a full queue
//! refuses is collected as feedback inputs, which the host loop feeds back to the core after
//! the driver call (so it becomes a dead letter with its reason). Replies and application
//! messages complete the request tables; everything else goes to the event stream.

use std::sync::Arc;
use std::time::Duration;

use shoal_core::{
    DeadLetterReason, EntityEffect, Event, Input, Io, MemberId, Payload, Reply, RequestId,
    StoreCompletion, StoreRequest, Transmit,
};
use tokio::sync::{broadcast, mpsc, oneshot};

use super::requests::Requests;
use crate::entity::letter::{AppFrame, AskFailure, Letter};
use crate::entity::runtime::EntityRuntime;
use crate::error::{AskError, QueryError};
use crate::event::NodeEvent;
use crate::store::RememberStore;
use crate::transport::Transport;

/// The node's remember store and where its answers go back to the host loop.
pub(crate) struct StoreLink {
    pub(crate) store: Arc<dyn RememberStore>,
    /// A request not answered within this fails (and the core retries it).
    pub(crate) timeout: Duration,
    pub(crate) done: mpsc::UnboundedSender<Input>,
}

/// Waits for an ask's reply.
pub(crate) type AskAnswer = oneshot::Sender<Result<Vec<u8>, AskError>>;
/// Waits for a command's reply.
pub(crate) type CommandAnswer = oneshot::Sender<Result<Reply, QueryError>>;

/// Everything the driver's effects act on.
pub(crate) struct TokioIo {
    pub(crate) me: MemberId,
    pub(crate) transport: Transport,
    pub(crate) entities: EntityRuntime,
    pub(crate) asks: Requests<AskAnswer>,
    pub(crate) commands: Requests<CommandAnswer>,
    pub(crate) events: broadcast::Sender<NodeEvent>,
    /// Inputs the core must hear after the current driver call.
    pub(crate) feedback: Vec<Input>,
    /// The membership view changed during the call.
    pub(crate) membership_changed: bool,
    /// This member is out of the cluster (`Event::LeftCluster`).
    pub(crate) left: bool,
    /// The remember store, if the node has one.
    pub(crate) store: Option<StoreLink>,
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
            metrics::counter!("shoal_envelopes_unaddressed_total").increment(1);
            tracing::error!(to = %envelope.to, "no address for a member; envelope dropped");
            return;
        };
        if let Err(envelope) = self.transport.send(&address, envelope) {
            metrics::counter!("shoal_outbound_queue_full_total").increment(1);
            self.feedback.push(Input::OutboundQueueFull { envelope });
        }
    }

    fn entity(&mut self, effect: EntityEffect) {
        self.entities.handle_effect(effect, &mut self.feedback);
    }

    fn store(&mut self, request: StoreRequest) {
        let Some(link) = &self.store else {
            // The builder refuses remembering types without a store; answered anyway, so the
            // core reports it rather than waiting forever.
            let completion = StoreCompletion::Failed("no remember store on this node".into());
            self.feedback.push(Input::StoreCompleted {
                request,
                completion,
            });
            return;
        };
        metrics::counter!("shoal_remember_store_requests_total").increment(1);
        // One task per request: the core keeps at most one in flight per shard, so requests
        // of different shards overlap and a slow one holds up only its own shard.
        let (store, timeout, done) = (link.store.clone(), link.timeout, link.done.clone());
        tokio::spawn(async move {
            let completion = crate::store::execute(&*store, &request, timeout).await;
            if let StoreCompletion::Failed(reason) = &completion {
                metrics::counter!("shoal_remember_store_failures_total").increment(1);
                tracing::warn!(?request, %reason, "remember store request failed");
            }
            // The host is gone only when the node stopped; nobody waits for the answer then.
            let _ = done.send(Input::StoreCompleted {
                request,
                completion,
            });
        });
    }

    fn emit(&mut self, event: Event) {
        match event {
            Event::Reply { request, result } => {
                if let Some(answer) = self.commands.complete(request) {
                    let _ = answer.send(result.map_err(QueryError::from));
                }
            }
            Event::AppMessage { from, payload } => self.handle_app_message(from, &payload),
            Event::AppDeadLetter { to, reason, .. } => {
                // An ask's answer that could not go back: the asker times out.
                metrics::counter!("shoal_dead_letters_total", "reason" => reason_label(reason))
                    .increment(1);
                tracing::debug!(%to, ?reason, "an ask's answer was not sent");
            }
            Event::DeadLetter {
                ref payload,
                reason,
                ..
            } => {
                metrics::counter!("shoal_dead_letters_total", "reason" => reason_label(reason))
                    .increment(1);
                let ask = payload
                    .as_ref()
                    .and_then(|payload| Letter::from_payload(payload).ok())
                    .and_then(|letter| letter.ask);
                if let Some(ask) = ask {
                    self.answer(ask.asker, ask.id, Err(AskFailure::DeadLetter(reason)));
                }
                self.publish(NodeEvent::Sharding(event));
            }
            Event::MembershipChanged => {
                self.membership_changed = true;
                self.publish(NodeEvent::Sharding(Event::MembershipChanged));
            }
            Event::LeftCluster { downed } => {
                self.left = true;
                tracing::info!(me = %self.me, downed, "this member is out of the cluster");
                self.publish(NodeEvent::Sharding(Event::LeftCluster { downed }));
            }
            other => {
                count_sharding_event(&other);
                self.publish(NodeEvent::Sharding(other));
            }
        }
    }
}

impl TokioIo {
    /// Answers ask `id` of `asker`: at once if this member asked, else through the core, as an
    /// application message to the asking incarnation.
    pub(crate) fn answer(&mut self, asker: MemberId, id: u64, answer: Result<Vec<u8>, AskFailure>) {
        if asker == self.me {
            if let Some(waiting) = self.asks.complete(RequestId(id)) {
                let _ = waiting.send(answer.map_err(AskError::from));
            }
            return;
        }
        let frame = match answer {
            Ok(reply) => AppFrame::Reply { id, reply },
            Err(failure) => AppFrame::Failed { id, failure },
        };
        self.feedback.push(Input::SendApp {
            to: asker,
            payload: frame.to_payload(),
        });
    }

    fn handle_app_message(&mut self, from: MemberId, payload: &Payload) {
        let (id, answer) = match AppFrame::from_payload(payload) {
            Ok(AppFrame::Reply { id, reply }) => (id, Ok(reply)),
            Ok(AppFrame::Failed { id, failure }) => (id, Err(AskError::from(failure))),
            Err(_) => {
                metrics::counter!("shoal_app_messages_malformed_total").increment(1);
                tracing::warn!(%from, "an application message this runtime does not know");
                return;
            }
        };
        if let Some(waiting) = self.asks.complete(RequestId(id)) {
            let _ = waiting.send(answer);
        }
    }

    fn publish(&self, event: NodeEvent) {
        // No subscriber is fine: events are for those who listen.
        let _ = self.events.send(event);
    }

    /// Fails every ask and command whose deadline has passed.
    pub(crate) fn expire(&mut self, now: shoal_core::Instant) {
        for (_, waiting) in self.asks.expire(now) {
            let _ = waiting.send(Err(AskError::Timeout));
        }
        for (_, waiting) in self.commands.expire(now) {
            let _ = waiting.send(Err(QueryError::Timeout));
        }
    }

    /// The earliest deadline of a waiting ask or command.
    pub(crate) fn next_deadline(&self) -> Option<shoal_core::Instant> {
        shoal_core::earliest(self.asks.next_deadline(), self.commands.next_deadline())
    }
}

/// The metrics label of a dead-letter reason.
pub(crate) fn reason_label(reason: DeadLetterReason) -> &'static str {
    match reason {
        DeadLetterReason::BufferFull => "buffer_full",
        DeadLetterReason::UnknownEntityType => "unknown_entity_type",
        DeadLetterReason::RegionStopped => "region_stopped",
        DeadLetterReason::PayloadTooLarge => "payload_too_large",
        DeadLetterReason::ShardMismatch => "shard_mismatch",
        DeadLetterReason::MemberGone => "member_gone",
        DeadLetterReason::OutboundQueueFull => "outbound_queue_full",
        DeadLetterReason::MailboxFull => "mailbox_full",
        DeadLetterReason::FencedShardMoved => "fenced_shard_moved",
        _ => "other",
    }
}

/// Counts the sharding events operators watch (shards moving, rebalances, coordinators).
fn count_sharding_event(event: &Event) {
    let name = match event {
        Event::ShardStarted { .. } => "shoal_shards_started_total",
        Event::ShardStopped { .. } => "shoal_handoffs_total",
        Event::Rebalance { .. } => "shoal_rebalance_rounds_total",
        Event::CoordinatorStarted { .. } => "shoal_coordinators_started_total",
        Event::AllocationWaiting { .. } => "shoal_allocation_waiting_total",
        Event::ShardFenced { .. } => "shoal_shards_fenced_total",
        Event::RememberedIdsMisfiled { .. } => "shoal_remembered_ids_misfiled_total",
        Event::CoordinatorUnanswered { .. } => "shoal_coordinator_unanswered_total",
        Event::HandoffAbandoned { .. } => "shoal_handoffs_abandoned_total",
        _ => return,
    };
    metrics::counter!(name).increment(1);
}
