//! `arbitrary::Arbitrary` for the wire and input types, for the structure-aware fuzz targets
//! (feature `arbitrary`, never enabled by the runtime).
//!
//! Identifiers are drawn from small domains on purpose: a state machine only reaches its
//! interesting states when the same few members, shards and entities recur, which uniformly
//! random `u64`s would almost never do. A few values just outside the usual ranges (shards past
//! a small `number_of_shards`, unknown entity types) keep bad input in the mix.

use std::sync::Arc;

use arbitrary::{Arbitrary, Result, Unstructured};

use crate::id::{
    Address, AppVersion, EntityId, EntityType, Incarnation, NodeId, RequestId, ShardId,
};
use crate::members::{Member, MembershipView};
use crate::message::Payload;

/// Entity types the fuzz targets configure, plus one no node serves.
pub const FUZZ_ENTITY_TYPES: [&str; 3] = ["counter", "ledger", "unknown"];

/// Shards `0..FUZZ_SHARDS` are what fuzzed identifiers usually name; targets configure fewer
/// so that out-of-range shards occur.
pub const FUZZ_SHARDS: u32 = 12;

impl<'a> Arbitrary<'a> for NodeId {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(Self(u.int_in_range(0..=6)?))
    }
}

impl<'a> Arbitrary<'a> for Incarnation {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(Self(u.int_in_range(0..=3)?))
    }
}

impl<'a> Arbitrary<'a> for ShardId {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(Self(u.int_in_range(0..=FUZZ_SHARDS - 1)?))
    }
}

impl<'a> Arbitrary<'a> for RequestId {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(Self(u.int_in_range(0..=15)?))
    }
}

impl<'a> Arbitrary<'a> for AppVersion {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(Self(u.int_in_range(0..=2)?, u.int_in_range(0..=2)?, 0))
    }
}

impl<'a> Arbitrary<'a> for EntityType {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(Self::new(*u.choose(&FUZZ_ENTITY_TYPES)?))
    }
}

impl<'a> Arbitrary<'a> for Address {
    /// Mostly the address of a small node id, so addresses and members agree; sometimes any
    /// string.
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        if u.ratio(1, 16)? {
            return Ok(Self::new(<&str>::arbitrary(u)?));
        }
        Ok(Self::of_node(NodeId::arbitrary(u)?))
    }
}

impl<'a> Arbitrary<'a> for EntityId {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        // Mostly a few dozen recurring ids; sometimes any string (empty, long, odd bytes).
        if u.ratio(1, 16)? {
            return Ok(Self::new(Arc::<str>::from(<&str>::arbitrary(u)?)));
        }
        Ok(Self::new(format!("e{}", u.int_in_range(0..=40)?)))
    }
}

impl<'a> Arbitrary<'a> for Payload {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(Self(<&[u8]>::arbitrary(u)?.to_vec()))
    }
}

impl<'a> Arbitrary<'a> for MembershipView {
    /// Through [`MembershipView::new`], as every host builds views.
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(Self::new(Vec::<Member>::arbitrary(u)?))
    }
}
