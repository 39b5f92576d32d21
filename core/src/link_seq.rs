//! Link sequence numbers. A transport that delivers a frame twice (say, one that resends after
//! reconnecting) must not make a node deliver a message twice. Every node numbers the envelopes
//! it sends to each member from 1; a receiver accepts an envelope only if its number is above
//! the last one it accepted from that sender incarnation. Links are FIFO, so an original never
//! arrives after a later envelope, and every copy is recognised.

use std::collections::BTreeMap;

use crate::id::MemberId;

/// Sent and accepted sequence numbers per peer incarnation.
#[derive(Debug, Default)]
pub(crate) struct LinkSequences {
    /// The last number sent to each member.
    sent: BTreeMap<MemberId, u64>,
    /// The last number accepted from each member.
    accepted: BTreeMap<MemberId, u64>,
}

impl LinkSequences {
    /// The number of the next envelope to `to`.
    pub(crate) fn next_to(&mut self, to: MemberId) -> u64 {
        let seq = self.sent.entry(to).or_default();
        *seq += 1;
        *seq
    }

    /// Whether an envelope numbered `seq` from `from` is new (and records it if so). Zero
    /// means unnumbered (envelopes a host or test injects itself) and is always accepted.
    pub(crate) fn accept(&mut self, from: MemberId, seq: u64) -> bool {
        if seq == 0 {
            return true;
        }
        let last = self.accepted.entry(from).or_default();
        if seq <= *last {
            return false;
        }
        *last = seq;
        true
    }

    /// Drops what is kept about `member` (removed from the cluster long enough ago that no
    /// copy of its envelopes can still arrive).
    pub(crate) fn forget(&mut self, member: MemberId) {
        self.sent.remove(&member);
        self.accepted.remove(&member);
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
        assert!(links.accept(b, 1));
        assert!(links.accept(a, 0) && links.accept(a, 0), "local envelopes");
        links.forget(a);
        assert!(links.accept(a, 1), "forgotten after removal");
    }

    #[test]
    fn numbers_count_from_one_per_receiver() {
        let (a, b) = (MemberId::new(1, 1), MemberId::new(2, 1));
        let mut links = LinkSequences::default();
        assert_eq!(
            [links.next_to(a), links.next_to(a), links.next_to(b)],
            [1, 2, 1]
        );
        links.forget(a);
        assert_eq!(links.next_to(a), 1);
    }
}
