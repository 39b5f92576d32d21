//! The event queue: what is scheduled to happen, ordered by (true time, sequence number), and
//! the run's digest, folded from every event taken from it.

use shoal_core::{EntityId, Envelope, Input, Instant, MemberId, MembershipView, NodeId};

use crate::calendar::CalendarQueue;
use crate::nemesis::Fault;
use crate::net::{Flight, Link};

/// Something scheduled to happen.
#[derive(Debug)]
pub(crate) enum Ev {
    Deliver {
        link: Link,
        flight: Flight,
        envelope: Box<Envelope>,
    },
    Wakeup(NodeId),
    EntityStopped {
        member: MemberId,
        entity: EntityId,
        incarnation: u64,
    },
    Passivate {
        member: MemberId,
        entity: EntityId,
    },
    View {
        member: MemberId,
        version: u64,
        view: MembershipView,
    },
    Client,
    Fault(Fault),
    /// The host tells a node what its bounded queues refused (`Input::OutboundQueueFull`,
    /// `Input::MailboxFull`).
    Refused {
        member: MemberId,
        input: Box<Input>,
    },
    /// An entity answers a message it was delivered (an ask's reply).
    Reply {
        member: MemberId,
        entity: EntityId,
        payload: shoal_core::Payload,
    },
    /// The remember store applies what reached it and answers (see `remembering.rs`).
    Store,
    /// Reliable delivery hands a member's node an input: a producer's letter, or an entity's
    /// confirmation (see `delivering.rs`).
    Reliable {
        member: MemberId,
        input: Box<Input>,
    },
    /// Reliable producers' resend timers are due.
    Producers,
    /// The lease store applies what reached it and answers (see `leasing.rs`).
    Lease,
}

impl Ev {
    /// The event's kind and the node it concerns, as the digest folds them in.
    fn digest_key(&self) -> (u64, u64) {
        match self {
            Self::Deliver { link, .. } => (1, link.1.0),
            Self::Wakeup(n) => (2, n.0),
            Self::EntityStopped { member, .. } => (3, member.node.0),
            Self::Passivate { member, .. } => (4, member.node.0),
            Self::View { member, .. } => (5, member.node.0),
            Self::Reply { member, .. } => (6, member.node.0),
            Self::Client => (6, 0),
            Self::Fault(_) => (7, 0),
            Self::Refused { member, .. } => (8, member.node.0),
            Self::Store => (9, 0),
            Self::Reliable { member, .. } => (10, member.node.0),
            Self::Producers => (11, 0),
            Self::Lease => (12, 0),
        }
    }
}

/// Pending events and the digest of those taken.
#[derive(Debug)]
pub(crate) struct EventQueue {
    seq: u64,
    /// Pending events by (time, sequence number), each naming its slot in `slots`.
    queue: CalendarQueue,
    /// Scheduled events; freed slots are reused (`free`), so scheduling rarely allocates.
    slots: Vec<Option<Ev>>,
    free: Vec<usize>,
    taken: u64,
    digest: u64,
}

impl Default for EventQueue {
    fn default() -> Self {
        Self {
            seq: 0,
            queue: CalendarQueue::default(),
            slots: Vec::new(),
            free: Vec::new(),
            taken: 0,
            digest: 0xcbf2_9ce4_8422_2325,
        }
    }
}

impl EventQueue {
    /// Schedules `ev` at `at` (true time; the caller clamps it to the present).
    pub(crate) fn schedule(&mut self, at: Instant, ev: Ev) {
        self.seq += 1;
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = Some(ev);
                slot
            }
            None => {
                self.slots.push(Some(ev));
                self.slots.len() - 1
            }
        };
        self.queue.push((at, self.seq, slot));
    }

    /// Takes the next event due by `until`, with its time, and folds it into the digest.
    pub(crate) fn pop_due(&mut self, until: Instant) -> Option<(Instant, Ev)> {
        let (at, _, slot) = self.queue.pop_due(until)?;
        let (kind, node) = self.slots[slot]
            .as_ref()
            .expect("scheduled event")
            .digest_key();
        self.free.push(slot);
        self.taken += 1;
        // The slot of the event three ahead starts loading now: slots are spread over a table
        // of every pending event, and by the time that event is two ahead the host reads it
        // for its own hints (`peek`).
        if let Some((_, _, slot)) = self.queue.peek(2) {
            shoal_core::hint::prefetch(&self.slots[slot]);
        }
        for word in [at.as_nanos(), kind, node] {
            // FNV-1a over whole words, then a xor-shift so high bits reach low ones.
            self.digest = (self.digest ^ word).wrapping_mul(0x0100_0000_01b3);
            self.digest ^= self.digest >> 29;
        }
        // Taken last, straight into the result: an event is large, and moving it through a
        // local first copied it twice.
        self.slots[slot].take().map(|ev| (at, ev))
    }

    /// The event `ahead` places after the next one to be taken, if it is already sorted (for
    /// hints about what it reads; see [`CalendarQueue::peek`]).
    pub(crate) fn peek(&self, ahead: usize) -> Option<&Ev> {
        let (_, _, slot) = self.queue.peek(ahead)?;
        self.slots[slot].as_ref()
    }

    /// How many events were taken.
    pub(crate) fn taken(&self) -> u64 {
        self.taken
    }

    /// A digest of every event taken (its time, kind and node), equal for equal seeds.
    pub(crate) fn digest(&self) -> u64 {
        self.digest
    }
}
