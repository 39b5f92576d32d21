//! The producer's side, for one entity: numbering, the window the entity's demand allows,
//! confirmation, and resending what is unconfirmed.

use std::collections::VecDeque;
use std::time::Duration;

use super::{Confirm, Seq};
use crate::message::Payload;
use crate::time::Instant;

/// How a producer paces itself.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct ProducerSettings {
    /// Messages in flight before the entity has granted any demand.
    pub initial_window: u32,
    /// Messages a producer holds unconfirmed for one entity at most (sent or waiting for
    /// demand): a send beyond it is refused with [`WindowFull`] (backpressure).
    pub max_unconfirmed: usize,
    /// Messages a producer holds unconfirmed for all its entities together at most (see
    /// [`super::Outbox`]): what it resends after a fault is bounded by this, however many
    /// entities it sends to.
    pub max_unconfirmed_total: usize,
    /// A sent message not confirmed within this is sent again; the wait doubles with each
    /// resend of the oldest unconfirmed message (up to 16 times this) and starts over once the
    /// entity confirms more, so that resends never outrun a slow path's confirmations.
    pub resend_after: Duration,
}

/// The resend wait doubles at most this many times.
const MAX_BACKOFF: u32 = 4;

impl Default for ProducerSettings {
    fn default() -> Self {
        Self {
            initial_window: 8,
            max_unconfirmed: 256,
            max_unconfirmed_total: 4096,
            resend_after: Duration::from_secs(3),
        }
    }
}

/// A send refused: the producer holds as many unconfirmed messages as it may.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct WindowFull;

/// A message to (re)send to the entity.
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct Transmit {
    /// Its place in the sequence.
    pub seq: Seq,
    /// The newest confirmed when it was sent (the tag's `confirmed`).
    pub confirmed: Seq,
    /// The message.
    pub payload: Payload,
    /// It was sent before.
    pub resend: bool,
}

/// One unconfirmed message.
#[derive(Debug)]
struct Unconfirmed {
    seq: Seq,
    payload: Payload,
    /// When it is (re)sent next; `None` while demand does not cover it.
    due: Option<Instant>,
    sent: bool,
    /// Its next send was asked for before its timeout (it was refused on its way out, the
    /// entity reported a gap or a failed write, the entity moved): no sign of a slow path.
    early: bool,
    /// How many times it was refused on its way out: each refusal waits twice as long as the
    /// one before (up to the resend wait), so that a producer does not keep a congested
    /// queue full with its retries while what it waits for (a confirmation coming the other
    /// way) cannot get through.
    refusals: u32,
}

/// One producer's sequence to one entity.
#[derive(Debug)]
pub struct Producer {
    settings: ProducerSettings,
    /// The session it numbers in (see [`super::Tag::session`]).
    session: u64,
    /// The sequence number the next send gets.
    next: Seq,
    /// The newest confirmed.
    confirmed: Seq,
    /// The entity's demand: messages up to `confirmed + demand` may be in flight.
    demand: u32,
    unconfirmed: VecDeque<Unconfirmed>,
    /// How many times the resend wait has doubled since the entity last confirmed more or
    /// asked for a resend.
    backoff: u32,
}

impl Producer {
    /// A producer of `session` whose last confirmed message was `confirmed` (`Seq(0)`: a
    /// fresh one).
    pub fn new(settings: ProducerSettings, session: u64, confirmed: Seq) -> Self {
        Self {
            settings,
            session,
            next: Seq(confirmed.0 + 1),
            confirmed,
            demand: settings.initial_window,
            unconfirmed: VecDeque::new(),
            backoff: 0,
        }
    }

    /// Numbers `payload` and queues it: its sequence number, or [`WindowFull`].
    pub fn handle_send(&mut self, now: Instant, payload: Payload) -> Result<Seq, WindowFull> {
        if self.is_full() {
            return Err(WindowFull);
        }
        Ok(self.resume(now, payload))
    }

    /// Queues `payload` as the next message whatever the bounds (a durable queue's message
    /// resumed after a restart).
    pub fn resume(&mut self, now: Instant, payload: Payload) -> Seq {
        let seq = self.next;
        self.next = Seq(seq.0 + 1);
        self.unconfirmed.push_back(Unconfirmed {
            seq,
            payload,
            due: None,
            sent: false,
            early: false,
            refusals: 0,
        });
        self.release(now);
        seq
    }

    /// The entity confirmed: what it confirms leaves the queue (their sequence numbers, in
    /// order: the sends that completed), its demand releases more, and a `resend` makes the
    /// rest due at once (a gap the entity saw, or a write of its that failed), with the wait
    /// back at its start.
    /// A confirmation of another session (an answer to a producer that restarted since) is
    /// ignored.
    pub fn handle_confirm(&mut self, now: Instant, confirm: Confirm) -> Vec<Seq> {
        let mut done = Vec::new();
        if confirm.session != self.session {
            return done;
        }
        while self
            .unconfirmed
            .front()
            .is_some_and(|u| u.seq <= confirm.up_to)
        {
            done.extend(self.unconfirmed.pop_front().map(|u| u.seq));
        }
        // More confirmed, or the entity saying what it lacks: the path works and nothing is
        // held up on a slow one, so the wait starts over (a resend the entity asks for after
        // a failed write may meet a mailbox still busy with its recovery; it must not then
        // wait the longest timeout).
        if confirm.up_to > self.confirmed || confirm.resend {
            self.backoff = 0;
        }
        self.confirmed = self.confirmed.max(confirm.up_to);
        self.demand = confirm.demand;
        if confirm.resend {
            crate::probe::hit("delivery: a gap reported makes the rest due at once");
            self.resend_now(now);
        }
        self.release(now);
        done
    }

    /// Message `seq` was refused on its way out at `now` (a full queue or buffer said so at
    /// once): it is due again after a quarter of the resend wait, doubled by each refusal in a
    /// row up to the whole wait, and without lengthening the wait of a timeout.
    pub fn handle_refused(&mut self, seq: Seq, now: Instant) {
        let wait = self.resend_wait();
        if let Some(u) = self.unconfirmed.iter_mut().find(|u| u.seq == seq && u.sent) {
            crate::probe::hit("delivery: a refused message is due again soon");
            let delay = (self.settings.resend_after / 4)
                .saturating_mul(1 << u.refusals.min(MAX_BACKOFF))
                .min(wait);
            if u.refusals > 0 {
                crate::probe::hit("delivery: a message refused again waits longer");
            }
            u.refusals += 1;
            u.due = Some(now + delay);
            u.early = true;
        }
    }

    /// The entity moved or restarted (its shard was handed off, its node crashed): whatever was
    /// sent and is unconfirmed is due again at once.
    pub fn handle_moved(&mut self, now: Instant) {
        crate::probe::hit("delivery: a move makes the unconfirmed due at once");
        self.resend_now(now);
    }

    /// The next message to send at `now`, in sequence order. Only what the entity's demand
    /// covers goes, resends included: an entity that takes one message at a time is never
    /// sent a burst it would have to refuse.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        let limit = self.limit();
        let oldest = Seq(self.confirmed.0 + 1);
        let next = self
            .unconfirmed
            .iter_mut()
            .take_while(|u| u.seq.0 <= limit)
            .find(|u| u.due.is_some_and(|at| at <= now))?;
        let resend = next.sent;
        if resend {
            crate::probe::hit("delivery: an unconfirmed message is sent again");
            let timed_out = !std::mem::take(&mut next.early);
            if timed_out && next.seq == oldest && self.backoff < MAX_BACKOFF {
                self.backoff += 1;
            }
        }
        let wait = resend_wait(&self.settings, self.backoff);
        next.sent = true;
        next.due = Some(now + wait);
        Some(Transmit {
            seq: next.seq,
            confirmed: self.confirmed,
            payload: next.payload.clone(),
            resend,
        })
    }

    /// When [`Producer::poll_transmit`] next has something to send.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let limit = self.limit();
        (self.unconfirmed.iter())
            .take_while(|u| u.seq.0 <= limit)
            .filter_map(|u| u.due)
            .min()
    }

    /// How long a sent message waits for its confirmation before it is sent again.
    fn resend_wait(&self) -> Duration {
        resend_wait(&self.settings, self.backoff)
    }

    /// The newest sequence number the entity's demand lets be in flight.
    fn limit(&self) -> u64 {
        self.confirmed.0 + u64::from(self.demand)
    }

    /// Whether a send would be refused with [`WindowFull`].
    pub fn is_full(&self) -> bool {
        self.unconfirmed.len() >= self.settings.max_unconfirmed
    }

    /// Messages held unconfirmed (sent, or waiting for demand).
    pub fn unconfirmed(&self) -> usize {
        self.unconfirmed.len()
    }

    /// The newest confirmed.
    pub fn confirmed(&self) -> Seq {
        self.confirmed
    }

    /// The session it numbers in.
    pub fn session(&self) -> u64 {
        self.session
    }

    /// Messages it has numbered (sent, or waiting to be).
    pub fn numbered(&self) -> u64 {
        self.next.0 - 1
    }

    /// Makes the messages the demand covers and that were never sent due now.
    fn release(&mut self, now: Instant) {
        let limit = self.limit();
        for u in self.unconfirmed.iter_mut() {
            if u.seq.0 > limit {
                break;
            }
            if !u.sent && u.due.is_none() {
                u.due = Some(now);
            }
        }
    }

    /// Makes every sent, unconfirmed message due now, without lengthening the wait: the
    /// entity said what it lacks, no timeout passed.
    fn resend_now(&mut self, now: Instant) {
        for u in self.unconfirmed.iter_mut().filter(|u| u.sent) {
            u.due = Some(now);
            u.early = true;
        }
    }
}

/// How long a sent message waits for its confirmation, after the wait doubled `backoff` times.
fn resend_wait(settings: &ProducerSettings, backoff: u32) -> Duration {
    settings.resend_after * (1 << backoff)
}
