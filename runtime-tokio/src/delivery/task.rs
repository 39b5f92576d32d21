//! A reliable producer's task: drives the core's `delivery::Outbox` (a sequence per entity,
//! the bound on what it holds unconfirmed, the resend timers), keeps each message in its
//! durable queue (if it has one) before handing it over, hands its messages to the host as
//! letters, and completes each send when its confirmation arrives.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use shoal_core::delivery::{Confirm, Outbox, ProducerId, ProducerSettings, Seq, Tag};
use shoal_core::{EntityId, EntityType, MemberId, Payload};
use tokio::sync::{mpsc, oneshot};

use super::{Send, SendError};
use crate::clock::Clock;
use crate::entity::letter::{Delivery, Letter};
use crate::host::command::{HostCommand, HostHandle};
use crate::host::delivery::ProducerEvent;
use crate::metric_names;
use crate::store::{ProducerQueue, QueueState};

type Done = oneshot::Sender<Result<(), SendError>>;

/// A send's two answers: handed over, and confirmed.
type Answers = (oneshot::Sender<()>, Done);

/// Requests taken from the queue in one go (their messages kept in one transaction).
const BATCH: usize = 256;

/// The sends of one entity still open: handed to the outbox, and waiting for room.
#[derive(Default)]
struct Waiting {
    /// Completed as their sequence numbers are confirmed.
    pending: VecDeque<(Seq, Done)>,
    /// Not yet handed over (backpressure), in call order.
    held: VecDeque<(Vec<u8>, Answers)>,
}

/// The producer's task state.
pub(super) struct ProducerTask {
    id: ProducerId,
    me: MemberId,
    entity_type: EntityType,
    host: HostHandle,
    settings: ProducerSettings,
    clock: Clock,
    outbox: Outbox,
    /// Where its messages are kept until confirmed, if it has a durable queue.
    queue: Option<Arc<dyn ProducerQueue>>,
    /// Entities with open sends.
    waiting: HashMap<EntityId, Waiting>,
    /// Entities with sends held back, in the order they were first held.
    blocked: VecDeque<EntityId>,
    /// Sends admitted, to hand over together.
    batch: Vec<(EntityId, Vec<u8>, Answers)>,
    /// What entities confirmed since the queue last heard, by entity.
    confirmed: HashMap<EntityId, u64>,
}

impl ProducerTask {
    /// A producer's task; `resumed`: what its durable queue held (then `queue` is it).
    pub(super) fn new(
        (id, me): (ProducerId, MemberId),
        (entity_type, host): (EntityType, HostHandle),
        settings: ProducerSettings,
        (queue, resumed): (Option<Arc<dyn ProducerQueue>>, Option<QueueState>),
    ) -> Self {
        let clock = Clock::start();
        let session = resumed.as_ref().map_or_else(new_session, |r| r.session);
        let mut outbox = Outbox::new(settings, session);
        for stream in resumed.map(|r| r.streams).unwrap_or_default() {
            let unconfirmed = stream.unconfirmed.into_iter().map(Payload).collect();
            outbox.resume(clock.now(), &stream.entity, stream.numbered, unconfirmed);
        }
        Self {
            id,
            me,
            entity_type,
            host,
            settings,
            clock,
            outbox,
            queue,
            waiting: HashMap::new(),
            blocked: VecDeque::new(),
            batch: Vec::new(),
            confirmed: HashMap::new(),
        }
    }

    /// Runs until every handle is dropped and nothing is unconfirmed, or the node stops; a
    /// send still open then fails with `SendError::Stopped` (its senders are dropped).
    pub(super) async fn run(
        mut self,
        mut requests: mpsc::Receiver<Send>,
        mut events: mpsc::UnboundedReceiver<ProducerEvent>,
    ) {
        let mut open = true;
        loop {
            // First what is due (a resumed queue's messages before anything else happens),
            // then wait for the next request, event or timer.
            self.hand_over().await;
            self.forget_confirmed().await;
            if !self.transmit().await {
                break;
            }
            if !open && self.waiting.is_empty() && self.outbox.unconfirmed() == 0 {
                break;
            }
            let wake = (self.outbox.poll_timeout()).map(|at| self.clock.deadline(at));
            tokio::select! {
                biased;
                () = self.host.closed() => break,
                Some(event) = events.recv() => match event {
                    ProducerEvent::Confirmed(entity, confirm) => self.handle_confirm(&entity, confirm),
                    ProducerEvent::Refused(entity, tag) => {
                        if tag.session == self.outbox.session() {
                            self.outbox.handle_refused(self.clock.now(), &entity, tag.seq);
                        }
                    }
                },
                request = requests.recv(), if open => match request {
                    Some(send) => {
                        self.handle_send(send);
                        while self.batch.len() < BATCH {
                            let Ok(send) = requests.try_recv() else { break };
                            self.handle_send(send);
                        }
                    }
                    None => open = false,
                },
                () = sleep_until(wake), if wake.is_some() => {}
            }
        }
    }

    /// Whether one more message for `entity` fits, counting those admitted not yet handed
    /// over.
    fn fits(&self, entity: &EntityId) -> bool {
        let admitted = |e: &EntityId| self.batch.iter().filter(|(b, _, _)| b == e).count();
        let stream = self.outbox.unconfirmed_for(entity);
        self.outbox.unconfirmed() + self.batch.len() < self.settings.max_unconfirmed_total
            && stream + admitted(entity) < self.settings.max_unconfirmed
    }

    fn handle_send(&mut self, send: Send) {
        let held = self
            .waiting
            .get(&send.entity)
            .is_some_and(|w| !w.held.is_empty());
        if held || !self.fits(&send.entity) {
            let waiting = self.waiting.entry(send.entity.clone()).or_default();
            if waiting.held.is_empty() {
                self.blocked.push_back(send.entity.clone());
            }
            waiting
                .held
                .push_back((send.message, (send.accepted, send.done)));
            return;
        }
        self.waiting.entry(send.entity.clone()).or_default();
        let answers = (send.accepted, send.done);
        self.batch.push((send.entity, send.message, answers));
    }

    fn handle_confirm(&mut self, entity: &EntityId, confirm: Confirm) {
        let now = self.clock.now();
        let done = self.outbox.handle_confirm(now, entity, confirm);
        if let (Some(last), Some(_)) = (done.last(), &self.queue) {
            self.confirmed.insert(entity.clone(), last.0);
        }
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

    /// Room freed (the bound is per entity and on all together): the sends held back are
    /// admitted, each entity's in call order, the entities in the order they were held.
    fn admit_held(&mut self) {
        for _ in 0..self.blocked.len() {
            let Some(entity) = self.blocked.pop_front() else {
                break;
            };
            while self.fits(&entity) {
                let Some(waiting) = self.waiting.get_mut(&entity) else {
                    break;
                };
                let Some((message, answers)) = waiting.held.pop_front() else {
                    break;
                };
                self.batch.push((entity.clone(), message, answers));
            }
            if self
                .waiting
                .get(&entity)
                .is_some_and(|w| !w.held.is_empty())
            {
                self.blocked.push_back(entity);
            }
        }
    }

    /// Hands the admitted sends to the outbox, after keeping them in the durable queue (one
    /// transaction): if the queue cannot keep them, they fail, and the outbox never saw them.
    async fn hand_over(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.batch);
        if let Some(queue) = &self.queue {
            let mut next: HashMap<&EntityId, u64> = HashMap::new();
            let kept: Vec<(EntityId, u64, Vec<u8>)> = (batch.iter())
                .map(|(entity, message, _)| {
                    let seq = next
                        .entry(entity)
                        .or_insert_with(|| self.outbox.next_seq(entity).0);
                    *seq += 1;
                    (entity.clone(), *seq - 1, message.clone())
                })
                .collect();
            if let Err(error) = queue.push(self.id.0.as_ref(), &kept).await {
                tracing::warn!(producer = %self.id, %error, "the durable queue could not keep messages");
                for (entity, _, (_, done)) in batch {
                    let _ = done.send(Err(SendError::Queue(error.to_string())));
                    self.forget_if_idle(&entity);
                }
                return;
            }
        }
        let now = self.clock.now();
        for (entity, message, (accepted, done)) in batch {
            match self.outbox.handle_send(now, &entity, Payload(message)) {
                Ok(seq) => {
                    let _ = accepted.send(());
                    self.waiting
                        .entry(entity)
                        .or_default()
                        .pending
                        .push_back((seq, done));
                }
                // Admitted only when it fits: not reached.
                Err(_) => drop(done),
            }
        }
    }

    /// Drops from the durable queue what entities confirmed (a failure only means those
    /// messages are sent again after a restart, and dropped there as duplicates).
    async fn forget_confirmed(&mut self) {
        let Some(queue) = &self.queue else {
            return;
        };
        if self.confirmed.is_empty() {
            return;
        }
        let confirmed: Vec<(EntityId, u64)> = self.confirmed.drain().collect();
        if let Err(error) = queue.confirm(self.id.0.as_ref(), &confirmed).await {
            tracing::warn!(producer = %self.id, %error, "the durable queue could not drop confirmed messages");
        }
    }

    fn forget_if_idle(&mut self, entity: &EntityId) {
        if self
            .waiting
            .get(entity)
            .is_some_and(|w| w.pending.is_empty() && w.held.is_empty())
        {
            self.waiting.remove(entity);
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
            // Counted on the entity's route like any letter of this node's handles, so none
            // sent directly after it overtakes it (order holds per member, as in the core).
            let route = self.host.routes().route(&self.entity_type, &entity);
            let tell = HostCommand::Tell {
                queued: route.queue(),
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
/// a restarted process without a durable queue has no other memory of its predecessor.
pub(super) fn new_session() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |since| since.as_micros() as u64)
}
