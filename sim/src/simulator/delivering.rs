//! The simulator's side of reliable delivery: a share of the client messages goes through the
//! producers, their letters and the entities' confirmations travel as the nodes' inputs,
//! resend timers fire, a restarted process resumes its producers, plain entities judge what
//! they are delivered here (persistent ones where their writes are made), and the checks run
//! at the end (see `crate::delivering`).

use shoal_core::{EntityId, Input, Instant, MemberId, NodeId, Payload};

use crate::check::Property;
use crate::delivering::{Confirmation, Reliable, Transmission};
use crate::events::Ev;

use super::Simulator;

impl Simulator {
    /// The client's next message to `entity` goes through a producer, if the run delivers
    /// reliably and the draw says so; `false`: send it as a plain tell.
    pub(crate) fn reliable_send(&mut self, entity: &EntityId) -> bool {
        let hosts = self.producer_hosts();
        let Some(d) = &mut self.delivering else {
            return false;
        };
        if !d.takes_message() {
            return false;
        }
        match d.send(self.now, entity, &hosts) {
            Ok(out) => self.transmit(out),
            Err(_) => self.mark("a reliable producer's full window refused a send"),
        }
        true
    }

    /// An application message reached `member`: `true` if it was a confirmation for one of
    /// its producers (handled), `false` if it is something else.
    pub(crate) fn reliable_confirmed(&mut self, member: MemberId, payload: &Payload) -> bool {
        let hosts = self.producer_hosts();
        let Some(d) = &mut self.delivering else {
            return false;
        };
        match d.confirmed(self.now, member, payload, &hosts) {
            Some(out) => {
                self.transmit(out);
                true
            }
            None => false,
        }
    }

    /// `member` dead-lettered a message to `entity`: if it was one of its producers' letters,
    /// the producer sends it again soon.
    pub(crate) fn reliable_refused(
        &mut self,
        member: MemberId,
        entity: &EntityId,
        payload: &Payload,
    ) {
        if self.delivering.is_none() {
            return;
        }
        let Some(letter) = Reliable::decode(payload) else {
            return;
        };
        let hosts = self.producer_hosts();
        let Some(d) = &mut self.delivering else {
            return;
        };
        let out = d.refused(self.now, member, (entity, &letter), &hosts);
        if !out.is_empty() {
            self.mark("a reliable letter refused on its way out was sent again soon");
        }
        self.transmit(out);
    }

    /// The producers' resend timers fired.
    pub(crate) fn producers_due(&mut self) {
        let hosts = self.producer_hosts();
        let Some(d) = &mut self.delivering else {
            return;
        };
        d.wake = None;
        let out = d.fire(self.now, &hosts);
        self.transmit(out);
    }

    /// Node `node` started a process: its producers resume from their queues.
    pub(crate) fn producers_restarted(&mut self, node: NodeId) {
        let hosts = self.producer_hosts();
        let Some(d) = &mut self.delivering else {
            return;
        };
        let (resumed, out) = d.restarted(self.now, node, &hosts);
        if resumed {
            self.mark("a restarted producer resumed from its durable queue");
        }
        self.transmit(out);
    }

    /// `member`'s incarnation of `entity` was delivered a producer's letter: a persistent
    /// entity judges it when its turn to be written comes, a plain one now.
    pub(crate) fn reliable_delivered(
        &mut self,
        member: MemberId,
        entity: &EntityId,
        delivery: Reliable,
    ) {
        self.check.deliver_reliable(self.now, member, entity);
        if self.persisting.is_some() {
            self.persistent_handed(member, entity, None, Some(delivery));
            return;
        }
        let Some(life) = self.host.running(member, entity) else {
            return;
        };
        let Some(d) = &mut self.delivering else {
            return;
        };
        let (verdict, confirmation) = d.plain(&life, &delivery);
        if verdict == shoal_core::delivery::Verdict::Duplicate {
            self.mark("a plain entity dropped a duplicate reliable message");
        }
        self.send_confirmations(confirmation.into_iter().collect());
    }

    /// A plain entity's incarnation ended: its marks go with it.
    pub(crate) fn reliable_ended(&mut self, life: &crate::entity_host::Life) {
        if let Some(d) = &mut self.delivering {
            d.ended(life);
        }
    }

    /// The members producers may send through: the Up ones, as the clients' (one leaving,
    /// downed or gone stops sending, as a runtime's node does once out, and its process's next
    /// incarnation resumes its producers; a leaving region under a steady stream of local
    /// letters would wait for a gap to finish its shutdown).
    pub(crate) fn producer_hosts(&self) -> Vec<MemberId> {
        if self.delivering.is_none() {
            return Vec::new();
        }
        self.up_members()
    }

    /// Sends entities' confirmations from their members.
    pub(crate) fn send_confirmations(&mut self, confirmations: Vec<Confirmation>) {
        for c in confirmations {
            let input = Input::SendApp {
                to: c.to,
                payload: c.encode(),
            };
            let ev = Ev::Reliable {
                member: c.from,
                input: Box::new(input),
            };
            self.schedule(self.now, ev);
        }
    }

    /// Hands producers' letters to their members' nodes, and sets the timers' wake-up.
    fn transmit(&mut self, out: Vec<Transmission>) {
        for t in out {
            if t.resend {
                self.mark("a reliable producer sent a message again");
            }
            self.remembered_told(&t.entity, &t.payload);
            let input = Input::Tell {
                entity_type: self.ty.clone(),
                entity: t.entity,
                payload: t.payload,
            };
            let ev = Ev::Reliable {
                member: t.from,
                input: Box::new(input),
            };
            self.schedule(self.now, ev);
        }
        let Some(d) = &mut self.delivering else {
            return;
        };
        let next = d.next_timer();
        if let Some(at) = next.filter(|at| d.wake.is_none_or(|wake| *at < wake)) {
            d.wake = Some(at);
            self.schedule(at.max(self.now), Ev::Producers);
        }
    }

    /// From `end`, lets the producers that can still send finish their streams for as long
    /// as confirmations keep coming, each wait as long as one message may take without
    /// faults (mass-passivation seed 9310000598: an entity passivating again and again, stops
    /// ignored until forced, behind a slow link, confirmed a producer's last messages after
    /// the other checks were done). A stream that stalls for a whole wait is left to the
    /// check. Returns the time reached.
    pub(crate) fn await_delivered(&mut self, end: Instant) -> Instant {
        let wait = crate::bounds::message_wait(&self.opts, &self.settings);
        let progress = |w: &Self| {
            let hosts = w.producer_hosts();
            (w.delivering.as_ref()).map_or((0, 0), |d| d.progress(&hosts))
        };
        let mut at = end;
        let (mut unconfirmed, mut confirmed) = progress(self);
        while unconfirmed > 0 {
            at += wait;
            self.run_until(at);
            let before = confirmed;
            (unconfirmed, confirmed) = progress(self);
            if confirmed == before {
                break;
            }
            self.mark("reliable streams still finishing after the other checks");
        }
        at
    }

    /// The end's checks, at `end`.
    pub(crate) fn check_delivery(&mut self, end: Instant) {
        let Some(d) = &self.delivering else {
            return;
        };
        let hosts = self.producer_hosts();
        let failures = match (&self.persisting, &self.remembering) {
            (Some(p), Some(r)) => {
                let store = r.store();
                let ty = &self.ty;
                let journal = |entity: &EntityId| {
                    (store.journal_ids(ty, entity).into_iter())
                        .filter_map(|id| p.effect_of(id).cloned())
                        .collect()
                };
                d.check(Some(&journal), &hosts)
            }
            _ => d.check(None, &hosts),
        };
        for (subject, detail) in failures {
            self.check.fail(end, Property::Delivery, subject, detail);
        }
    }
}
