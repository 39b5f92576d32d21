//! Joining from discovered contacts (see `membership::bootstrap`): probing every known contact,
//! answering probes while in no cluster, and forming the cluster when the rule says so.

use super::*;
use crate::id::Address;
use crate::id::SeedNode;
use crate::membership::bootstrap::Verdict;
use crate::message::KnownDigest;

impl Membership {
    /// The host discovered `contacts` (its latest DNS answer): they are probed from now on.
    pub(crate) fn handle_contacts(
        &mut self,
        now: Instant,
        contacts: &[SeedNode],
        rng: &mut Rng,
        out: &mut Effects,
    ) {
        if self.phase != Phase::Joining {
            return;
        }
        let Some(bootstrap) = &mut self.bootstrap else {
            tracing::debug!("discovered contacts, but bootstrapping is not configured");
            return;
        };
        if bootstrap.discovered(now, contacts) {
            crate::probe::hit("bootstrap: new contacts restart the stable margin");
            // New contacts are asked at once, not at the next round.
            self.next_join_attempt = now;
            self.probe_contacts(now, out);
        }
        self.try_form(now, rng, out);
    }

    /// Asks every known contact whether it is in a cluster, once per probe interval.
    pub(super) fn probe_contacts(&mut self, now: Instant, out: &mut Effects) {
        let Some(bootstrap) = &self.bootstrap else {
            return;
        };
        if now < self.next_join_attempt {
            return;
        }
        self.next_join_attempt = now + bootstrap.probe_interval();
        for (node, address) in bootstrap.contacts(self.me.node) {
            let init = ClusterMessage::InitJoin {
                address: self.joiner.address.clone(),
            };
            out.send_cluster_at(anyone_at(node), address.clone(), init);
        }
    }

    /// A probe from a node at `address` while this one is in no cluster: it learns the
    /// contacts this node knows and whether it may form.
    pub(super) fn answer_probe(&self, from: MemberId, address: Address, out: &mut Effects) {
        if self.phase != Phase::Joining {
            return;
        }
        if let Some(bootstrap) = &self.bootstrap {
            let nack = ClusterMessage::InitJoinNack {
                known: bootstrap.known(),
                may_form: self.settings.may_form_cluster,
            };
            out.send_cluster_at(from, address, nack);
        }
    }

    /// A contact in no cluster answered a probe.
    pub(super) fn handle_nack(
        &mut self,
        now: Instant,
        from: MemberId,
        (known, may_form): (KnownDigest, bool),
        rng: &mut Rng,
        out: &mut Effects,
    ) {
        if self.phase != Phase::Joining {
            return;
        }
        if let Some(bootstrap) = &mut self.bootstrap {
            bootstrap.answered(now, from.node, known, may_form);
            self.try_form(now, rng, out);
        }
    }

    /// Forms the cluster if the bootstrap rule says this node may now.
    pub(super) fn try_form(&mut self, now: Instant, rng: &mut Rng, out: &mut Effects) {
        let Some(bootstrap) = &self.bootstrap else {
            return;
        };
        let me = (self.me.node, &self.joiner.address);
        match bootstrap.verdict(now, me, self.settings.may_form_cluster) {
            Verdict::Form => {
                tracing::info!(me = %self.me, "no cluster among the contacts, this node forms one");
                crate::probe::hit("bootstrap: the lowest contact forms the cluster");
                self.form(now, rng, out);
            }
            Verdict::Wait(why) => tracing::trace!(why, "bootstrap waits"),
        }
    }

    /// Forms a new cluster of this node alone.
    pub(super) fn form(&mut self, now: Instant, rng: &mut Rng, out: &mut Effects) {
        self.gossip = Gossip::founding(self.joiner.clone());
        self.phase = Phase::Member;
        self.act(now, true, rng, out);
    }
}
