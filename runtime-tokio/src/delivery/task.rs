//! A reliable producer's task: one `shoal_core::delivery::Producer` per entity it sends to,
//! the sends waiting for their confirmation or for room, and the timers of resends.

use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap, VecDeque};

use shoal_core::delivery::{Confirm, Producer, ProducerId, ProducerSettings, Seq, Tag, Transmit};
use shoal_core::{EntityId, EntityType, Instant, MemberId, Payload};
use tokio::sync::{mpsc, oneshot};

use super::{Send, SendError};
use crate::clock::Clock;
use crate::entity::letter::{Delivery, Letter};
use crate::host::command::{HostCommand, HostHandle};
use crate::metric_names;

type Done = oneshot::Sender<Result<(), SendError>>;

/// What the producer holds for one entity.
struct Stream {
    producer: Producer,
    /// Sends handed to the producer, completed as their sequence numbers are confirmed.
    pending: VecDeque<(Seq, Done)>,
    /// Sends waiting for room (backpressure), in call order.
    waiting: VecDeque<(Vec<u8>, Done)>,
    /// When its timer is set for (the key in `ProducerTask::timers`).
    scheduled: Option<Instant>,
}

/// The producer's task state.
pub(super) struct ProducerTask {
    id: ProducerId,
    me: MemberId,
    session: u64,
    entity_type: EntityType,
    host: HostHandle,
    settings: ProducerSettings,
    clock: Clock,
    /// Kept after they go idle: the next send to the entity continues the sequence.
    streams: HashMap<EntityId, Stream>,
    timers: BTreeSet<(Instant, EntityId)>,
    /// Messages to hand to the host, collected while the state is borrowed.
    outbox: Vec<(EntityId, Transmit)>,
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
            session: new_session(),
            entity_type,
            host,
            settings,
            clock: Clock::start(),
            streams: HashMap::new(),
            timers: BTreeSet::new(),
            outbox: Vec::new(),
        }
    }

    /// Runs until every handle is dropped and nothing is unconfirmed, or the node stops; a
    /// send still waiting then fails with [`SendError::Stopped`] (its sender is dropped).
    pub(super) async fn run(
        mut self,
        mut requests: mpsc::Receiver<Send>,
        mut confirmed: mpsc::UnboundedReceiver<(EntityId, Confirm)>,
    ) {
        let mut open = true;
        loop {
            if !open && self.streams.values().all(Stream::is_idle) {
                break;
            }
            let wake = self.timers.first().map(|(at, _)| self.clock.deadline(*at));
            tokio::select! {
                biased;
                () = self.host.closed() => break,
                Some((entity, confirm)) = confirmed.recv() => self.handle_confirm(entity, confirm),
                request = requests.recv(), if open => match request {
                    Some(send) => self.handle_send(send),
                    None => open = false,
                },
                () = sleep_until(wake), if wake.is_some() => self.handle_timers(),
            }
            if !self.transmit().await {
                break;
            }
        }
    }

    fn handle_send(&mut self, send: Send) {
        let now = self.clock.now();
        let stream = self.stream(&send.entity);
        if !stream.waiting.is_empty() || stream.producer.is_full() {
            stream.waiting.push_back((send.message, send.done));
            return;
        }
        if let Ok(seq) = stream.producer.handle_send(now, Payload(send.message)) {
            stream.pending.push_back((seq, send.done));
        }
        self.poll(&send.entity);
    }

    fn handle_confirm(&mut self, entity: EntityId, confirm: Confirm) {
        let now = self.clock.now();
        let Some(stream) = self.streams.get_mut(&entity) else {
            return;
        };
        for seq in stream.producer.handle_confirm(now, confirm) {
            while stream.pending.front().is_some_and(|(s, _)| *s <= seq) {
                if let Some((_, done)) = stream.pending.pop_front() {
                    let _ = done.send(Ok(()));
                }
            }
        }
        // Room freed: the waiting sends go in, in order.
        while !stream.producer.is_full() {
            let Some((message, done)) = stream.waiting.pop_front() else {
                break;
            };
            if let Ok(seq) = stream.producer.handle_send(now, Payload(message)) {
                stream.pending.push_back((seq, done));
            }
        }
        self.poll(&entity);
    }

    fn handle_timers(&mut self) {
        let now = self.clock.now();
        while let Some((at, entity)) = self.timers.first().cloned() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            if let Some(stream) = self.streams.get_mut(&entity) {
                stream.scheduled = None;
            }
            self.poll(&entity);
        }
    }

    /// Collects what `entity`'s producer has due and sets its timer again.
    fn poll(&mut self, entity: &EntityId) {
        let now = self.clock.now();
        let Some(stream) = self.streams.get_mut(entity) else {
            return;
        };
        while let Some(transmit) = stream.producer.poll_transmit(now) {
            self.outbox.push((entity.clone(), transmit));
        }
        let next = stream.producer.poll_timeout();
        if next != stream.scheduled {
            if let Some(old) = stream.scheduled.take() {
                self.timers.remove(&(old, entity.clone()));
            }
            if let Some(at) = next {
                self.timers.insert((at, entity.clone()));
            }
            stream.scheduled = next;
        }
    }

    /// Hands what is due to the host as letters; `false` once the host has stopped.
    async fn transmit(&mut self) -> bool {
        let unconfirmed: usize = self
            .streams
            .values()
            .map(|s| s.producer.unconfirmed())
            .sum();
        metrics::gauge!(metric_names::DELIVERY_UNCONFIRMED, "producer" => self.id.to_string())
            .set(unconfirmed as f64);
        for (entity, transmit) in std::mem::take(&mut self.outbox) {
            if transmit.resend {
                metrics::counter!(metric_names::DELIVERY_RESENDS_TOTAL).increment(1);
            }
            let tag = Tag {
                producer: self.id.clone(),
                session: self.session,
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
        true
    }

    fn stream(&mut self, entity: &EntityId) -> &mut Stream {
        match self.streams.entry(entity.clone()) {
            Entry::Occupied(stream) => stream.into_mut(),
            Entry::Vacant(vacant) => vacant.insert(Stream {
                producer: Producer::new(self.settings, self.session, Seq(0)),
                pending: VecDeque::new(),
                waiting: VecDeque::new(),
                scheduled: None,
            }),
        }
    }
}

impl Stream {
    fn is_idle(&self) -> bool {
        self.producer.unconfirmed() == 0 && self.waiting.is_empty()
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}

/// A session newer than any this producer id had before: the wall clock in microseconds, as
/// a restarted process has no other memory of its predecessor (a producer with a durable
/// queue keeps its session instead).
fn new_session() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |since| since.as_micros() as u64)
}
