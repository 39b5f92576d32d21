//! A reliable producer's task: drives the core's `delivery::Outbox` (a sequence per entity,
//! the bound on what it holds unconfirmed, the resend timers), hands its messages to the host
//! as letters, and completes each send when its confirmation arrives.

use std::collections::{HashMap, VecDeque};

use shoal_core::delivery::{Confirm, Outbox, ProducerId, ProducerSettings, Seq, Tag};
use shoal_core::{EntityId, EntityType, MemberId, Payload};
use tokio::sync::{mpsc, oneshot};

use super::{Send, SendError};
use crate::clock::Clock;
use crate::entity::letter::{Delivery, Letter};
use crate::host::command::{HostCommand, HostHandle};
use crate::metric_names;

type Done = oneshot::Sender<Result<(), SendError>>;

/// The sends of one entity still open: handed to the outbox, and waiting for room.
#[derive(Default)]
struct Waiting {
    /// Completed as their sequence numbers are confirmed.
    pending: VecDeque<(Seq, Done)>,
    /// Not yet handed over (backpressure), in call order.
    held: VecDeque<(Vec<u8>, Done)>,
}

/// The producer's task state.
pub(super) struct ProducerTask {
    id: ProducerId,
    me: MemberId,
    entity_type: EntityType,
    host: HostHandle,
    clock: Clock,
    outbox: Outbox,
    /// Entities with open sends.
    waiting: HashMap<EntityId, Waiting>,
    /// Entities with sends held back, in the order they were first held.
    blocked: VecDeque<EntityId>,
}

impl ProducerTask {
    pub(super) fn new(
        (id, me): (ProducerId, MemberId),
        entity_type: EntityType,
        host: HostHandle,
        settings: ProducerSettings,
    ) -> Self {
        Self {
            id,
            me,
            entity_type,
            host,
            clock: Clock::start(),
            outbox: Outbox::new(settings, new_session()),
            waiting: HashMap::new(),
            blocked: VecDeque::new(),
        }
    }

    /// Runs until every handle is dropped and nothing is unconfirmed, or the node stops; a
    /// send still open then fails with [`SendError::Stopped`] (its sender is dropped).
    pub(super) async fn run(
        mut self,
        mut requests: mpsc::Receiver<Send>,
        mut confirmed: mpsc::UnboundedReceiver<(EntityId, Confirm)>,
    ) {
        let mut open = true;
        loop {
            if !open && self.waiting.is_empty() {
                break;
            }
            let wake = (self.outbox.poll_timeout()).map(|at| self.clock.deadline(at));
            tokio::select! {
                biased;
                () = self.host.closed() => break,
                Some((entity, confirm)) = confirmed.recv() => self.handle_confirm(&entity, confirm),
                request = requests.recv(), if open => match request {
                    Some(send) => self.handle_send(send),
                    None => open = false,
                },
                () = sleep_until(wake), if wake.is_some() => {}
            }
            if !self.transmit().await {
                break;
            }
        }
    }

    fn handle_send(&mut self, send: Send) {
        let waiting = self.waiting.entry(send.entity.clone()).or_default();
        if !waiting.held.is_empty() || self.outbox.is_full(&send.entity) {
            if waiting.held.is_empty() {
                self.blocked.push_back(send.entity.clone());
            }
            waiting.held.push_back((send.message, send.done));
            return;
        }
        let now = self.clock.now();
        if let Ok(seq) = (self.outbox).handle_send(now, &send.entity, Payload(send.message)) {
            waiting.pending.push_back((seq, send.done));
        }
    }

    fn handle_confirm(&mut self, entity: &EntityId, confirm: Confirm) {
        let now = self.clock.now();
        let done = self.outbox.handle_confirm(now, entity, confirm);
        let Some(waiting) = self.waiting.get_mut(entity) else {
            return;
        };
        for seq in done {
            while waiting.pending.front().is_some_and(|(s, _)| *s <= seq) {
                if let Some((_, done)) = waiting.pending.pop_front() {
                    let _ = done.send(Ok(()));
                }
            }
        }
        if waiting.pending.is_empty() && waiting.held.is_empty() {
            self.waiting.remove(entity);
        }
        self.admit_held();
    }

    /// Room freed (the bound is per entity and on all together): the sends held back go in,
    /// each entity's in call order, the entities in the order they were held.
    fn admit_held(&mut self) {
        let now = self.clock.now();
        for _ in 0..self.blocked.len() {
            let Some(entity) = self.blocked.pop_front() else {
                break;
            };
            let Some(waiting) = self.waiting.get_mut(&entity) else {
                continue;
            };
            while !self.outbox.is_full(&entity) {
                let Some((message, done)) = waiting.held.pop_front() else {
                    break;
                };
                if let Ok(seq) = self.outbox.handle_send(now, &entity, Payload(message)) {
                    waiting.pending.push_back((seq, done));
                }
            }
            if !waiting.held.is_empty() {
                self.blocked.push_back(entity);
            }
        }
    }

    /// Hands what is due to the host as letters; `false` once the host has stopped.
    async fn transmit(&mut self) -> bool {
        let now = self.clock.now();
        let session = self.outbox.session();
        while let Some((entity, transmit)) = self.outbox.poll_transmit(now) {
            if transmit.resend {
                metrics::counter!(metric_names::DELIVERY_RESENDS_TOTAL).increment(1);
            }
            let tag = Tag {
                producer: self.id.clone(),
                session,
                seq: transmit.seq,
                confirmed: transmit.confirmed,
            };
            let letter = Letter {
                ask: None,
                message: transmit.payload.0,
                delivery: Some(Delivery {
                    tag,
                    reply_to: self.me,
                }),
            };
            let tell = HostCommand::Tell {
                entity_type: self.entity_type.clone(),
                entity,
                payload: letter.to_payload(),
            };
            if self.host.send(tell).await.is_err() {
                return false;
            }
        }
        let unconfirmed = self.outbox.unconfirmed() as f64;
        metrics::gauge!(metric_names::DELIVERY_UNCONFIRMED, "producer" => self.id.to_string())
            .set(unconfirmed);
        true
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}

/// A session newer than any this producer id had before: the wall clock in microseconds, as
/// a restarted process has no other memory of its predecessor.
fn new_session() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |since| since.as_micros() as u64)
}
