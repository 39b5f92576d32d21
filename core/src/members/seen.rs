//! The set of members that have seen a gossip state, with a digest kept up to date as members
//! are added, so that a digest-only gossip round (`GossipStatus`) costs the same whatever the
//! cluster's size.
//!
//! Kept as a sorted vector, not a tree: every full-state message clones the set (a thousand
//! members were a thousand tree-node entries to allocate and copy, one copy per message while a
//! large cluster forms), and the lookups and merges walk it in order. It encodes as the sorted
//! set it is.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize, Serializer};

use crate::id::MemberId;
use crate::members::search;

/// The members that have seen a gossip state (what a `GossipSeen` carries), sorted; encoded
/// as the set it is. Keeps an order-independent digest of them (the xor of a 64-bit mix of
/// each member) and the length of their encoding up to date as members come and go: a
/// digest-only gossip round compares digests, and measuring a frame that carries the set
/// (which the simulator does for every such message) needs no walk of a thousand members.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(from = "BTreeSet<MemberId>")]
pub struct Seen {
    /// Sorted, without repeats. Shared, copied when changed: every whole state sent and every
    /// `GossipSeen` carries a copy of a set a thousand members long, which its sender or its
    /// receiver changes later, if ever.
    members: Arc<Vec<MemberId>>,
    digest: u64,
    /// The bytes the members encode to (the sequence's length prefix aside).
    bytes: usize,
}

/// A member's contribution to the digest (splitmix64's finalizer over its address and
/// incarnation): stable across builds, as anything compared between members must be.
fn mix(id: MemberId) -> u64 {
    let mut z = id.node.0 ^ id.incarnation.0.rotate_left(32) ^ 0x9e37_79b9_7f4a_7c15;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The bytes postcard encodes `n` to (a varint: seven bits a byte).
fn varint_len(n: u64) -> usize {
    let bits = 64 - n.max(1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// The bytes `id` encodes to (its address and incarnation, each a varint).
fn encoded_len_of(id: MemberId) -> usize {
    varint_len(id.node.0) + varint_len(id.incarnation.0)
}

impl Seen {
    /// The digest of the set.
    pub(crate) fn digest(&self) -> u64 {
        self.digest
    }

    /// The bytes the set encodes to, as postcard writes it (a length, then each member).
    pub(crate) fn encoded_len(&self) -> usize {
        varint_len(self.members.len() as u64) + self.bytes
    }

    /// Counts `id` in or out of the digest and the encoded length.
    fn tally(&mut self, id: MemberId, added: bool) {
        self.digest ^= mix(id);
        if added {
            self.bytes += encoded_len_of(id);
        } else {
            self.bytes -= encoded_len_of(id);
        }
    }

    /// The members, in id order.
    pub fn as_slice(&self) -> &[MemberId] {
        &self.members
    }

    /// Whether `id` has seen the state.
    pub(crate) fn contains(&self, id: &MemberId) -> bool {
        search(&self.members, id, |m| m).is_ok()
    }

    /// How many members have seen the state.
    pub(crate) fn len(&self) -> usize {
        self.members.len()
    }

    /// Records that `id` has seen the state.
    pub(crate) fn insert(&mut self, id: MemberId) {
        if let Err(at) = search(&self.members, &id, |m| m) {
            Arc::make_mut(&mut self.members).insert(at, id);
            self.tally(id, true);
        }
    }

    /// The members as a set (tests compare sets).
    #[cfg(test)]
    pub(crate) fn to_set(&self) -> BTreeSet<MemberId> {
        self.members.iter().copied().collect()
    }

    /// Records every member of `ids` (in any order; tests build sets so).
    #[cfg(test)]
    pub(crate) fn extend(&mut self, ids: impl IntoIterator<Item = MemberId>) {
        let mut ids: Vec<MemberId> = ids.into_iter().collect();
        ids.sort_unstable();
        ids.dedup();
        self.merge_sorted(&ids, |_| true);
    }

    /// Records every member of `other` that `keep` accepts (the new ones are asked, in
    /// increasing order).
    pub(crate) fn union_with(&mut self, other: &Self, keep: impl FnMut(&MemberId) -> bool) {
        self.merge_sorted(&other.members, keep);
    }

    /// Records every member of `ids` (sorted, without repeats) that is already here or that
    /// `keep` accepts (asked in increasing order, at most once each), in one walk of both
    /// lists.
    fn merge_sorted(&mut self, ids: &[MemberId], mut keep: impl FnMut(&MemberId) -> bool) {
        // Most unions (a state's seen set adopted from a member that saw it, as our own
        // grows) bring nobody new: a walk that builds nothing finds the first new member, if
        // any. Indexes, not peekable iterators: this walk is a large cluster's hottest loop.
        let ours = &self.members;
        let mut i = 0;
        let first_new = ids.iter().position(|id| {
            while i < ours.len() && ours[i] < *id {
                i += 1;
            }
            if i < ours.len() && ours[i] == *id {
                i += 1;
                return false;
            }
            keep(id)
        });
        let Some(first) = first_new else {
            return;
        };
        // Ours before `i` all precede `ids[first]`; the ids before it are ours or refused.
        let mut merged = Vec::with_capacity(ours.len() + ids.len() - first);
        merged.extend_from_slice(&ours[..i]);
        let (mut digest, mut bytes) = (self.digest, self.bytes);
        for (k, &id) in ids[first..].iter().enumerate() {
            while i < ours.len() && ours[i] < id {
                merged.push(ours[i]);
                i += 1;
            }
            if i < ours.len() && ours[i] == id {
                i += 1;
            } else if k == 0 || keep(&id) {
                digest ^= mix(id);
                bytes += encoded_len_of(id);
            } else {
                continue;
            }
            merged.push(id);
        }
        merged.extend_from_slice(&ours[i..]);
        (self.members, self.digest, self.bytes) = (Arc::new(merged), digest, bytes);
    }

    /// Forgets every member.
    pub(crate) fn clear(&mut self) {
        *self = Self::default();
    }

    /// Keeps only the members `keep` accepts.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&MemberId) -> bool) {
        // Most retains drop nobody: the set is copied only if one goes.
        let Some(first) = self.members.iter().position(|id| !keep(id)) else {
            return;
        };
        let old = std::mem::take(&mut self.members);
        let mut members = Vec::with_capacity(old.len() - 1);
        members.extend_from_slice(&old[..first]);
        self.tally(old[first], false);
        for &id in &old[first + 1..] {
            if keep(&id) {
                members.push(id);
            } else {
                self.tally(id, false);
            }
        }
        self.members = Arc::new(members);
    }
}

impl From<BTreeSet<MemberId>> for Seen {
    fn from(members: BTreeSet<MemberId>) -> Self {
        let mut seen = Self::default();
        for &id in &members {
            seen.tally(id, true);
        }
        seen.members = Arc::new(members.into_iter().collect());
        seen
    }
}

impl Serialize for Seen {
    /// As the sorted set it is (a sequence of members in id order, as a `BTreeSet` encodes).
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.members.iter())
    }
}

impl PartialEq for Seen {
    fn eq(&self, other: &Self) -> bool {
        self.members == other.members
    }
}

impl Eq for Seen {}

#[cfg(feature = "arbitrary")]
impl<'a> arbitrary::Arbitrary<'a> for Seen {
    fn arbitrary(u: &mut arbitrary::Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(Self::from(BTreeSet::<MemberId>::arbitrary(u)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::{Incarnation, NodeId};

    fn member(node: u64, incarnation: u64) -> MemberId {
        MemberId {
            node: NodeId(node),
            incarnation: Incarnation(incarnation),
        }
    }

    #[test]
    fn the_digest_follows_the_set_whatever_the_order() {
        let mut a = Seen::default();
        a.extend([member(1, 1), member(2, 1), member(3, 2)]);
        let mut b = Seen::default();
        b.extend([member(3, 2), member(1, 1), member(2, 1), member(1, 1)]);
        assert_eq!(a.digest(), b.digest());
        assert_ne!(a.digest(), 0);
        b.retain(|id| id.node != NodeId(2));
        assert_ne!(a.digest(), b.digest());
        b.insert(member(2, 1));
        assert_eq!(a.digest(), b.digest());
        // A new incarnation is another member.
        b.insert(member(3, 1));
        assert_ne!(a.digest(), b.digest());
        b.clear();
        assert_eq!(b.digest(), 0);
        assert_eq!(b, Seen::default());
    }

    #[test]
    fn a_decoded_set_has_the_digest_of_its_members() {
        let mut a = Seen::default();
        a.extend([member(7, 3), member(9, 1)]);
        let bytes = postcard::to_allocvec(&a).expect("encodes");
        // On the wire it is just the set.
        assert_eq!(bytes, postcard::to_allocvec(&a.to_set()).expect("encodes"));
        let b: Seen = postcard::from_bytes(&bytes).expect("decodes");
        assert_eq!(b.digest(), a.digest());
        assert_eq!(b, a);
    }

    /// Whatever path built the set (inserts, unions, retains, decoding), the length it keeps
    /// is the length postcard writes, through every varint width and a length prefix of one
    /// byte and of two.
    #[test]
    fn the_encoded_length_kept_is_the_length_written() {
        let written = |s: &Seen| postcard::to_allocvec(s).expect("encodes").len();
        let widths = [0, 1, 127, 128, 16_383, 16_384, 1 << 35, u64::MAX];
        let mut seen = Seen::default();
        assert_eq!(seen.encoded_len(), written(&seen));
        for (i, &node) in widths.iter().enumerate() {
            for &incarnation in &widths {
                seen.insert(member(node, incarnation));
                assert_eq!(seen.encoded_len(), written(&seen), "{node} {incarnation}");
            }
            let mut other = Seen::default();
            other.extend((0..150).map(|n| member(n * (i as u64 + 1), 1)));
            seen.union_with(&other, |id| id.node.0 % 3 != 0);
            assert_eq!(seen.encoded_len(), written(&seen), "after a union");
        }
        assert!(seen.len() > 127, "a two-byte length prefix");
        seen.retain(|id| id.node.0 % 2 == 0);
        assert_eq!(seen.encoded_len(), written(&seen), "after a retain");
        let decoded: Seen =
            postcard::from_bytes(&postcard::to_allocvec(&seen).expect("encodes")).expect("decodes");
        assert_eq!(decoded.encoded_len(), seen.encoded_len(), "decoded");
        seen.clear();
        assert_eq!(seen.encoded_len(), written(&seen), "cleared");
    }

    #[test]
    fn a_union_merged_in_one_walk_equals_one_inserted_member_by_member() {
        let ids = |step: u64, count: u64| -> Vec<MemberId> {
            (0..count).map(|i| member(i * step, 1 + i % 2)).collect()
        };
        // Members of `theirs` that are not ours are taken if `keep` accepts them: all, none,
        // or some (refused ones before, among and after the first one taken).
        let filters: [fn(&MemberId) -> bool; 3] = [|_| true, |_| false, |id| id.node.0 % 4 != 0];
        for keep in filters {
            for (mine, theirs) in [
                (ids(2, 40), ids(3, 30)),
                (ids(1, 5), ids(1, 100)),
                (ids(1, 100), ids(2, 50)),
                (ids(5, 0), ids(7, 20)),
                (ids(1, 20), ids(1, 20)),
                (ids(3, 30), ids(1, 4)),
            ] {
                let (mut merged, mut inserted, mut other) =
                    (Seen::default(), Seen::default(), Seen::default());
                for &id in &mine {
                    merged.insert(id);
                    inserted.insert(id);
                }
                for &id in &theirs {
                    other.insert(id);
                }
                merged.union_with(&other, keep);
                for id in theirs.iter().filter(|id| keep(id)) {
                    inserted.insert(*id);
                }
                assert_eq!(merged, inserted);
                assert_eq!(merged.digest(), inserted.digest());
                assert_eq!(merged.encoded_len(), inserted.encoded_len());
            }
        }
    }
}
