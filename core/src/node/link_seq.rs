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
//! newest incarnation only, one per direction: a peer that restarts (a new incarnation,
//! numbering from 1 again) replaces its old entry, so the state is bounded by the number of
//! addresses and nothing ever has to be forgotten while a link is in use. What an older
//! incarnation sent is refused once a newer one was heard from at its address, as Akka
//! quarantines an address's old system uid: the old process is gone (an address runs one
//! process), so anything of it still on its way could as well have been lost with it, and no
//! copy of it can get through for want of the numbers to recognise it. Like the membership
//! (a joining incarnation marks the smaller ones at its address Down), this relies on an
//! address's incarnations growing with each start (the runtime's are start times in
//! microseconds).

use crate::id::{Incarnation, MemberId};
use crate::message::Lane;

/// One direction of the links with a peer address: the newest incarnation seen there and the
/// last number of each lane's link with it. Never used, it is incarnation 0, numbers 0, and
/// behaves exactly as a fresh one: every real incarnation is newer, so the first use replaces
/// it. Both lanes share the incarnation: 24 bytes, so that a peer's record (its address and
/// both directions, with the key) fills one 64-byte cache line, which every envelope reads.
#[derive(Clone, Copy, Debug)]
struct Direction {
    incarnation: Incarnation,
    last: [u64; 2],
}

impl Default for Direction {
    fn default() -> Self {
        Self {
            incarnation: Incarnation(0),
            last: [0; 2],
        }
    }
}

/// One peer address's links, both ways: a node mostly hears from those it sends to
/// (heartbeats and their answers, forwards and acknowledgements), so one entry serves both.
/// A node keeps one per peer address, with the address (see `node/peers.rs`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PeerLinks {
    sent: Direction,
    accepted: Direction,
}

/// What a receiver makes of a numbered envelope.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub(crate) enum Acceptance {
    /// Numbered above the last accepted on its link: delivered.
    New,
    /// Numbered at or below it: a copy (or an envelope the transport reordered).
    Duplicate,
    /// From an incarnation older than one already heard from at that address.
    FromOlderIncarnation,
}

impl Direction {
    /// The lane's last number, for `member`: this direction's if it is that incarnation's,
    /// started afresh for a newer incarnation, `None` for an older (dead) one.
    fn last_of(&mut self, member: MemberId, lane: Lane) -> Option<&mut u64> {
        if self.incarnation < member.incarnation {
            *self = Self {
                incarnation: member.incarnation,
                last: [0; 2],
            };
        }
        (self.incarnation == member.incarnation).then_some(&mut self.last[lane_index(lane)])
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
    /// incarnation older than one already addressed: it is gone, and the receiver at the
    /// address drops what is addressed to another incarnation).
    pub(crate) fn next_to(&mut self, to: MemberId, lane: Lane) -> u64 {
        self.sent.last_of(to, lane).map_or(0, |last| {
            *last += 1;
            *last
        })
    }

    /// What to make of an envelope numbered `seq` (not 0: unnumbered envelopes are not looked
    /// up) from `from` at this address; records it if it is new.
    pub(crate) fn accept(&mut self, from: MemberId, lane: Lane, seq: u64) -> Acceptance {
        match self.accepted.last_of(from, lane) {
            None => Acceptance::FromOlderIncarnation,
            Some(last) if seq <= *last => Acceptance::Duplicate,
            Some(last) => {
                *last = seq;
                Acceptance::New
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::table::NodeTable;
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
            self.peer(from).accept(from, lane, seq) == Acceptance::New
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
        assert_eq!(
            links.peer(a).accept(a, Data, 9),
            Acceptance::FromOlderIncarnation,
            "the old incarnation is gone"
        );
        assert!(links.accept(b, Data, 1));
    }

    #[test]
    fn a_new_incarnation_heard_on_one_lane_quarantines_the_old_on_both() {
        let (a, a2) = (MemberId::new(1, 1), MemberId::new(1, 2));
        let mut links = LinkSequences::default();
        assert!(links.accept(a, Data, 1));
        assert!(links.accept(a2, Control, 1));
        assert_eq!(
            links.peer(a).accept(a, Data, 2),
            Acceptance::FromOlderIncarnation,
            "the old incarnation's data, new as its number is, comes from a process gone"
        );
        assert!(
            links.accept(a2, Data, 1),
            "the new incarnation's data lane numbers from 1"
        );
        assert_eq!(
            [
                links.next_to(a2, Control),
                links.next_to(a, Data),
                links.next_to(a2, Data)
            ],
            [1, 0, 1],
            "sending to the new incarnation on one lane leaves the old unnumbered on both"
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
