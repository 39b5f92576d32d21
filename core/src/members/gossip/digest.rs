//! Digests of the gossiped state, for gossip rounds that send digests instead of the state
//! (Akka's `GossipStatus`): the state's digest (cached until the next change, folded from its
//! members' digests, each kept with its member), the seen set's, what an exchange of digests
//! finds, and the stamps a member names its own states by.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::{Gossip, GossipMember};
use crate::id::MemberId;
use crate::members::{MembershipView, Seen};

/// A digest of a gossip's state (members, removed members, reachability; not the seen set):
/// two 64-bit hashes of its wire encoding, FNV-1a over each member's encoding folded together
/// in id order, then on over the rest. Members that hold equal digests hold the same state, so
/// a gossip round between them sends digests instead of the state (Akka's `GossipStatus`).
#[derive(Clone, Copy, Debug, Default, Deserialize, Eq, Hash, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct StateDigest(pub u64, pub u64);

/// A name a member gives each state it holds, from a counter of its own, when first asked
/// (`Gossip::stamp`): two equal stamps of one member name the same state. What a member
/// works out from its state alone (the leader's actions, whom to gossip and heartbeat to, its
/// view) is kept under the state's stamp rather than its digest, which walks every member's
/// encoding: a forming cluster's member holds a new state after nearly every message, and most
/// of those states are never compared with a peer's.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub(crate) struct StateStamp(u64);

/// A cached [`StateDigest`], with the length of the state's encoding it was taken over, the
/// view built from the state (a function of it, as the digest is) and the state's stamp: not
/// part of the state, so any two caches compare equal. Every change of the state clears it.
#[derive(Clone, Debug, Default)]
pub(super) struct DigestCache {
    /// The state's digest.
    pub(super) state: Option<StateDigest>,
    /// The state's stamp, given by the member holding it (a state adopted from a peer comes
    /// without one: the peer's stamps name its own states).
    pub(super) stamp: Option<StateStamp>,
    /// The length of the state's encoding, counted with the digest.
    len: usize,
    /// The view built from the state (`Gossip::view`).
    pub(super) view: Option<MembershipView>,
}

impl PartialEq for DigestCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for DigestCache {}

/// The FNV-1a bases of the digest's two hashes.
const BASES: (u64, u64) = (0xcbf2_9ce4_8422_2325, 0x6c62_272e_07bb_0142);

/// Two 64-bit FNV-1a hashes of the bytes a postcard serializer writes, taken as they are
/// written (a large cluster's state is not copied into a buffer to be hashed): stable across
/// builds and platforms, as anything compared between members must be. Counts the bytes too.
struct Fnv1a(u64, u64, usize);

impl postcard::ser_flavors::Flavor for Fnv1a {
    type Output = (StateDigest, usize);

    fn try_push(&mut self, byte: u8) -> postcard::Result<()> {
        let mix = |h: u64| (h ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        (self.0, self.1) = (mix(self.0), mix(self.1));
        self.2 += 1;
        Ok(())
    }

    fn finalize(self) -> postcard::Result<(StateDigest, usize)> {
        Ok((StateDigest(self.0, self.1), self.2))
    }
}

/// The digest of one member's encoding and its length, worked out once per member: a member
/// is shared (behind an `Arc`) by every state that lists it as it is, so a state's digest
/// folds a thousand known member digests rather than hashing a thousand encodings byte by
/// byte (a forming cluster's leader digests a new state at every join). Not part of the
/// member: any two compare equal; every change of the member forgets it
/// (`GossipMember::edit`).
#[derive(Clone, Debug, Default)]
pub(super) struct EncodingDigest(OnceLock<(u64, u64, usize)>);

impl PartialEq for EncodingDigest {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for EncodingDigest {}

impl GossipMember {
    /// The digest of this member's encoding as its state's map encodes it (its id, then the
    /// member), and the encoding's length.
    fn encoding_digest(&self) -> (u64, u64, usize) {
        let fresh = || {
            let (digest, len) = fnv1a(&(self.id, self), BASES);
            (digest.0, digest.1, len)
        };
        let known = *self.encoding.0.get_or_init(fresh);
        debug_assert_eq!(known, fresh(), "a member's known digest is its encoding's");
        known
    }
}

/// Two FNV-1a hashes of `value`'s encoding, from `bases`, and the encoding's length.
fn fnv1a<T: Serialize + ?Sized>(value: &T, bases: (u64, u64)) -> (StateDigest, usize) {
    // Serializing these types cannot fail; the digest of no bytes would only make every
    // status exchange fall back to full gossip.
    postcard::serialize_with_flavor(value, Fnv1a(bases.0, bases.1, 0))
        .unwrap_or((StateDigest(bases.0, bases.1), 0))
}

/// Folds a member's digest into a running hash: xor, then an odd multiply and a shift (each
/// a bijection, so two folds of different digests from one hash never give the same hash).
fn fold(hash: u64, member: u64) -> u64 {
    let h = (hash ^ member).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^ (h >> 32)
}

/// What a digest exchange (a received `GossipStatus`) found.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub(crate) enum StatusMatch {
    /// Same state, same seen set: nothing to exchange.
    InSync,
    /// Same state (the sender has now been recorded as having seen it), different seen sets.
    SeenDiffers,
    /// Different states: the full states must be exchanged.
    StateDiffers,
}

impl Gossip {
    /// The digest of the state (computed once per change).
    pub(crate) fn digest(&mut self) -> StateDigest {
        if let Some(digest) = self.digest.state {
            return digest;
        }
        // The members as their map encodes: its length, then each member's digest folded in
        // (its encoding's length counted); then the rest, byte by byte.
        let (count, mut len) = fnv1a(&self.members.len(), BASES);
        let (mut h0, mut h1) = (count.0, count.1);
        for member in self.members.values() {
            let (m0, m1, member_len) = member.encoding_digest();
            (h0, h1, len) = (fold(h0, m0), fold(h1, m1), len + member_len);
        }
        let (digest, rest_len) = fnv1a(&(&self.removed, &self.reachability), (h0, h1));
        (self.digest.state, self.digest.len) = (Some(digest), len + rest_len);
        digest
    }

    /// This state's stamp: the one it was given, or the next of `counter` (this member's).
    pub(crate) fn stamp(&mut self, counter: &mut u64) -> StateStamp {
        *self.digest.stamp.get_or_insert_with(|| {
            *counter += 1;
            StateStamp(*counter)
        })
    }

    /// The length of this gossip's encoding, if its digest is known (the state's length was
    /// counted with it, the seen set keeps its own): hosts that measure frames without
    /// building them (`codec::frame_len`) need not walk a large cluster's state again.
    pub(crate) fn encoded_len(&self) -> Option<usize> {
        self.digest.state?;
        Some(self.digest.len + self.seen.encoded_len())
    }

    /// A digest of the seen set.
    pub(crate) fn seen_digest(&self) -> u64 {
        self.seen.digest()
    }

    /// Takes in a digest exchange from `from`: equal state digests mean `from` holds this
    /// state, so it has seen it.
    pub(crate) fn receive_status(
        &mut self,
        from: MemberId,
        state: StateDigest,
        seen: u64,
    ) -> StatusMatch {
        if self.digest() != state {
            return StatusMatch::StateDiffers;
        }
        if self.members.contains_key(&from) {
            self.seen.insert(from);
        }
        if self.seen_digest() == seen {
            StatusMatch::InSync
        } else {
            StatusMatch::SeenDiffers
        }
    }

    /// Takes in who has seen the state with digest `state`, if it is ours: whether our seen
    /// set grew, and whether it holds members `seen` lacks.
    pub(crate) fn receive_seen(&mut self, state: StateDigest, seen: &Seen) -> (bool, bool) {
        if self.digest() != state {
            return (false, false);
        }
        let before = self.seen.len();
        self.take_in_seen(seen);
        (self.seen.len() != before, self.seen.len() != seen.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn the_digest_is_fnv1a_of_the_encoding() {
        // Digests are compared between members: the hashes must be FNV-1a of exactly the bytes
        // postcard writes (a state's digest folds those of its members' encodings), however
        // they are streamed.
        let value = (
            vec![1_u64, 300, u64::MAX],
            "a member",
            BTreeSet::from([7_u32, 9]),
        );
        let bytes = postcard::to_allocvec(&value).expect("encodes");
        let fnv = |basis: u64| {
            bytes.iter().fold(basis, |h, b| {
                (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
            })
        };
        let streamed = postcard::serialize_with_flavor(&value, Fnv1a(BASES.0, BASES.1, 0));
        let expected = (StateDigest(fnv(BASES.0), fnv(BASES.1)), bytes.len());
        assert_eq!(
            streamed.ok(),
            Some(expected),
            "the digest, and the bytes counted"
        );
    }
}
