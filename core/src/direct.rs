//! The host's direct routes to its running entities: the rules that let a host hand a letter
//! straight to a running incarnation, bypassing the node, without breaking a guarantee. The
//! node stays the authority; the host only learns from its effects when a route may open and
//! when it must close. A route carries one [`Sender`]'s letters: the host's own senders (its
//! handles), or one connection's reader of a peer's envelopes.
//!
//! - **Opening.** A sender's route to an entity opens only when a letter of that sender, fed
//!   to the node (`Input::Tell` for the host's own, `Input::Receive` of a `Forward` for a
//!   link), was handed to the running incarnation in the same call (an
//!   `EntityEffect::Deliver` of that entity). The node delivers one sender region's messages
//!   to an entity in send order, so every earlier letter of that sender to the entity was
//!   delivered (or dropped) by then: nothing of its is left in the node's path for a direct
//!   letter to overtake. A letter the node buffered or forwarded instead closes that sender's
//!   route, and it stays closed until a later letter is handed over at once.
//! - **Closing.** Any `EntityEffect::Stop` of the entity (passivation, handoff, forced) and
//!   any `Start` (a new incarnation) close every sender's route to it before the stop is
//!   carried out, so a direct letter reaches only the incarnation it was granted for, ahead of
//!   its stop, and every later letter goes through the node, which buffers it for the next
//!   incarnation. A direct send that fails (a full or closed mailbox) goes through the node
//!   instead.
//! - **The host's part.** While any letter of a sender to the entity waits in the host's own
//!   queue for the node, that sender sends to it through the node too: the host keeps the
//!   count and opens or closes a route before it lets the count drop. A link also waits while
//!   any of its other data-lane envelopes (the protocol's own) waits for the node, so no
//!   direct letter overtakes them.
//! - **Links' numbers.** A letter a link's reader delivers itself takes its link sequence
//!   number out of the node's sight, so a copy of it could later be accepted. The reader goes
//!   direct only for numbers above every one it has seen, and before it hands the node any
//!   later envelope (and before it ends) it reports the last number it consumed, as
//!   `Input::LinkConsumed`, in the same queue: the node then refuses the copies. The report
//!   follows every envelope of the link queued before it and precedes every one after, so
//!   the numbers the node sees, accepted or reported consumed, keep increasing.
//! - **Activity.** Direct deliveries do not pass the node, so the host notes them in an
//!   [`AccessLog`] and feeds them back as `Input::Accessed` before its next call that could
//!   depend on them (timers, any input): idle timeouts and the active-entity limit see every
//!   access, at most one host round late, each entity once per report.
//!
//! The simulator runs these rules with its own route caches and links and judges them with
//! the order, exactly-once and dead-incarnation checks.

use std::collections::{BTreeMap, BTreeSet};

use crate::effect::EntityEffect;
use crate::id::{EntityId, EntityType, ShardId};
use crate::input::Input;
use crate::message::{Body, Envelope, Message, Payload};

/// Whose letters a direct route carries.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum Sender {
    /// The host's own senders (its handles), whose letters reach the node as `Input::Tell`.
    Local,
    /// One connection's reader of a peer's envelopes, numbered by the host: a new connection
    /// is a new link, whose routes start closed.
    Link(u64),
}

/// What the host must do to its routes to an entity.
#[derive(Clone, Debug, Eq, PartialEq)]
pub enum RouteChange {
    /// The running incarnation may now be sent to directly by this sender.
    Open(Sender, EntityType, EntityId),
    /// This sender must go through the node from now on.
    Close(Sender, EntityType, EntityId),
    /// Every sender must go through the node from now on (a start or a stop).
    CloseAll(EntityType, EntityId),
}

/// The letter being fed to the node, whose sender it is, and whether it was handed over.
#[derive(Debug)]
struct InFlight {
    sender: Sender,
    entity_type: EntityType,
    entity: EntityId,
    handed_over: bool,
}

/// Decides from the node's entity effects when the host's direct routes open and close.
#[derive(Debug, Default)]
pub struct RouteGate {
    in_flight: Option<InFlight>,
}

impl RouteGate {
    /// The host is about to feed the node a letter of `sender` to `entity`.
    pub fn begin_letter(&mut self, sender: Sender, entity_type: &EntityType, entity: &EntityId) {
        self.in_flight = Some(InFlight {
            sender,
            entity_type: entity_type.clone(),
            entity: entity.clone(),
            handed_over: false,
        });
    }

    /// An entity effect of the node, before the host carries it out: a route it closes.
    pub fn handle_effect(&mut self, effect: &EntityEffect) -> Option<RouteChange> {
        match effect {
            EntityEffect::Deliver {
                entity_type,
                entity,
                ..
            } => {
                if let Some(f) = &mut self.in_flight {
                    if f.entity == *entity && f.entity_type == *entity_type {
                        f.handed_over = true;
                    }
                }
                None
            }
            EntityEffect::Start {
                entity_type,
                entity,
                ..
            }
            | EntityEffect::Stop {
                entity_type,
                entity,
                ..
            } => Some(RouteChange::CloseAll(entity_type.clone(), entity.clone())),
        }
    }

    /// The node's call with the letter is done: the route opens if the letter was handed to
    /// the running incarnation, else it closes.
    pub fn end_letter(&mut self) -> Option<RouteChange> {
        let f = self.in_flight.take()?;
        Some(if f.handed_over {
            RouteChange::Open(f.sender, f.entity_type, f.entity)
        } else {
            RouteChange::Close(f.sender, f.entity_type, f.entity)
        })
    }
}

/// A letter a link's reader may deliver itself: a numbered data-lane `Forward` to an entity.
#[derive(Debug)]
pub struct LinkLetter<'a> {
    /// The entity's type.
    pub entity_type: &'a EntityType,
    /// The shard the sender addressed.
    pub shard: ShardId,
    /// The entity.
    pub entity: &'a EntityId,
    /// The message.
    pub payload: &'a Payload,
}

impl<'a> LinkLetter<'a> {
    /// The letter `envelope` carries, if it is one a reader may deliver directly; the rest
    /// (the protocol's messages, start requests, unnumbered envelopes) always go through the
    /// node.
    pub fn of(envelope: &'a Envelope) -> Option<Self> {
        let Message::Sharding { entity_type, body } = &envelope.message else {
            return None;
        };
        match body {
            Body::Forward {
                shard,
                entity,
                payload,
            } if envelope.seq != 0 => Some(Self {
                entity_type,
                shard: *shard,
                entity,
                payload,
            }),
            _ => None,
        }
    }
}

/// Moves the payload out of `envelope`'s `Forward` (for a reader delivering it itself); `None`
/// for anything else.
pub fn take_letter_payload(envelope: &mut Envelope) -> Option<Payload> {
    match &mut envelope.message {
        Message::Sharding {
            body: Body::Forward { payload, .. },
            ..
        } => Some(std::mem::take(payload)),
        _ => None,
    }
}

/// Puts a payload taken by [`take_letter_payload`] back (its direct delivery was refused, so
/// the envelope goes to the node after all).
pub fn restore_letter_payload(envelope: &mut Envelope, back: Payload) {
    if let Message::Sharding {
        body: Body::Forward { payload, .. },
        ..
    } = &mut envelope.message
    {
        *payload = back;
    }
}

/// A link reader's account of its data lane's numbers: the highest it has seen, the last it
/// consumed by delivering a letter itself, and the last of those it reported to the node.
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq)]
pub struct LinkNumbers {
    seen: u64,
    consumed: u64,
    reported: u64,
}

impl LinkNumbers {
    /// Notes a data-lane envelope numbered `seq`; whether the reader may deliver it itself
    /// (as far as numbers go): only a number above every one seen on the link, so a copy or
    /// a reordered envelope always reaches the node, which judges it.
    pub fn arrived(&mut self, seq: u64) -> bool {
        let newer = seq > self.seen;
        self.seen = self.seen.max(seq);
        newer && seq != 0
    }

    /// The reader delivered the envelope numbered `seq` itself.
    pub fn consumed(&mut self, seq: u64) {
        self.consumed = self.consumed.max(seq);
    }

    /// The number to report to the node (`Input::LinkConsumed`) before the reader hands it
    /// anything else of the link, or when the link ends, if one is due.
    pub fn report_due(&self) -> Option<u64> {
        (self.consumed > self.reported).then_some(self.consumed)
    }

    /// The node has been handed the report of `seq` (counted only once it is: a report lost
    /// on the way is due again).
    pub fn reported(&mut self, seq: u64) {
        self.reported = self.reported.max(seq);
    }
}

/// Entities the host handed messages on a direct route since its last report.
#[derive(Debug, Default)]
pub struct AccessLog {
    /// Per type: the entities in the order of their first access, and the same as a set.
    by_type: BTreeMap<EntityType, (Vec<EntityId>, BTreeSet<EntityId>)>,
}

impl AccessLog {
    /// `entity` was handed a message directly.
    pub fn note(&mut self, entity_type: &EntityType, entity: &EntityId) {
        if let Some((order, seen)) = self.by_type.get_mut(entity_type) {
            if seen.insert(entity.clone()) {
                order.push(entity.clone());
            }
            return;
        }
        let first = (vec![entity.clone()], BTreeSet::from([entity.clone()]));
        self.by_type.insert(entity_type.clone(), first);
    }

    /// Whether nothing was noted since the last report.
    pub fn is_empty(&self) -> bool {
        self.by_type.is_empty()
    }

    /// The report: one `Input::Accessed` per type, in type order; the log is empty after.
    pub fn take_inputs(&mut self) -> Vec<Input> {
        std::mem::take(&mut self.by_type)
            .into_iter()
            .map(|(entity_type, (entities, _))| Input::Accessed {
                entity_type,
                entities,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::{Epoch, ShardId};
    use crate::message::Payload;
    use crate::reason::StopReason;

    fn key() -> (EntityType, EntityId) {
        (EntityType::new("t"), EntityId::new("e1"))
    }

    fn deliver(entity: &str) -> EntityEffect {
        EntityEffect::Deliver {
            entity_type: EntityType::new("t"),
            entity: EntityId::new(entity),
            payload: Payload(vec![1]),
        }
    }

    #[test]
    fn a_route_opens_only_when_the_hosts_letter_was_handed_over_in_the_same_call() {
        let (t, e) = key();
        let mut gate = RouteGate::default();
        gate.begin_letter(Sender::Local, &t, &e);
        assert_eq!(gate.handle_effect(&deliver("other")), None);
        assert_eq!(
            gate.end_letter(),
            Some(RouteChange::Close(Sender::Local, t.clone(), e.clone())),
            "another entity's delivery is not this letter's"
        );
        gate.begin_letter(Sender::Link(7), &t, &e);
        assert_eq!(gate.handle_effect(&deliver("e1")), None);
        assert_eq!(
            gate.end_letter(),
            Some(RouteChange::Open(Sender::Link(7), t, e)),
            "the route opens for the letter's sender"
        );
        assert_eq!(gate.end_letter(), None, "one answer per letter");
    }

    #[test]
    fn starts_and_stops_close_the_route_whatever_the_letter() {
        let (t, e) = key();
        let mut gate = RouteGate::default();
        let stop = EntityEffect::Stop {
            entity_type: t.clone(),
            entity: e.clone(),
            reason: StopReason::HandOff,
        };
        assert_eq!(
            gate.handle_effect(&stop),
            Some(RouteChange::CloseAll(t.clone(), e.clone()))
        );
        let start = EntityEffect::Start {
            entity_type: t.clone(),
            entity: e.clone(),
            shard: ShardId(1),
            epoch: Epoch(0),
            lease_token: None,
        };
        gate.begin_letter(Sender::Local, &t, &e);
        assert_eq!(
            gate.handle_effect(&start),
            Some(RouteChange::CloseAll(t.clone(), e.clone()))
        );
        gate.handle_effect(&deliver("e1"));
        assert_eq!(
            gate.end_letter(),
            Some(RouteChange::Open(Sender::Local, t, e)),
            "a letter that started its entity and was handed over opens the new route"
        );
    }

    #[test]
    fn a_reader_goes_direct_only_above_every_number_seen_and_reports_what_it_consumed() {
        let mut numbers = LinkNumbers::default();
        assert!(numbers.arrived(1) && numbers.arrived(3), "gaps are losses");
        assert_eq!(numbers.report_due(), None, "nothing consumed yet");
        numbers.consumed(3);
        assert!(!numbers.arrived(3), "a copy goes to the node");
        assert!(!numbers.arrived(2), "so does a reordered envelope");
        assert!(!numbers.arrived(0), "and an unnumbered one");
        assert_eq!(numbers.report_due(), Some(3));
        assert_eq!(
            numbers.report_due(),
            Some(3),
            "due until it was handed over"
        );
        numbers.reported(3);
        assert_eq!(numbers.report_due(), None, "reported once");
        assert!(numbers.arrived(4));
        numbers.consumed(4);
        assert_eq!(numbers.report_due(), Some(4));
    }

    #[test]
    fn only_numbered_forwards_are_link_letters() {
        use crate::id::MemberId;
        let forward = Body::Forward {
            shard: ShardId(3),
            entity: EntityId::new("e1"),
            payload: Payload(vec![1]),
        };
        let envelope = |body, seq| Envelope {
            from: MemberId::new(1, 1),
            to: MemberId::new(2, 1),
            seq,
            message: Message::Sharding {
                entity_type: EntityType::new("t"),
                body,
            },
        };
        let numbered = envelope(forward.clone(), 5);
        let letter = LinkLetter::of(&numbered).expect("a numbered forward");
        assert_eq!((letter.shard, letter.entity.as_str()), (ShardId(3), "e1"));
        assert!(LinkLetter::of(&envelope(forward, 0)).is_none());
        assert!(LinkLetter::of(&envelope(Body::RegisterAck, 6)).is_none());
        let mut taken = numbered;
        assert_eq!(take_letter_payload(&mut taken), Some(Payload(vec![1])));
        assert_eq!(LinkLetter::of(&taken).map(|l| l.payload.0.len()), Some(0));
        restore_letter_payload(&mut taken, Payload(vec![2]));
        assert_eq!(
            LinkLetter::of(&taken).map(|l| l.payload.0.clone()),
            Some(vec![2])
        );
    }

    #[test]
    fn the_access_log_reports_each_entity_once_per_type_in_first_access_order() {
        let mut log = AccessLog::default();
        assert!(log.is_empty());
        let (a, b) = (EntityType::new("a"), EntityType::new("b"));
        for (t, e) in [(&b, "x"), (&a, "y"), (&b, "z"), (&b, "x")] {
            log.note(t, &EntityId::new(e));
        }
        let inputs = log.take_inputs();
        assert_eq!(
            inputs,
            [
                Input::Accessed {
                    entity_type: a,
                    entities: vec![EntityId::new("y")],
                },
                Input::Accessed {
                    entity_type: b,
                    entities: vec![EntityId::new("x"), EntityId::new("z")],
                },
            ]
        );
        assert!(log.is_empty() && log.take_inputs().is_empty());
    }
}
