//! The guarantees of DESIGN.md, checked against true (simulator) time: single activation and
//! "no delivery to a dead incarnation" on every entity effect, per-sender order (no
//! duplicates, no reordering) on every delivery, buffer caps after every event, and at the end
//! loss (exactly-once in runs without loss) and the coordinator's table at quiescence.

use std::collections::BTreeMap;
use std::fmt;

use shoal_core::{EntityId, Instant, MemberId, Payload};

/// A broken guarantee.
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct Violation {
    /// When it happened (true time).
    pub at: Instant,
    /// Which property.
    pub property: Property,
    /// What it is about (an entity, a member or a shard, as the trace names it).
    pub subject: String,
    /// What exactly.
    pub detail: String,
}

/// The properties the checker enforces.
#[derive(Clone, Copy, Debug, Eq, Ord, PartialEq, PartialOrd)]
pub enum Property {
    /// Two live incarnations of one entity at the same instant.
    SingleActivation,
    /// A message delivered to an entity that is not running there.
    DeadIncarnation,
    /// A sender's messages delivered out of order or twice.
    Order,
    /// A message lost in a run without loss, crashes or partitions.
    ExactlyOnce,
    /// A buffer beyond its cap.
    BufferCap,
    /// New messages not delivered after healing.
    Liveness,
    /// At quiescence the coordinator's table differs from what regions host.
    CoordinatorConsistency,
    /// After healing, rebalancing did not converge (shards per region differ by more than one).
    Rebalance,
    /// The core's driver detected a busy loop (a timer that stays due).
    BusyLoop,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {:?}: {}", self.at, self.property, self.detail)
    }
}

/// Who sent a message: a node incarnation (its region) and that sender's sequence number.
#[derive(Clone, Copy, Debug, Eq, Ord, PartialEq, PartialOrd)]
pub(crate) struct Sender(pub(crate) MemberId);

/// Encodes the workload's payload: sender member, sequence number.
pub(crate) fn payload(sender: MemberId, seq: u64) -> Payload {
    let mut bytes = Vec::with_capacity(24);
    bytes.extend(sender.node.0.to_le_bytes());
    bytes.extend(sender.incarnation.0.to_le_bytes());
    bytes.extend(seq.to_le_bytes());
    Payload(bytes)
}

fn decode(payload: &Payload) -> Option<(MemberId, u64)> {
    let b = &payload.0;
    let word = |i: usize| {
        b.get(i * 8..i * 8 + 8)
            .and_then(|s| s.try_into().ok())
            .map(u64::from_le_bytes)
    };
    Some((MemberId::new(word(0)?, word(1)?), word(2)?))
}

/// Everything the checker knows.
#[derive(Debug, Default)]
pub(crate) struct Checker {
    /// The live incarnation of each entity: its member and when it started.
    live: BTreeMap<EntityId, (MemberId, Instant)>,
    /// Per entity and sender: sequence numbers delivered, in delivery order.
    inbox: BTreeMap<(EntityId, Sender), Vec<u64>>,
    /// Per entity and sender: how many messages were sent.
    sent: BTreeMap<(EntityId, Sender), u64>,
    /// Per entity and sender: sequence numbers reported as dead letters (dropped for a reason).
    dead: BTreeMap<(EntityId, Sender), Vec<u64>>,
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
        let seq = self
            .sent
            .entry((entity.clone(), Sender(sender)))
            .or_default();
        let p = payload(sender, *seq);
        *seq += 1;
        p
    }

    /// `member` started an incarnation of `entity`.
    pub(crate) fn start(&mut self, at: Instant, member: MemberId, entity: &EntityId) {
        self.starts += 1;
        if let Some((other, since)) = self.live.get(entity) {
            let detail =
                format!("{entity} started on {member} while alive on {other} since {since}");
            self.fail(at, Property::SingleActivation, entity, detail);
        }
        self.live.insert(entity.clone(), (member, at));
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
        if self.live.get(entity).map(|(m, _)| *m) != Some(member) {
            let where_ = self.live.get(entity).map(|(m, _)| m.to_string());
            let detail =
                format!("{entity} got a message on {member}; live incarnation: {where_:?}");
            self.fail(at, Property::DeadIncarnation, entity, detail);
        }
        let Some((sender, seq)) = decode(payload) else {
            let detail = format!("{entity}: undecodable payload");
            return self.fail(at, Property::Order, entity, detail);
        };
        let inbox = self
            .inbox
            .entry((entity.clone(), Sender(sender)))
            .or_default();
        if let Some(&last) = inbox.last() {
            if seq <= last {
                let detail = format!("{entity} from {sender}: message {seq} after {last}");
                inbox.push(seq);
                return self.fail(at, Property::Order, entity, detail);
            }
        }
        inbox.push(seq);
    }

    /// A node reported `payload` to `entity` as a dead letter: dropped, but not silently.
    pub(crate) fn dead_letter(&mut self, entity: &EntityId, payload: &Payload) {
        if let Some((sender, seq)) = decode(payload) {
            let key = (entity.clone(), Sender(sender));
            self.dead.entry(key).or_default().push(seq);
        }
    }

    /// The incarnation of `entity` on `member` terminated.
    pub(crate) fn stopped(&mut self, member: MemberId, entity: &EntityId) {
        if self.live.get(entity).is_some_and(|(m, _)| *m == member) {
            self.live.remove(entity);
        }
    }

    /// `member` crashed: all its entities are gone at once.
    pub(crate) fn crashed(&mut self, member: MemberId) {
        self.live.retain(|_, (m, _)| *m != member);
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

    /// End of run without loss: every message sent was delivered exactly once, or reported
    /// as a dead letter (and then not delivered).
    pub(crate) fn check_exactly_once(&mut self, at: Instant) {
        let mut missing = Vec::new();
        let mut first = None;
        let none = Vec::new();
        for (key, count) in &self.sent {
            let got = self.inbox.get(key).unwrap_or(&none);
            let dead = self.dead.get(key).unwrap_or(&none);
            if let Some(seq) = dead.iter().find(|seq| got.contains(seq)) {
                let detail = format!(
                    "{} from {}: {seq} delivered and dead-lettered",
                    key.0, key.1.0
                );
                first.get_or_insert(&key.0);
                missing.push(detail);
            } else if (got.len() + dead.len()) as u64 != *count {
                let (got, dead) = (got.len(), dead.len());
                let detail = format!(
                    "{} from {}: {got} delivered + {dead} dead letters of {count}",
                    key.0, key.1.0
                );
                first.get_or_insert(&key.0);
                missing.push(detail);
            }
        }
        if !missing.is_empty() {
            let detail = format!(
                "{} streams incomplete, e.g. {}",
                missing.len(),
                missing[..missing.len().min(3)].join("; ")
            );
            let subject = first.map(ToString::to_string).unwrap_or_default();
            self.fail(at, Property::ExactlyOnce, subject, detail);
        }
    }

    /// How many of `sender`'s messages to `entity` were delivered.
    pub(crate) fn delivered(&self, entity: &EntityId, sender: MemberId) -> usize {
        self.inbox
            .get(&(entity.clone(), Sender(sender)))
            .map_or(0, Vec::len)
    }

    /// Messages sent so far.
    pub(crate) fn sent_total(&self) -> u64 {
        self.sent.values().sum()
    }
}
