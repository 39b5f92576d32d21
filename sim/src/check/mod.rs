//! Shoal's guarantees, checked against true (simulator) time: single activation and
//! "no delivery to a dead incarnation" on every entity effect, per-sender order (no
//! duplicates, no reordering) on every delivery, buffer caps after every event, and at the end
//! loss (exactly-once in runs without loss) and the coordinator's table at quiescence.

mod streams;
mod violation;

use std::fmt;

use shoal_core::{DeadLetterReason, EntityId, Instant, MemberId, Payload};

pub use violation::{Property, Violation};

use streams::{StreamKey, Streams};

/// Encodes the workload's payload: sender member, sequence number.
pub(crate) fn payload(sender: MemberId, seq: u64) -> Payload {
    let mut bytes = Vec::with_capacity(24);
    bytes.extend(sender.node.0.to_le_bytes());
    bytes.extend(sender.incarnation.0.to_le_bytes());
    bytes.extend(seq.to_le_bytes());
    Payload(bytes)
}

/// How traces show a workload payload: its sender and sequence number.
pub(crate) fn describe(payload: &Payload) -> String {
    if let Some(r) = crate::delivering::Reliable::decode(payload) {
        let t = &r.tag;
        return format!(
            "reliable {} seq {} (confirmed {}) for {}",
            t.producer, t.seq.0, t.confirmed.0, r.reply_to
        );
    }
    match decode(payload) {
        Some((sender, seq)) => format!("from {sender} seq {seq}"),
        None => format!("{} undecodable bytes", payload.0.len()),
    }
}

pub(crate) fn decode(payload: &Payload) -> Option<(MemberId, u64)> {
    let b = &payload.0;
    let word = |i: usize| {
        b.get(i * 8..i * 8 + 8)
            .and_then(|s| s.try_into().ok())
            .map(u64::from_le_bytes)
    };
    // Reliable delivery's payloads start with a word that is never a node id.
    let node = word(0).filter(|&node| node != u64::MAX)?;
    Some((MemberId::new(node, word(1)?), word(2)?))
}

/// An entity of the simulated workload (`e<n>`), as a cheap key.
#[derive(Clone, Copy, Debug, Eq, Ord, PartialEq, PartialOrd)]
struct Ent(u32);

impl Ent {
    /// The workload names entities `e<n>`; anything else is a bug the checker reports.
    fn of(entity: &EntityId) -> Option<Self> {
        entity.as_str().strip_prefix('e')?.parse().ok().map(Ent)
    }
}

impl fmt::Display for Ent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "e{}", self.0)
    }
}

/// One sender's messages to one entity.
#[derive(Debug, Default)]
struct Stream {
    /// How many were sent.
    sent: u64,
    /// Sequence numbers delivered, in delivery order.
    delivered: Vec<u64>,
    /// Sequence numbers reported as dead letters, with the reason they were dropped for.
    dead: Vec<(u64, DeadLetterReason)>,
}

/// Everything the checker knows.
#[derive(Debug, Default)]
pub(crate) struct Checker {
    /// The live incarnation of each entity (by number): its member and when it started.
    live: Vec<Option<(MemberId, Instant)>>,
    /// Every (entity, sender) stream.
    streams: Streams,
    /// Entity incarnations started so far.
    pub(crate) starts: u64,
    /// Messages delivered so far.
    pub(crate) deliveries: u64,
    /// Broken guarantees, in order.
    pub(crate) violations: Vec<Violation>,
}

impl Checker {
    /// A client sent the next message of `sender` to `entity`; returns its payload.
    pub(crate) fn send(&mut self, entity: &EntityId, sender: MemberId) -> Payload {
        let ent = Ent::of(entity).expect("the workload names entities e<n>");
        let stream = self.streams.get_or_begin(ent, sender);
        let p = payload(sender, stream.sent);
        stream.sent += 1;
        p
    }

    fn live_mut(&mut self, ent: Ent) -> &mut Option<(MemberId, Instant)> {
        let i = ent.0 as usize;
        if i >= self.live.len() {
            self.live.resize(i + 1, None);
        }
        &mut self.live[i]
    }

    /// The entity number of `entity`, or a violation if it is not one the workload addresses.
    fn ent(&mut self, at: Instant, entity: &EntityId) -> Option<Ent> {
        let ent = Ent::of(entity);
        if ent.is_none() {
            let detail = format!("{entity:?} is not an entity the workload addresses");
            self.fail(at, Property::DeadIncarnation, entity, detail);
        }
        ent
    }

    /// `member` started an incarnation of `entity`.
    pub(crate) fn start(&mut self, at: Instant, member: MemberId, entity: &EntityId) {
        self.starts += 1;
        let Some(ent) = self.ent(at, entity) else {
            return;
        };
        if let Some((other, since)) = self.live_mut(ent).replace((member, at)) {
            let detail =
                format!("{entity} started on {member} while alive on {other} since {since}");
            self.fail(at, Property::SingleActivation, entity, detail);
        }
    }

    /// `member` delivered `payload` to `entity`.
    pub(crate) fn deliver(
        &mut self,
        at: Instant,
        member: MemberId,
        entity: &EntityId,
        payload: &Payload,
    ) {
        self.deliveries += 1;
        let Some(ent) = self.check_live(at, member, entity) else {
            return;
        };
        let Some((sender, seq)) = decode(payload) else {
            let detail = format!("{entity}: undecodable payload");
            return self.fail(at, Property::Order, entity, detail);
        };
        let delivered = &mut self.streams.get_or_begin(ent, sender).delivered;
        let last = delivered.last().copied();
        delivered.push(seq);
        if let Some(last) = last.filter(|last| seq <= *last) {
            let detail = format!("{entity} from {sender}: message {seq} after {last}");
            self.fail(at, Property::Order, entity, detail);
        }
    }

    /// `member` delivered a reliable producer's message to `entity` (judged by reliable
    /// delivery's checks, not the workload's streams): it must run there.
    pub(crate) fn deliver_reliable(&mut self, at: Instant, member: MemberId, entity: &EntityId) {
        self.deliveries += 1;
        self.check_live(at, member, entity);
    }

    /// `member` delivered a message to `entity` whose mailbox had no room: it must run
    /// there all the same (the node reports the dead letter).
    pub(crate) fn refused(&mut self, at: Instant, member: MemberId, entity: &EntityId) {
        self.check_live(at, member, entity);
    }

    /// A delivery to `entity` on `member`: it must run there.
    fn check_live(&mut self, at: Instant, member: MemberId, entity: &EntityId) -> Option<Ent> {
        let ent = self.ent(at, entity)?;
        let live = *self.live_mut(ent);
        if live.map(|(m, _)| m) != Some(member) {
            let where_ = live.map(|(m, _)| m.to_string());
            let detail =
                format!("{entity} got a message on {member}; live incarnation: {where_:?}");
            self.fail(at, Property::DeadIncarnation, entity, detail);
        }
        Some(ent)
    }

    /// A node reported `payload` to `entity` as a dead letter: dropped, but not silently.
    pub(crate) fn dead_letter(
        &mut self,
        entity: &EntityId,
        payload: &Payload,
        reason: DeadLetterReason,
    ) {
        if let (Some(ent), Some((sender, seq))) = (Ent::of(entity), decode(payload)) {
            self.streams
                .get_or_begin(ent, sender)
                .dead
                .push((seq, reason));
        }
    }

    /// Whether `entity` runs on `member` now.
    pub(crate) fn is_live(&self, member: MemberId, entity: &EntityId) -> bool {
        Ent::of(entity)
            .and_then(|ent| self.live.get(ent.0 as usize).copied().flatten())
            .is_some_and(|(m, _)| m == member)
    }

    /// The incarnation of `entity` on `member` terminated.
    pub(crate) fn stopped(&mut self, member: MemberId, entity: &EntityId) {
        if let Some(ent) = Ent::of(entity) {
            let live = self.live_mut(ent);
            if live.is_some_and(|(m, _)| m == member) {
                *live = None;
            }
        }
    }

    /// `member` crashed: all its entities are gone at once.
    pub(crate) fn crashed(&mut self, member: MemberId) {
        for live in &mut self.live {
            if live.is_some_and(|(m, _)| m == member) {
                *live = None;
            }
        }
    }

    /// Records a violation of `property` concerning `subject`.
    pub(crate) fn fail(
        &mut self,
        at: Instant,
        property: Property,
        subject: impl fmt::Display,
        detail: String,
    ) {
        self.violations.push(Violation {
            at,
            property,
            subject: subject.to_string(),
            detail,
        });
    }

    /// End of a run without loss: each message sent was either delivered once or reported once
    /// as a dead letter for a reason a run without loss can have (a full buffer, outbound
    /// queue or mailbox; the simulated workload never addresses an unknown type or sends
    /// oversized payloads).
    pub(crate) fn check_exactly_once(&mut self, at: Instant) {
        let mut broken = Vec::new();
        let mut first = None;
        let mut streams: Vec<&(StreamKey, Stream)> = self.streams.iter().collect();
        streams.sort_unstable_by_key(|(key, _)| *key);
        for ((ent, sender), stream) in streams {
            let (ent, sender) = (*ent, *sender);
            let wrong_reason = stream
                .dead
                .iter()
                .find(|(_, reason)| !is_backpressure(*reason));
            let mut seen: Vec<u64> = stream.delivered.clone();
            seen.extend(stream.dead.iter().map(|(seq, _)| seq));
            seen.sort_unstable();
            let exact = seen.iter().copied().eq(0..stream.sent);
            let detail = match (wrong_reason, exact) {
                (Some((seq, reason)), _) => {
                    format!("{ent} from {sender}: {seq} dead-lettered without loss: {reason:?}")
                }
                (None, false) => {
                    let (got, dead, sent) =
                        (stream.delivered.len(), stream.dead.len(), stream.sent);
                    let repeats = seen.windows(2).filter(|w| w[0] == w[1]).count();
                    format!(
                        "{ent} from {sender}: {got} delivered + {dead} dead letters of {sent} \
                         ({repeats} reported twice)"
                    )
                }
                (None, true) => continue,
            };
            first.get_or_insert(ent);
            broken.push(detail);
        }
        if let Some(subject) = first {
            let detail = format!(
                "{} streams incomplete, e.g. {}",
                broken.len(),
                broken[..broken.len().min(3)].join("; ")
            );
            self.fail(at, Property::ExactlyOnce, subject, detail);
        }
    }

    /// Whether `sender`'s message `seq` to `entity` was dead-lettered by a bounded queue.
    pub(crate) fn refused_by_backpressure(
        &self,
        entity: &EntityId,
        sender: MemberId,
        seq: u64,
    ) -> bool {
        self.find(entity, sender).is_some_and(|s| {
            s.dead
                .iter()
                .any(|&(dead, reason)| dead == seq && is_backpressure(reason))
        })
    }

    /// Whether `sender`'s message `seq` to `entity` was delivered.
    pub(crate) fn was_delivered(&self, entity: &EntityId, sender: MemberId, seq: u64) -> bool {
        self.find(entity, sender)
            .is_some_and(|s| s.delivered.contains(&seq))
    }

    fn find(&self, entity: &EntityId, sender: MemberId) -> Option<&Stream> {
        self.streams.get(Ent::of(entity)?, sender)
    }

    /// How many messages `sender` sent to `entity` (the next one gets this sequence number).
    pub(crate) fn sent(&self, entity: &EntityId, sender: MemberId) -> u64 {
        self.find(entity, sender).map_or(0, |s| s.sent)
    }

    /// Messages sent so far.
    pub(crate) fn sent_total(&self) -> u64 {
        self.streams.iter().map(|(_, s)| s.sent).sum()
    }
}

/// Whether `reason` is a bounded queue refusing a message (which runs without loss have).
fn is_backpressure(reason: DeadLetterReason) -> bool {
    matches!(
        reason,
        DeadLetterReason::BufferFull
            | DeadLetterReason::OutboundQueueFull
            | DeadLetterReason::MailboxFull
    )
}
