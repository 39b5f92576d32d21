//! Link sequence numbers. A transport that delivers a frame twice (say, one that resends after
//! reconnecting) must not make a node deliver a message twice. Every node numbers the envelopes
//! it sends to each member from 1, per [`Lane`] (a transport may let control traffic overtake
//! data, never reorder within a lane); a receiver accepts an envelope only if its number is
//! above the last one it accepted from that sender incarnation on that lane. Lanes are FIFO (a
//! transport must never hand over a frame of an old connection after one of a newer
//! connection), so an original never arrives after a later envelope, and every copy is
//! recognised.
//!
//! State is kept per peer *address* (a node's record of each peer, `node/peers.rs`), for its
//! newest incarnation only: a peer that restarts (a new incarnation, numbering from 1 again)
//! replaces its old entry, so the state is bounded by the number of addresses and nothing
//! ever has to be forgotten while a link is in use.

use crate::id::{Incarnation, MemberId};
use crate::message::Lane;

/// The newest incarnation seen at one address and the last number of that link. A link never
/// used is incarnation 0, number 0, and behaves exactly as a fresh one: every real incarnation
/// is newer, so the first use replaces it.
#[derive(Clone, Copy, Debug)]
struct Link {
    incarnation: Incarnation,
    last: u64,
}

impl Default for Link {
    fn default() -> Self {
        Self {
            incarnation: Incarnation(0),
            last: 0,
        }
    }
}

/// One peer address's links, both ways, by lane: a node mostly hears from those it sends to
/// (heartbeats and their answers, forwards and acknowledgements), so one entry serves both.
/// A node keeps one per peer address, with the address (see `node/peers.rs`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PeerLinks {
    sent: [Link; 2],
    accepted: [Link; 2],
}

impl Link {
    /// This link, for `member`: itself if it is that incarnation's, made fresh for a newer
    /// incarnation, `None` for an older (dead) one.
    fn of(&mut self, member: MemberId) -> Option<&mut Self> {
        if self.incarnation < member.incarnation {
            *self = Self {
                incarnation: member.incarnation,
                last: 0,
            };
        }
        (self.incarnation == member.incarnation).then_some(self)
    }
}

fn lane_index(lane: Lane) -> usize {
    match lane {
        Lane::Control => 0,
        Lane::Data => 1,
    }
}

impl PeerLinks {
    /// The number of the next envelope to `to` at this address (0, unnumbered, for an
    /// incarnation older than one already addressed: it is gone, so there is nothing to
    /// deduplicate).
    pub(crate) fn next_to(&mut self, to: MemberId, lane: Lane) -> u64 {
        self.sent[lane_index(lane)].of(to).map_or(0, |link| {
            link.last += 1;
            link.last
        })
    }

    /// Whether an envelope numbered `seq` (not 0: unnumbered envelopes are not looked up)
    /// from `from` at this address is new, and records it if so. Anything from an incarnation
    /// older than the newest seen is accepted (the membership view decides what becomes of
    /// those).
    pub(crate) fn accept(&mut self, from: MemberId, lane: Lane, seq: u64) -> bool {
        let Some(link) = self.accepted[lane_index(lane)].of(from) else {
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
    use crate::node_table::NodeTable;
    use Lane::{Control, Data};

    /// Links per peer address, as a node keeps them.
    #[derive(Default)]
    struct LinkSequences(NodeTable<PeerLinks>);

    impl LinkSequences {
        fn peer(&mut self, member: MemberId) -> &mut PeerLinks {
            self.0.get_or_insert_with(member.node, PeerLinks::default)
        }

        fn next_to(&mut self, to: MemberId, lane: Lane) -> u64 {
            self.peer(to).next_to(to, lane)
        }

        fn accept(&mut self, from: MemberId, lane: Lane, seq: u64) -> bool {
            self.peer(from).accept(from, lane, seq)
        }
    }

    #[test]
    fn lanes_are_numbered_and_deduplicated_apart() {
        let a = MemberId::new(1, 1);
        let mut links = LinkSequences::default();
        assert_eq!(
            [
                links.next_to(a, Data),
                links.next_to(a, Data),
                links.next_to(a, Control)
            ],
            [1, 2, 1]
        );
        assert!(links.accept(a, Data, 5));
        assert!(
            links.accept(a, Control, 1),
            "control overtaking data is not a duplicate"
        );
        assert!(links.accept(a, Control, 2));
        assert!(!links.accept(a, Control, 2));
        assert!(links.accept(a, Data, 6));
    }

    #[test]
    fn copies_and_stale_numbers_are_refused_per_sender_incarnation() {
        let (a, a2, b) = (
            MemberId::new(1, 1),
            MemberId::new(1, 2),
            MemberId::new(2, 1),
        );
        let mut links = LinkSequences::default();
        assert!(links.accept(a, Data, 1));
        assert!(!links.accept(a, Data, 1), "a copy");
        assert!(links.accept(a, Data, 3), "gaps are losses, not errors");
        assert!(!links.accept(a, Data, 2), "older than the last accepted");
        assert!(
            links.accept(a2, Data, 1),
            "a new incarnation numbers from 1"
        );
        assert!(
            !links.accept(a2, Data, 1),
            "a copy from the new incarnation"
        );
        assert!(
            links.accept(a, Data, 9),
            "the old incarnation is not deduplicated any more"
        );
        assert!(links.accept(b, Data, 1));
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
            [
                links.next_to(a, Data),
                links.next_to(a, Data),
                links.next_to(b, Data)
            ],
            [1, 2, 1]
        );
        assert_eq!(
            links.next_to(a2, Data),
            1,
            "a restarted peer's link starts over"
        );
        assert_eq!(links.next_to(a, Data), 0, "its old incarnation is gone");
        assert_eq!(links.next_to(a2, Data), 2);
    }
}
