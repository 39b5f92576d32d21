//! What the host does with the core's events once a driver call is over: replies and answers
//! complete the request tables, member events are logged, and everything goes to the node's
//! event stream and metrics.

use shoal_core::{Address, Event, Input, MemberId, Payload, RequestId};

use super::Host;
use crate::entity::letter::{AppFrame, AskFailure, Letter};
use crate::error::{AskError, QueryError};
use crate::event::NodeEvent;
use crate::metric_names;

impl Host {
    /// Handles one event the core emitted.
    pub(super) fn handle_event(&mut self, event: Event) {
        // Answers to this node's own asks and commands are its hot path, and the request
        // tables account for them; every other event is counted by kind.
        if !matches!(event, Event::Reply { .. } | Event::AppMessage { .. }) {
            metrics::counter!(metric_names::EVENTS_TOTAL, "kind" => event.kind()).increment(1);
        }
        match event {
            Event::Reply { request, result } => {
                if let Some(answer) = self.requests.complete(request) {
                    let _ = answer.send(result.map_err(QueryError::from));
                }
            }
            Event::AppMessage { from, payload } => self.handle_app_message(from, &payload),
            Event::AppDeadLetter { to, reason, .. } => {
                // An ask's answer that could not go back: the asker times out.
                metrics::counter!(metric_names::DEAD_LETTERS_TOTAL, "reason" => reason.label())
                    .increment(1);
                tracing::debug!(%to, ?reason, "an ask's answer was not sent");
            }
            Event::DeadLetter {
                ref payload,
                reason,
                ..
            } => {
                metrics::counter!(metric_names::DEAD_LETTERS_TOTAL, "reason" => reason.label())
                    .increment(1);
                let letter =
                    (payload.as_ref()).and_then(|payload| Letter::from_payload(payload).ok());
                if let Some(ask) = letter.as_ref().and_then(|letter| letter.ask) {
                    self.answer(ask.asker, ask.id, Err(AskFailure::DeadLetter(reason)));
                }
                if let (Event::DeadLetter { entity, .. }, Some(delivery)) =
                    (&event, letter.and_then(|letter| letter.delivery))
                {
                    self.handle_refused(entity.clone(), delivery);
                }
                self.publish(NodeEvent::Sharding(event));
            }
            Event::MemberUp { member, .. }
            | Event::MemberUnreachable { member, .. }
            | Event::MemberReachable { member, .. }
            | Event::MemberDowned { member, .. }
            | Event::MemberRemoved { member, .. } => {
                if let Some((node_event, address)) = NodeEvent::of_member_event(&event) {
                    // As Akka logs its cluster events: an operator reading one node's log sees
                    // the cluster change around it, with the member's address.
                    let address = address.map_or_else(|| "?".to_string(), ToString::to_string);
                    tracing::info!(%member, %address, event = event.kind(), "member event");
                    self.publish(node_event);
                }
            }
            Event::MembershipChanged => {
                self.forget_unknown_peers();
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

    /// Answers ask `id` of `asker`: at once if this member asked, else through the core, as an
    /// application message to the asking incarnation.
    pub(super) fn answer(&mut self, asker: MemberId, id: u64, answer: Result<Vec<u8>, AskFailure>) {
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
        self.io.feedback.inputs.push(Input::SendApp {
            to: asker,
            payload: frame.to_payload(),
        });
    }

    fn handle_app_message(&mut self, from: MemberId, payload: &Payload) {
        let (id, answer) = match AppFrame::from_payload(payload) {
            Ok(AppFrame::Reply { id, reply }) => (id, Ok(reply)),
            Ok(AppFrame::Failed { id, failure }) => (id, Err(AskError::from(failure))),
            Ok(AppFrame::Confirm {
                entity,
                producer,
                confirm,
            }) => {
                self.handle_confirm(&producer, entity, confirm);
                return;
            }
            Err(_) => {
                metrics::counter!(metric_names::APP_MESSAGES_MALFORMED_TOTAL).increment(1);
                tracing::warn!(%from, "an application message this runtime does not know");
                return;
            }
        };
        if let Some(waiting) = self.asks.complete(RequestId(id)) {
            let _ = waiting.send(answer);
        }
    }

    /// Ends the transport's tasks to addresses neither a seed nor a member of the new view.
    fn forget_unknown_peers(&mut self) {
        let view = self.driver.node().view();
        let seeds = &self.seeds;
        let known = |address: &Address| {
            seeds.contains(address)
                || view
                    .members()
                    .iter()
                    .any(|m| m.address.as_ref() == Some(address))
        };
        self.io.transport.retain(known);
    }

    pub(super) fn publish(&self, event: NodeEvent) {
        // No subscriber is fine: events are for those who listen.
        let _ = self.events.send(event);
    }

    /// Fails every ask and command whose deadline has passed.
    pub(super) fn expire_requests(&mut self, now: shoal_core::Instant) {
        for (_, waiting) in self.asks.expire(now) {
            let _ = waiting.send(Err(AskError::Timeout));
        }
        for (_, waiting) in self.requests.expire(now) {
            let _ = waiting.send(Err(QueryError::Timeout));
        }
    }
}

/// Counts the sharding events operators watch (shards moving, rebalances, coordinators), and
/// records the durations they report.
fn count_sharding_event(event: &Event) {
    let name = match event {
        Event::HandoffCompleted { took, .. } => {
            let seconds = took.as_secs_f64();
            return metrics::histogram!(metric_names::HANDOFF_SECONDS).record(seconds);
        }
        Event::RebalanceCompleted { took, .. } => {
            let seconds = took.as_secs_f64();
            return metrics::histogram!(metric_names::REBALANCE_ROUND_SECONDS).record(seconds);
        }
        Event::ShardHomeAnswered { waited, .. } => {
            let seconds = waited.as_secs_f64();
            return metrics::histogram!(metric_names::COORDINATOR_ROUND_TRIP_SECONDS)
                .record(seconds);
        }
        Event::ShardStarted { .. } => metric_names::SHARDS_STARTED_TOTAL,
        Event::ShardStopped { .. } => metric_names::HANDOFFS_TOTAL,
        Event::Rebalance { .. } => metric_names::REBALANCE_ROUNDS_TOTAL,
        Event::CoordinatorStarted { .. } => metric_names::COORDINATORS_STARTED_TOTAL,
        Event::AllocationWaiting { .. } => metric_names::ALLOCATION_WAITING_TOTAL,
        Event::ShardFenced { .. } => metric_names::SHARDS_FENCED_TOTAL,
        Event::ShardLeaseAcquired { .. } => metric_names::SHARD_LEASES_ACQUIRED_TOTAL,
        Event::ShardLeaseLost { .. } => metric_names::SHARD_LEASES_LOST_TOTAL,
        Event::WriteFenced { .. } => metric_names::WRITES_FENCED_TOTAL,
        Event::RememberedIdsMisfiled { .. } => metric_names::REMEMBERED_IDS_MISFILED_TOTAL,
        Event::CoordinatorUnanswered { .. } => metric_names::COORDINATOR_UNANSWERED_TOTAL,
        Event::HandoffAbandoned { .. } => metric_names::HANDOFFS_ABANDONED_TOTAL,
        _ => return,
    };
    metrics::counter!(name).increment(1);
}
