//! Reliable delivery in the simulator: producers on the first nodes send a share of the client
//! messages through the core's `delivery::Producer`, resending until the entity confirms; each
//! entity judges what it is delivered with the core's `delivery::Consumer` (a plain entity's
//! marks in memory, per incarnation; a persistent entity's written with its events, see
//! `crate::persisting`). A producer keeps its queue across its process's crash (a durable
//! queue): the restarted process resends what was unconfirmed, in the same session.
//!
//! The checks, once the faults have healed and the run settled: every message a producer sent
//! was confirmed; a persistent entity's journal holds each producer's messages exactly once, in
//! order; a plain entity applied each at least once, never one before the messages sent ahead
//! of it.

use std::collections::BTreeMap;
use std::time::Duration;

use shoal_core::delivery::{
    Consumer, HighWater, Outbox, ProducerId, ProducerSettings, Tag, Verdict, WindowFull,
};
use shoal_core::{EntityId, Instant, MemberId, NodeId, Payload};

use crate::entity_host::Life;
use crate::options::Delivery;
use crate::rng::{SimRng, Stream};

mod wire;

use wire::producer_id;
pub(crate) use wire::{Confirmation, Reliable};

/// Messages an entity lets one producer have in flight beyond what it confirmed, at most.
const WINDOW: u32 = 8;

/// The demand an entity grants each producer in a run with `opts`: no more than its mailbox
/// holds, so that a producer's messages are not refused for want of room.
pub(crate) fn window_of(opts: &crate::options::Options) -> u32 {
    opts.host
        .mailbox
        .map_or(WINDOW, |m| m.capacity.clamp(1, WINDOW))
}

/// How a simulated producer paces itself, for entities granting `window`. It holds few
/// messages unconfirmed: behind a mailbox that refuses all but one message at a time (a hot
/// entity of a run with a tiny mailbox), or over a slow link with a small outbound queue, each
/// may take a resend timeout, and what is held must drain well within the settling after the
/// faults, leaving room for other traffic.
fn settings(window: u32) -> ProducerSettings {
    ProducerSettings {
        initial_window: window,
        max_unconfirmed: 16,
        max_unconfirmed_total: 16,
        resend_after: Duration::from_secs(1),
    }
}

/// Judges `tag` as an entity does; with duplicate suppression off (the negative control), a
/// duplicate is applied again.
pub(crate) fn judge(consumer: &Consumer, tag: &Tag, suppress_duplicates: bool) -> Verdict {
    match consumer.handle_message(tag) {
        Verdict::Duplicate if !suppress_duplicates => Verdict::Apply,
        verdict => verdict,
    }
}

/// The tags of the reliably delivered messages in an entity's journal, in order.
pub(crate) type Journal<'a> = dyn Fn(&EntityId) -> Vec<Tag> + 'a;

/// A message for the cluster: `from`'s node sends `entity` a reliable letter.
#[derive(Debug)]
pub(crate) struct Transmission {
    pub(crate) from: MemberId,
    pub(crate) entity: EntityId,
    pub(crate) payload: Payload,
    pub(crate) resend: bool,
}

/// One producer: its node and its sequences to every entity.
#[derive(Debug)]
struct SimProducer {
    id: ProducerId,
    node: NodeId,
    outbox: Outbox,
}

/// The run's producers and the plain entities' consumers.
#[derive(Debug)]
pub(crate) struct Delivering {
    options: Delivery,
    /// The demand entities grant (see [`window_of`]).
    window: u32,
    rng: SimRng,
    producers: Vec<SimProducer>,
    /// The earliest wake-up scheduled for the producers' timers.
    pub(crate) wake: Option<Instant>,
    /// Plain entities' consumers, per incarnation.
    consumers: BTreeMap<Life, Consumer>,
    /// Plain entities: the sequence numbers applied, per `(producer, entity)`, in order.
    applied: BTreeMap<(ProducerId, EntityId), Vec<u64>>,
}

impl Delivering {
    /// Reliable delivery with `options` in the run `opts` (producers on its first nodes but
    /// the bystander, which runs no entity type).
    pub(crate) fn new(options: Delivery, opts: &crate::options::Options) -> Self {
        let bystander = opts.cluster.bystander;
        let hosts: Vec<NodeId> = (1..=opts.cluster.nodes)
            .map(NodeId)
            .filter(|n| Some(*n) != bystander)
            .collect();
        let window = window_of(opts);
        let producers = (hosts.iter().take(options.producers.max(1) as usize))
            .enumerate()
            .map(|(k, node)| SimProducer {
                id: producer_id(k),
                node: *node,
                outbox: Outbox::new(settings(window), 1),
            })
            .collect();
        Self {
            options,
            window,
            rng: SimRng::of(opts.seed, Stream::Delivery),
            producers,
            wake: None,
            consumers: BTreeMap::new(),
            applied: BTreeMap::new(),
        }
    }

    /// Whether the client's next message goes through a producer.
    pub(crate) fn takes_message(&mut self) -> bool {
        self.rng.chance(self.options.share)
    }

    /// A producer (drawn) sends `entity` its next message; `Err` if it holds as many
    /// unconfirmed messages as it may.
    pub(crate) fn send(
        &mut self,
        now: Instant,
        entity: &EntityId,
        hosts: &[MemberId],
    ) -> Result<Vec<Transmission>, WindowFull> {
        let p = self.rng.below(self.producers.len() as u64) as usize;
        let outbox = &mut self.producers[p].outbox;
        outbox.handle_send(now, entity, Payload(Vec::new()))?;
        Ok(self.poll(now, p, hosts))
    }

    /// A confirmation reached `member`: what its producer sends next. `None` if `payload` is
    /// not a confirmation.
    pub(crate) fn confirmed(
        &mut self,
        now: Instant,
        member: MemberId,
        payload: &Payload,
        hosts: &[MemberId],
    ) -> Option<Vec<Transmission>> {
        let (p, entity, confirm) = Confirmation::decode(payload)?;
        let producer = self.producers.get_mut(p)?;
        if producer.node != member.node {
            return Some(Vec::new());
        }
        let entity = EntityId::new(format!("e{entity}"));
        producer.outbox.handle_confirm(now, &entity, confirm);
        Some(self.poll(now, p, hosts))
    }

    /// A letter of a producer on `member` was refused there on its way out (a full queue or
    /// buffer): what the producer sends next (the letter again, soon).
    pub(crate) fn refused(
        &mut self,
        now: Instant,
        member: MemberId,
        (entity, letter): (&EntityId, &Reliable),
        hosts: &[MemberId],
    ) -> Vec<Transmission> {
        let p = wire::producer_index(&letter.tag.producer) as usize;
        let Some(producer) = self.producers.get_mut(p) else {
            return Vec::new();
        };
        if letter.reply_to != member || producer.outbox.session() != letter.tag.session {
            return Vec::new();
        }
        producer.outbox.handle_refused(now, entity, letter.tag.seq);
        self.poll(now, p, hosts)
    }

    /// The producers' next deadline.
    pub(crate) fn next_timer(&self) -> Option<Instant> {
        (self.producers.iter())
            .filter_map(|p| p.outbox.poll_timeout())
            .min()
    }

    /// Fires the timers due at `now`: what to send again.
    pub(crate) fn fire(&mut self, now: Instant, hosts: &[MemberId]) -> Vec<Transmission> {
        (0..self.producers.len())
            .flat_map(|p| self.poll(now, p, hosts))
            .collect()
    }

    /// Node `node` started a new process: its producers resume from their queues, resending
    /// what is unconfirmed at once. Whether any had something to resend.
    pub(crate) fn restarted(
        &mut self,
        now: Instant,
        node: NodeId,
        hosts: &[MemberId],
    ) -> (bool, Vec<Transmission>) {
        let mut resumed = false;
        let mut out = Vec::new();
        for p in 0..self.producers.len() {
            if self.producers[p].node == node {
                resumed |= self.producers[p].outbox.unconfirmed() > 0;
                self.producers[p].outbox.handle_moved(now);
                out.extend(self.poll(now, p, hosts));
            }
        }
        (resumed, out)
    }

    /// What producer `p` sends now.
    fn poll(&mut self, now: Instant, p: usize, hosts: &[MemberId]) -> Vec<Transmission> {
        let producer = &mut self.producers[p];
        // The member its node runs, if that member may send (see `producer_hosts`).
        let member = hosts.iter().copied().find(|m| m.node == producer.node);
        let session = producer.outbox.session();
        let mut out = Vec::new();
        while let Some((entity, transmit)) = producer.outbox.poll_transmit(now) {
            // A producer whose process is down sends nothing: the message is due again after
            // the resend timeout, by when its process may be back.
            let Some(member) = member else {
                continue;
            };
            let reliable = Reliable {
                tag: Tag {
                    producer: producer.id.clone(),
                    session,
                    seq: transmit.seq,
                    confirmed: transmit.confirmed,
                },
                reply_to: member,
            };
            out.push(Transmission {
                from: member,
                entity,
                payload: reliable.encode(p),
                resend: transmit.resend,
            });
        }
        out
    }

    /// A plain entity's incarnation `life` was delivered `delivery`: its verdict, and the
    /// confirmation to send.
    pub(crate) fn plain(
        &mut self,
        life: &Life,
        delivery: &Reliable,
    ) -> (Verdict, Option<Confirmation>) {
        let suppress = self.options.suppress_duplicates;
        let window = self.window;
        let consumer = (self.consumers)
            .entry(life.clone())
            .or_insert_with(|| Consumer::new(HighWater::default(), window));
        let verdict = judge(consumer, &delivery.tag, suppress);
        if verdict == Verdict::Apply {
            consumer.processed(&delivery.tag);
            let key = (delivery.tag.producer.clone(), life.1.clone());
            self.applied
                .entry(key)
                .or_default()
                .push(delivery.tag.seq.0);
        }
        let confirm = consumer.confirm(&delivery.tag, verdict);
        (verdict, Confirmation::of(life, delivery, confirm))
    }

    /// The incarnation ended: its in-memory marks go with it.
    pub(crate) fn ended(&mut self, life: &Life) {
        self.consumers.remove(life);
    }

    /// Of the producers on `hosts` (those that can still send): how many of their messages
    /// are unconfirmed, and how many confirmed, over all their streams.
    pub(crate) fn progress(&self, hosts: &[MemberId]) -> (u64, u64) {
        let mut progress = (0, 0);
        let sending = (self.producers.iter()).filter(|p| hosts.iter().any(|m| m.node == p.node));
        for producer in sending {
            for (_, stream) in producer.outbox.streams() {
                progress.0 += stream.unconfirmed() as u64;
                progress.1 += stream.confirmed().0;
            }
        }
        progress
    }

    /// The final checks. `journal(entity)`: for a run whose entities persist, the tags of the
    /// reliably delivered messages in `entity`'s journal, in order (`None`: entities are
    /// plain). `hosts`: the members producers may send through at the end (a producer whose
    /// process is gone cannot finish). Each failure as (subject, detail).
    pub(crate) fn check(
        &self,
        journal: Option<&Journal<'_>>,
        hosts: &[MemberId],
    ) -> Vec<(String, String)> {
        let mut failures = Vec::new();
        for producer in &self.producers {
            for (entity, stream) in producer.outbox.streams() {
                let unconfirmed = stream.unconfirmed();
                let confirmed = stream.confirmed().0;
                if unconfirmed > 0 && hosts.iter().any(|m| m.node == producer.node) {
                    let detail = format!(
                        "{}: {unconfirmed} of {} messages to {entity} never confirmed \
                         (confirmed up to {confirmed})",
                        producer.id,
                        stream.numbered(),
                    );
                    failures.push((entity.to_string(), detail));
                }
                let detail = match journal {
                    Some(journal) => {
                        let seqs: Vec<u64> = (journal(entity).into_iter())
                            .filter(|tag| tag.producer == producer.id)
                            .map(|tag| tag.seq.0)
                            .collect();
                        exactly_once(&seqs, confirmed)
                    }
                    None => {
                        let key = (producer.id.clone(), entity.clone());
                        let seqs = self.applied.get(&key).map_or(&[][..], Vec::as_slice);
                        at_least_once(seqs, confirmed)
                    }
                };
                if let Some(detail) = detail {
                    let detail = format!("{} to {entity}: {detail}", producer.id);
                    failures.push((entity.to_string(), detail));
                }
            }
        }
        failures
    }
}

/// A persistent entity's journal must hold the producer's messages 1, 2, ... once each, in
/// order, and every confirmed one.
fn exactly_once(seqs: &[u64], confirmed: u64) -> Option<String> {
    for (i, &seq) in seqs.iter().enumerate() {
        let expected = i as u64 + 1;
        if seq != expected {
            let what = if seq < expected {
                "applied twice"
            } else {
                "applied past a gap"
            };
            return Some(format!("message {seq} {what} (journal holds {seqs:?})"));
        }
    }
    (confirmed > seqs.len() as u64).then(|| {
        format!(
            "message {} confirmed but not in the journal ({seqs:?})",
            seqs.len() + 1
        )
    })
}

/// A plain entity must have applied every confirmed message, each first applied only after
/// every message before it.
fn at_least_once(seqs: &[u64], confirmed: u64) -> Option<String> {
    let mut newest = 0;
    for &seq in seqs {
        if seq > newest + 1 {
            return Some(format!(
                "message {seq} applied before {} ({seqs:?})",
                newest + 1
            ));
        }
        newest = newest.max(seq);
    }
    (confirmed > newest).then(|| format!("message {} confirmed but never applied", newest + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_end_checks_catch_a_duplicate_a_gap_and_a_message_never_applied() {
        assert_eq!(exactly_once(&[1, 2, 3], 3), None);
        assert!(
            exactly_once(&[1, 2, 2, 3], 3)
                .unwrap()
                .contains("applied twice")
        );
        assert!(exactly_once(&[1, 3], 3).unwrap().contains("past a gap"));
        assert!(
            exactly_once(&[1, 2], 3)
                .unwrap()
                .contains("not in the journal")
        );
        assert_eq!(at_least_once(&[1, 2, 2, 3], 3), None);
        assert!(at_least_once(&[1, 3], 3).is_some());
        assert!(at_least_once(&[1, 2], 3).is_some());
    }
}
