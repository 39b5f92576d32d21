//! Bootstrap from discovered contacts (Akka Cluster Bootstrap's rule, made safe): a node that
//! finds no cluster among the contacts its host discovered (DNS A/AAAA or SRV records: a
//! Kubernetes headless service) forms one only if it has the lowest address among them, at
//! least `required_contacts` of them are known, the set has not grown for `stable_margin`, and
//! every other contact said it is in no cluster either *and knows exactly the same set*. A
//! contact that is a member answers the probe (`InitJoin`) with `InitJoinAck`, and the node
//! joins that cluster instead, so any pod may start first.
//!
//! Why two clusters cannot form (whatever the delays, losses and DNS answers): a node's known
//! set only grows; a founder answers "not in a cluster" only before it forms; and with
//! `required_contacts` more than half of the nodes that may form, the sets S1 and S2 two
//! founders formed on share a contact, which reported both, so one holds the other (they only
//! grow). Say S1 ⊆ S2: the founder of S1 is in S2, so it reported S2 to the founder of S2 (whose
//! address is lower) before it formed, when its own set was already S1 ⊆ S2; sets only grow,
//! so S1 = S2, and one set has one lowest address: the founders are the same node. Akka's rule
//! lacks the agreement on the set: two groups that each see only themselves, or a node whose
//! DNS answer lags, each form a cluster (see Akka Management's bootstrap documentation).
//!
//! "Lowest" is by socket address (IP, then port), as Akka orders contacts.
//!
//! What stays outside the argument: a node restarted while bootstrapping (its set starts
//! empty again; `may_form_cluster` must be false for a restart, as for a restarted first
//! seed), and more nodes able to form than twice `required_contacts` minus one.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::fnv::fnv1a;
use crate::id::{Address, NodeId, SeedNode};
use crate::membership::settings::BootstrapSettings;
use crate::message::KnownDigest;
use crate::time::Instant;

/// A contact's place in the order every node agrees on: addresses that are no `ip:port` first,
/// as text; then socket addresses by IP, then port (Akka's order).
#[derive(Clone, Debug, Eq, Ord, PartialEq, PartialOrd)]
struct ContactKey {
    socket: Option<std::net::SocketAddr>,
    address: Address,
}

impl ContactKey {
    fn of(address: &Address) -> Self {
        Self {
            socket: address.as_str().parse().ok(),
            address: address.clone(),
        }
    }
}

/// What a contact in no cluster answered: the set it knows, and whether it may form.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
struct Answer {
    at: Instant,
    known: KnownDigest,
    may_form: bool,
}

/// Whether this node forms a cluster now, and if not, why.
#[derive(Clone, Debug, Eq, PartialEq)]
pub(crate) enum Verdict {
    /// Form the cluster.
    Form,
    /// Keep probing: the reason, for logs.
    Wait(&'static str),
}

/// A joining node's bootstrap: the contacts it knows and what they answered.
#[derive(Debug)]
pub(crate) struct Bootstrap {
    settings: BootstrapSettings,
    /// Every contact discovered since this process started, in address order (never
    /// shrinks).
    known: BTreeMap<ContactKey, NodeId>,
    /// When `known` last grew.
    stable_since: Instant,
    /// The latest answer of each contact in no cluster.
    answers: BTreeMap<NodeId, Answer>,
}

impl Bootstrap {
    pub(crate) fn new(settings: BootstrapSettings, now: Instant) -> Self {
        Self {
            settings,
            known: BTreeMap::new(),
            stable_since: now,
            answers: BTreeMap::new(),
        }
    }

    pub(crate) fn probe_interval(&self) -> Duration {
        self.settings.probe_interval
    }

    /// The host discovered `contacts`; whether any was new (the stable margin restarts).
    pub(crate) fn discovered(&mut self, now: Instant, contacts: &[SeedNode]) -> bool {
        let before = self.known.len();
        for contact in contacts {
            (self.known)
                .entry(ContactKey::of(&contact.address))
                .or_insert(contact.node);
        }
        let grew = self.known.len() > before;
        if grew {
            self.stable_since = now;
        }
        grew
    }

    /// The contacts to probe: every known one but `me`.
    pub(crate) fn contacts(&self, me: NodeId) -> impl Iterator<Item = (NodeId, &Address)> + '_ {
        (self.known.iter())
            .filter(move |(_, node)| **node != me)
            .map(|(key, node)| (*node, &key.address))
    }

    /// The set this node knows, as it answers a probe.
    pub(crate) fn known(&self) -> KnownDigest {
        let mut bytes = Vec::new();
        for key in self.known.keys() {
            bytes.extend_from_slice(key.address.as_str().as_bytes());
            bytes.push(0);
        }
        KnownDigest {
            contacts: u32::try_from(self.known.len()).unwrap_or(u32::MAX),
            // 64 bits: two different sets agreeing by chance, which the rule rests on not
            // happening, is a 2^-64 event.
            digest: fnv1a(&bytes),
        }
    }

    /// `from` is in no cluster, knows `known` and may form or not.
    pub(crate) fn answered(
        &mut self,
        now: Instant,
        from: NodeId,
        known: KnownDigest,
        may_form: bool,
    ) {
        let answer = Answer {
            at: now,
            known,
            may_form,
        };
        self.answers.insert(from, answer);
    }

    /// Whether `me` (at `address`, allowed to form or not) forms a cluster now.
    pub(crate) fn verdict(
        &self,
        now: Instant,
        (me, address): (NodeId, &Address),
        may_form: bool,
    ) -> Verdict {
        if !may_form {
            return Verdict::Wait("this node may not form a cluster");
        }
        let mine = ContactKey::of(address);
        if !self.known.contains_key(&mine) {
            return Verdict::Wait("this node's own address is not among the contacts");
        }
        if self.known.len() < self.settings.required_contacts {
            return Verdict::Wait("fewer contacts than required");
        }
        if now < self.stable_since + self.settings.stable_margin {
            return Verdict::Wait("the contacts changed within the stable margin");
        }
        if self.known.keys().next() != Some(&mine) {
            return Verdict::Wait("another contact has a lower address");
        }
        let known = self.known();
        let agree = |node: NodeId| {
            self.answers
                .get(&node)
                .is_some_and(|a| a.may_form && a.known == known && a.at >= self.stable_since)
        };
        if !self.contacts(me).all(|(node, _)| agree(node)) {
            return Verdict::Wait("a contact has not answered with the same contacts");
        }
        Verdict::Form
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> Instant {
        Instant::ZERO + Duration::from_secs(secs)
    }

    fn contact(n: u64) -> SeedNode {
        SeedNode::from(NodeId(n))
    }

    fn settings() -> BootstrapSettings {
        BootstrapSettings {
            required_contacts: 3,
            stable_margin: Duration::from_secs(5),
            probe_interval: Duration::from_secs(1),
        }
    }

    #[test]
    fn the_lowest_forms_once_every_contact_agrees_on_the_same_set_after_the_margin() {
        let me = (NodeId(1), &Address::of_node(NodeId(1)));
        let mut b = Bootstrap::new(settings(), at(0));
        assert!(b.discovered(at(0), &[contact(1), contact(2)]));
        assert_eq!(
            b.verdict(at(10), me, true),
            Verdict::Wait("fewer contacts than required")
        );
        assert!(b.discovered(at(1), &[contact(3)]));
        assert!(
            !b.discovered(at(2), &[contact(3), contact(1)]),
            "nothing new"
        );
        let known = b.known();
        b.answered(at(3), NodeId(2), known, true);
        b.answered(at(3), NodeId(3), known, true);
        assert_eq!(
            b.verdict(at(5), me, true),
            Verdict::Wait("the contacts changed within the stable margin")
        );
        assert_eq!(b.verdict(at(6), me, true), Verdict::Form);
        assert_eq!(
            b.verdict(at(6), me, false),
            Verdict::Wait("this node may not form a cluster")
        );
        // Node 2 does not form: 1 is lower.
        let two = (NodeId(2), &Address::of_node(NodeId(2)));
        let mut b2 = Bootstrap::new(settings(), at(0));
        b2.discovered(at(0), &[contact(1), contact(2), contact(3)]);
        assert_eq!(
            b2.verdict(at(9), two, true),
            Verdict::Wait("another contact has a lower address")
        );
    }

    /// Socket addresses order by IP, then port (as numbers, not as text), before any name.
    #[test]
    fn contacts_order_by_socket_address() {
        let address = |a: &str| Address::new(a);
        let mut keys = [
            ContactKey::of(&address("node-a:1")),
            ContactKey::of(&address("127.0.0.1:10000")),
            ContactKey::of(&address("127.0.0.1:9000")),
            ContactKey::of(&address("10.0.0.2:1")),
        ];
        keys.sort();
        let order: Vec<&str> = keys.iter().map(|k| k.address.as_str()).collect();
        assert_eq!(
            order,
            [
                "node-a:1",
                "10.0.0.2:1",
                "127.0.0.1:9000",
                "127.0.0.1:10000"
            ]
        );
    }

    /// Akka's hole: 1 knows {1, 2, 3}; 2 knows {2, 4, 5} (its DNS lags). Under Akka's rule both
    /// see only contacts in no cluster and both form; here 2's answer names another set.
    #[test]
    fn a_contact_knowing_another_set_holds_the_lowest_back() {
        let me = (NodeId(1), &Address::of_node(NodeId(1)));
        let mut one = Bootstrap::new(settings(), at(0));
        one.discovered(at(0), &[contact(1), contact(2), contact(3)]);
        let mut two = Bootstrap::new(settings(), at(0));
        two.discovered(at(0), &[contact(2), contact(4), contact(5)]);
        one.answered(at(1), NodeId(2), two.known(), true);
        one.answered(at(1), NodeId(3), one.known(), true);
        assert_eq!(
            one.verdict(at(9), me, true),
            Verdict::Wait("a contact has not answered with the same contacts")
        );
        // An answer from before the set last grew does not count either.
        one.answered(at(1), NodeId(2), one.known(), true);
        one.discovered(at(2), &[contact(0)]);
        assert_ne!(one.verdict(at(20), me, true), Verdict::Form);
        // Nor does one from a contact that may not form.
        let mut b = Bootstrap::new(settings(), at(0));
        b.discovered(at(0), &[contact(1), contact(2), contact(3)]);
        b.answered(at(6), NodeId(2), b.known(), true);
        b.answered(at(6), NodeId(3), b.known(), false);
        assert_ne!(b.verdict(at(9), me, true), Verdict::Form);
    }
}
