//! One producer's side for every entity it sends to: a [`Producer`] per entity, a bound on
//! what it holds unconfirmed in all, and the timers that say which entity has something due.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::{Confirm, Producer, ProducerSettings, Seq, Transmit, WindowFull};
use crate::id::EntityId;
use crate::message::Payload;
use crate::time::Instant;

/// One entity's sequence and when its producer next has something due.
#[derive(Debug)]
struct Stream {
    producer: Producer,
    /// The key of its entry in [`Outbox::timers`].
    scheduled: Option<Instant>,
}

/// One producer's sequences to all its entities. A stream stays after its messages are all
/// confirmed, so that the next send to the entity continues its sequence.
#[derive(Debug)]
pub struct Outbox {
    settings: ProducerSettings,
    session: u64,
    streams: BTreeMap<EntityId, Stream>,
    /// `(when, entity)` of each stream's next due message.
    timers: BTreeSet<(Instant, EntityId)>,
    /// Streams that may have something due now, in the order they became so.
    ready: VecDeque<EntityId>,
    /// Messages unconfirmed in all streams.
    unconfirmed: usize,
}

impl Outbox {
    /// A producer of `session` paced by `settings`, with nothing sent yet.
    pub fn new(settings: ProducerSettings, session: u64) -> Self {
        Self {
            settings,
            session,
            streams: BTreeMap::new(),
            timers: BTreeSet::new(),
            ready: VecDeque::new(),
            unconfirmed: 0,
        }
    }

    /// Whether a send to `entity` would be refused with [`WindowFull`]: its stream holds as
    /// many unconfirmed messages as it may, or all streams together do.
    pub fn is_full(&self, entity: &EntityId) -> bool {
        self.unconfirmed >= self.settings.max_unconfirmed_total
            || self
                .streams
                .get(entity)
                .is_some_and(|s| s.producer.is_full())
    }

    /// Numbers `payload` for `entity` and queues it: its sequence number, or [`WindowFull`].
    pub fn handle_send(
        &mut self,
        now: Instant,
        entity: &EntityId,
        payload: Payload,
    ) -> Result<Seq, WindowFull> {
        if self.is_full(entity) {
            return Err(WindowFull);
        }
        let (settings, session) = (self.settings, self.session);
        let stream = self
            .streams
            .entry(entity.clone())
            .or_insert_with(|| Stream {
                producer: Producer::new(settings, session, Seq(0)),
                scheduled: None,
            });
        let seq = stream.producer.handle_send(now, payload)?;
        self.unconfirmed += 1;
        self.ready.push_back(entity.clone());
        Ok(seq)
    }

    /// The sequence number the next send to `entity` gets (a durable queue keeps the message
    /// under it before the send).
    pub fn next_seq(&self, entity: &EntityId) -> Seq {
        let numbered = self
            .streams
            .get(entity)
            .map_or(0, |s| s.producer.numbered());
        Seq(numbered + 1)
    }

    /// Resumes `entity`'s sequence as a durable queue kept it: `numbered` messages numbered,
    /// the last `unconfirmed` of them not confirmed (sent again as the entity's demand allows).
    pub fn resume(
        &mut self,
        now: Instant,
        entity: &EntityId,
        numbered: u64,
        unconfirmed: Vec<Payload>,
    ) {
        let confirmed = Seq(numbered.saturating_sub(unconfirmed.len() as u64));
        let mut producer = Producer::new(self.settings, self.session, confirmed);
        for payload in unconfirmed {
            // A resumed queue holds what it held, whatever the bounds are now.
            producer.resume(now, payload);
            self.unconfirmed += 1;
        }
        self.streams.insert(
            entity.clone(),
            Stream {
                producer,
                scheduled: None,
            },
        );
        self.ready.push_back(entity.clone());
    }

    /// `entity` confirmed: the sequence numbers of the sends that completed, in order.
    pub fn handle_confirm(
        &mut self,
        now: Instant,
        entity: &EntityId,
        confirm: Confirm,
    ) -> Vec<Seq> {
        let Some(stream) = self.streams.get_mut(entity) else {
            return Vec::new();
        };
        let done = stream.producer.handle_confirm(now, confirm);
        self.unconfirmed -= done.len();
        self.ready.push_back(entity.clone());
        done
    }

    /// Message `seq` to `entity` was refused on its way out (the node's queue or buffer was
    /// full): it goes again soon, not a whole timeout later (see [`Producer::handle_refused`]).
    pub fn handle_refused(&mut self, now: Instant, entity: &EntityId, seq: Seq) {
        let Some(stream) = self.streams.get_mut(entity) else {
            return;
        };
        stream.producer.handle_refused(seq, now);
        self.ready.push_back(entity.clone());
    }

    /// The entities moved or the producer restarted: everything sent and unconfirmed is due
    /// again at once.
    pub fn handle_moved(&mut self, now: Instant) {
        for (entity, stream) in &mut self.streams {
            if stream.producer.unconfirmed() > 0 {
                stream.producer.handle_moved(now);
                self.ready.push_back(entity.clone());
            }
        }
    }

    /// The next message to send at `now`, with its entity.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<(EntityId, Transmit)> {
        while let Some((at, entity)) = self.timers.first().cloned() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            if let Some(stream) = self.streams.get_mut(&entity) {
                stream.scheduled = None;
            }
            self.ready.push_back(entity);
        }
        while let Some(entity) = self.ready.front().cloned() {
            let Some(stream) = self.streams.get_mut(&entity) else {
                self.ready.pop_front();
                continue;
            };
            if let Some(transmit) = stream.producer.poll_transmit(now) {
                return Some((entity, transmit));
            }
            self.ready.pop_front();
            let next = stream.producer.poll_timeout();
            if next != stream.scheduled {
                if let Some(old) = stream.scheduled.take() {
                    self.timers.remove(&(old, entity.clone()));
                }
                if let Some(at) = next {
                    self.timers.insert((at, entity));
                }
                stream.scheduled = next;
            }
        }
        None
    }

    /// When [`Outbox::poll_transmit`] next has something to send (once it returned `None`).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.first().map(|(at, _)| *at)
    }

    /// Messages unconfirmed for `entity`.
    pub fn unconfirmed_for(&self, entity: &EntityId) -> usize {
        self.streams
            .get(entity)
            .map_or(0, |s| s.producer.unconfirmed())
    }

    /// Messages unconfirmed in all streams.
    pub fn unconfirmed(&self) -> usize {
        self.unconfirmed
    }

    /// The session it numbers in.
    pub fn session(&self) -> u64 {
        self.session
    }

    /// Each entity's sequence, in entity order.
    pub fn streams(&self) -> impl Iterator<Item = (&EntityId, &Producer)> {
        self.streams.iter().map(|(entity, s)| (entity, &s.producer))
    }
}
