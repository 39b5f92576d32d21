//! Which member heard from which: a member that received from another holds a connection it
//! can answer on without knowing the other's address, as a real transport does. Recorded for
//! every envelope received, which nearly always comes from the newest incarnation at its
//! address to the newest at its own: a bit per (receiver address, sender address) says
//! whether that pair was heard (125 KB at 1,000 nodes, where a table of a word per link
//! missed the cache for every envelope); every pair heard is also kept per receiving
//! address in a short sorted list.

use shoal_core::{MemberId, NodeId};

use crate::nodes::index;

/// (receiver, sender) pairs: whether the newest incarnations at two addresses were heard, and
/// all pairs, by the receiver's address, packed into sorted integers (see [`pair_key`]).
#[derive(Debug, Default)]
pub(crate) struct Connections {
    /// Per address, the newest incarnation seen there (receiving or sending).
    newest: Vec<u64>,
    /// `[receiver]`, a bit per sender address: the newest incarnations at both were heard.
    newest_heard: Vec<Vec<u64>>,
    by_receiver: Vec<Vec<u128>>,
}

fn small(n: u64) -> u32 {
    u32::try_from(n).expect("simulated incarnations are small")
}

/// The receiver's incarnation, the sender's address and the sender's incarnation, in one key
/// (the receiver's address is the list's index).
fn pair_key(receiver: MemberId, sender: MemberId) -> u128 {
    u128::from(small(receiver.incarnation.0)) << 96
        | u128::from(sender.node.0) << 32
        | u128::from(small(sender.incarnation.0))
}

/// The word and bit of address `j` in a row of [`Connections::newest_heard`] (or of any row
/// of bits by address, as the network's blocked links).
pub(crate) fn bit(j: usize) -> (usize, u64) {
    (j / 64, 1 << (j % 64))
}

impl Connections {
    /// `receiver` heard from `sender`.
    pub(crate) fn heard(&mut self, receiver: MemberId, sender: MemberId) {
        let (i, j) = (index(receiver.node), index(sender.node));
        self.note(receiver);
        self.note(sender);
        let newest = self.is_newest_pair(receiver, sender);
        let (word, mask) = bit(j);
        if newest && self.newest_heard[i][word] & mask != 0 {
            return;
        }
        if newest {
            self.newest_heard[i][word] |= mask;
        }
        let pairs = &mut self.by_receiver[i];
        let key = pair_key(receiver, sender);
        if let Err(at) = pairs.binary_search(&key) {
            pairs.insert(at, key);
        }
    }

    /// Starts loading the bit [`Connections::heard`] reads first for a member at `receiver`
    /// hearing from one at `sender` (a hint: see [`shoal_core::hint::prefetch`]).
    pub(crate) fn prefetch(&self, receiver: NodeId, sender: NodeId) {
        let (word, _) = bit(index(sender));
        if let Some(bits) = self
            .newest_heard
            .get(index(receiver))
            .and_then(|r| r.get(word))
        {
            shoal_core::hint::prefetch(bits);
        }
    }

    /// Whether `receiver` ever heard from `sender`.
    pub(crate) fn has_heard(&self, receiver: MemberId, sender: MemberId) -> bool {
        let Ok(i) = usize::try_from(receiver.node.0) else {
            return false;
        };
        let (word, mask) = bit(index(sender.node));
        let newest_heard = self.is_newest_pair(receiver, sender)
            && self.newest_heard[i]
                .get(word)
                .is_some_and(|w| w & mask != 0);
        newest_heard
            || self
                .by_receiver
                .get(i)
                .is_some_and(|pairs| pairs.binary_search(&pair_key(receiver, sender)).is_ok())
    }

    fn is_newest_pair(&self, receiver: MemberId, sender: MemberId) -> bool {
        let newest = |m: MemberId| self.newest.get(index(m.node)) == Some(&m.incarnation.0);
        newest(receiver) && newest(sender)
    }

    /// Makes room for `member`'s address; a newer incarnation there clears the bits of the
    /// address's row and column (they were about the older one).
    fn note(&mut self, member: MemberId) {
        let i = index(member.node);
        if i >= self.newest.len() {
            self.newest.resize(i + 1, 0);
            self.newest_heard.resize_with(i + 1, Vec::new);
            self.by_receiver.resize_with(i + 1, Vec::new);
            let words = self.newest.len().div_ceil(64);
            for row in &mut self.newest_heard {
                row.resize(words, 0);
            }
        }
        if member.incarnation.0 > self.newest[i] {
            self.newest[i] = member.incarnation.0;
            self.newest_heard[i].fill(0);
            let (word, mask) = bit(i);
            for row in &mut self.newest_heard {
                row[word] &= !mask;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_directed_and_per_incarnation() {
        let (a, b, b2) = (
            MemberId::new(1, 1),
            MemberId::new(2, 1),
            MemberId::new(2, 2),
        );
        let mut c = Connections::default();
        c.heard(a, b);
        assert!(c.has_heard(a, b));
        assert!(!c.has_heard(b, a), "directed");
        assert!(!c.has_heard(a, b2), "another incarnation");
        assert!(!c.has_heard(MemberId::new(9, 1), a));
        c.heard(a, b2);
        assert!(c.has_heard(a, b2));
        assert!(
            c.has_heard(a, b),
            "an earlier pair of the link, no longer its last"
        );
        c.heard(a, b);
        assert!(c.has_heard(a, b) && c.has_heard(a, b2));
        assert!(!c.has_heard(MemberId::new(1, 2), b), "a later receiver");
        // The receiver restarts: what its old incarnation heard is not the new one's.
        let (a2, d) = (MemberId::new(1, 2), MemberId::new(4, 1));
        c.heard(a, d);
        c.heard(a2, b2);
        assert!(c.has_heard(a2, b2) && c.has_heard(a, d));
        assert!(!c.has_heard(a2, d), "heard by the old incarnation only");
        // A sender restarts: its new incarnation was not heard yet.
        c.heard(a2, d);
        let d2 = MemberId::new(4, 2);
        c.heard(b2, d2);
        assert!(!c.has_heard(a2, d2) && c.has_heard(b2, d2) && c.has_heard(a2, d));
    }
}
