//! Which member heard from which: a member that received from another holds a connection it
//! can answer on without knowing the other's address, as a real transport does. Recorded for
//! every envelope received, which nearly always repeats its link's last pair: a table by
//! (receiver address, sender address) holds that pair and answers in one read; every pair
//! heard is also kept per receiving address in a short sorted list.

use shoal_core::MemberId;

/// No pair heard on a link yet (simulated incarnations are far below `u32::MAX`).
const NONE: u64 = u64::MAX;

/// (receiver, sender) pairs, by the receiver's address: the last one per link, and all of
/// them packed into sorted integers (see [`pair_key`]).
#[derive(Debug, Default)]
pub(crate) struct Connections {
    /// `[receiver][sender]` by address: the link's last pair (see [`incarnations`]).
    last: Vec<Vec<u64>>,
    by_receiver: Vec<Vec<u128>>,
}

fn small(n: u64) -> u32 {
    u32::try_from(n).expect("simulated incarnations are small")
}

fn index(member: MemberId) -> usize {
    usize::try_from(member.node.0).expect("simulated addresses are small")
}

/// The receiver's incarnation, the sender's address and the sender's incarnation, in one key
/// (the receiver's address is the list's index).
fn pair_key(receiver: MemberId, sender: MemberId) -> u128 {
    u128::from(small(receiver.incarnation.0)) << 96
        | u128::from(sender.node.0) << 32
        | u128::from(small(sender.incarnation.0))
}

/// The two incarnations of a pair whose addresses are known.
fn incarnations(receiver: MemberId, sender: MemberId) -> u64 {
    u64::from(small(receiver.incarnation.0)) << 32 | u64::from(small(sender.incarnation.0))
}

impl Connections {
    /// `receiver` heard from `sender`.
    pub(crate) fn heard(&mut self, receiver: MemberId, sender: MemberId) {
        let (i, j) = (index(receiver), index(sender));
        if i >= self.last.len() {
            self.last.resize_with(i + 1, Vec::new);
            self.by_receiver.resize_with(i + 1, Vec::new);
        }
        let row = &mut self.last[i];
        if j >= row.len() {
            row.resize(j + 1, NONE);
        }
        let pair = incarnations(receiver, sender);
        if row[j] == pair {
            return;
        }
        row[j] = pair;
        let pairs = &mut self.by_receiver[i];
        let key = pair_key(receiver, sender);
        if let Err(at) = pairs.binary_search(&key) {
            pairs.insert(at, key);
        }
    }

    /// Whether `receiver` ever heard from `sender`.
    pub(crate) fn has_heard(&self, receiver: MemberId, sender: MemberId) -> bool {
        let Ok(i) = usize::try_from(receiver.node.0) else {
            return false;
        };
        let last = self.last.get(i).and_then(|row| row.get(index(sender)));
        last == Some(&incarnations(receiver, sender))
            || self
                .by_receiver
                .get(i)
                .is_some_and(|pairs| pairs.binary_search(&pair_key(receiver, sender)).is_ok())
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
    }
}
