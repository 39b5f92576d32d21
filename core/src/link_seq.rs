//! Link sequence numbers. A transport that delivers a frame twice (say, one that resends after
//! reconnecting) must not make a node deliver a message twice. Every node numbers the envelopes
//! it sends to each member from 1; a receiver accepts an envelope only if its number is above
//! the last one it accepted from that sender incarnation. Links are FIFO (a transport must
//! never hand over a frame of an old connection after one of a newer connection), so an
//! original never arrives after a later envelope, and every copy is recognised.
//!
//! State is kept per peer *address*, for its newest incarnation only: a peer that restarts
//! (a new incarnation, numbering from 1 again) replaces its old entry, so the tables are bounded
//! by the number of addresses and nothing ever has to be forgotten while a link is in use.

use std::collections::BTreeMap;

use crate::id::{Incarnation, MemberId, NodeId};

/// The newest incarnation seen at one address and the last number of that link.
#[derive(Clone, Copy, Debug)]
struct Link {
    incarnation: Incarnation,
    last: u64,
}

impl Link {
    /// This address's link for `member`: the same one if it is that incarnation, a fresh one
    /// for a newer incarnation, `None` for an older (dead) one.
    fn of(links: &mut BTreeMap<NodeId, Self>, member: MemberId) -> Option<&mut Self> {
        let fresh = Self {
            incarnation: member.incarnation,
            last: 0,
        };
        let link = links.entry(member.node).or_insert(fresh);
        if link.incarnation < member.incarnation {
            *link = fresh;
        }
        (link.incarnation == member.incarnation).then_some(link)
    }
}

/// Sent and accepted sequence numbers per peer address.
#[derive(Debug, Default)]
pub(crate) struct LinkSequences {
    sent: BTreeMap<NodeId, Link>,
    accepted: BTreeMap<NodeId, Link>,
}

impl LinkSequences {
    /// The number of the next envelope to `to` (0, unnumbered, for an incarnation older than
    /// one already addressed: it is gone, so there is nothing to deduplicate).
    pub(crate) fn next_to(&mut self, to: MemberId) -> u64 {
        Link::of(&mut self.sent, to).map_or(0, |link| {
            link.last += 1;
            link.last
        })
    }

    /// Whether an envelope numbered `seq` from `from` is new (and records it if so). Zero
    /// means unnumbered (envelopes a host or test injects itself) and is always accepted, as is
    /// anything from an incarnation older than the newest seen (the membership view decides
    /// what becomes of those).
    pub(crate) fn accept(&mut self, from: MemberId, seq: u64) -> bool {
        if seq == 0 {
            return true;
        }
        let Some(link) = Link::of(&mut self.accepted, from) else {
            return true;
        };
        if seq <= link.last {
            return false;
        }
        link.last = seq;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_and_stale_numbers_are_refused_per_sender_incarnation() {
        let (a, a2, b) = (
            MemberId::new(1, 1),
            MemberId::new(1, 2),
            MemberId::new(2, 1),
        );
        let mut links = LinkSequences::default();
        assert!(links.accept(a, 1));
        assert!(!links.accept(a, 1), "a copy");
        assert!(links.accept(a, 3), "gaps are losses, not errors");
        assert!(!links.accept(a, 2), "older than the last accepted");
        assert!(links.accept(a2, 1), "a new incarnation numbers from 1");
        assert!(!links.accept(a2, 1), "a copy from the new incarnation");
        assert!(
            links.accept(a, 9),
            "the old incarnation is not deduplicated any more"
        );
        assert!(links.accept(b, 1));
        assert!(
            links.accept(a, 0) && links.accept(a, 0),
            "unnumbered envelopes"
        );
    }

    #[test]
    fn numbers_count_from_one_per_receiver_incarnation() {
        let (a, a2, b) = (
            MemberId::new(1, 1),
            MemberId::new(1, 2),
            MemberId::new(2, 1),
        );
        let mut links = LinkSequences::default();
        assert_eq!(
            [links.next_to(a), links.next_to(a), links.next_to(b)],
            [1, 2, 1]
        );
        assert_eq!(links.next_to(a2), 1, "a restarted peer's link starts over");
        assert_eq!(links.next_to(a), 0, "its old incarnation is gone");
        assert_eq!(links.next_to(a2), 2);
    }
}
