//! Which member heard from which: a member that received from another holds a connection it
//! can answer on without knowing the other's address, as a real transport does. Looked up for
//! every envelope received, so kept per receiving address as a short sorted list rather than
//! one large set.

use shoal_core::MemberId;

/// (receiver, sender) pairs, by the receiver's address, each packed into one sorted integer
/// (see [`pair_key`]): a lookup is a binary search over plain integers.
#[derive(Debug, Default)]
pub(crate) struct Connections {
    by_receiver: Vec<Vec<u128>>,
}

/// The receiver's incarnation, the sender's address and the sender's incarnation, in one key
/// (the receiver's address is the list's index). Simulated incarnations are small.
fn pair_key(receiver: MemberId, sender: MemberId) -> u128 {
    let small = |n: u64| u128::from(u32::try_from(n).expect("simulated incarnations are small"));
    small(receiver.incarnation.0) << 96
        | u128::from(sender.node.0) << 32
        | small(sender.incarnation.0)
}

impl Connections {
    /// `receiver` heard from `sender`.
    pub(crate) fn heard(&mut self, receiver: MemberId, sender: MemberId) {
        let i = usize::try_from(receiver.node.0).expect("simulated addresses are small");
        if i >= self.by_receiver.len() {
            self.by_receiver.resize_with(i + 1, Vec::new);
        }
        let pairs = &mut self.by_receiver[i];
        let key = pair_key(receiver, sender);
        if let Err(at) = pairs.binary_search(&key) {
            pairs.insert(at, key);
        }
    }

    /// Whether `receiver` ever heard from `sender`.
    pub(crate) fn has_heard(&self, receiver: MemberId, sender: MemberId) -> bool {
        let i = usize::try_from(receiver.node.0).unwrap_or(usize::MAX);
        self.by_receiver
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
    }
}
