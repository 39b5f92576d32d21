//! Identifier newtypes shared by every role.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// A cluster member's stable address, chosen by the host (the simulator numbers its nodes; the
/// runtime derives it from the configured address). Stable across restarts of that member.
#[derive(Clone, Copy, Debug, Deserialize, Eq, Hash, Ord, PartialEq, PartialOrd, Serialize)]
pub struct NodeId(pub u64);

impl NodeId {
    /// The node id of an advertised address (FNV-1a of its bytes), so that every member
    /// derives the same id for a seed node from its address alone.
    pub fn of_address(address: &str) -> Self {
        Self(crate::fnv::fnv1a(address.as_bytes()))
    }
}

/// One handoff round of a shard at its coordinator (the coordinator's clock at its start
/// plus a count): an acknowledgement of another round is ignored.
#[derive(Clone, Copy, Deserialize, Eq, Hash, Ord, PartialEq, PartialOrd, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct HandoffRound(pub u64);

impl fmt::Debug for HandoffRound {
    /// The bare number, as the wire carries it: traces and logs stay short.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// One statistics query of a coordinator, which the regions' replies name.
#[derive(Clone, Copy, Deserialize, Eq, Hash, Ord, PartialEq, PartialOrd, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct StatsQueryId(pub u64);

impl fmt::Debug for StatsQueryId {
    /// The bare number, as the wire carries it: traces and logs stay short.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Distinguishes successive lives of one [`NodeId`]: a restarted node is a new member.
#[derive(Clone, Copy, Debug, Deserialize, Eq, Hash, Ord, PartialEq, PartialOrd, Serialize)]
pub struct Incarnation(pub u64);

/// The fencing epoch of a shard's allocation: each new allocation of a shard has a higher one,
/// and a remember-entities store refuses writes carrying an epoch older than the newest it has
/// seen for the shard, so an instance of the shard that should no longer exist cannot change
/// its remembered set.
#[derive(Clone, Copy, Debug, Deserialize, Eq, Hash, Ord, PartialEq, PartialOrd, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Epoch(pub u64);

/// One life of one cluster member. Regions and coordinators are addressed by it, so messages
/// meant for an earlier incarnation of a restarted node can be recognised and dropped.
#[derive(Clone, Copy, Debug, Deserialize, Eq, Hash, Ord, PartialEq, PartialOrd, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct MemberId {
    /// The member's stable address.
    pub node: NodeId,
    /// Which life of that address this is.
    pub incarnation: Incarnation,
}

impl MemberId {
    /// Builds a member id from its two parts.
    pub fn new(node: u64, incarnation: u64) -> Self {
        Self {
            node: NodeId(node),
            incarnation: Incarnation(incarnation),
        }
    }
}

/// A shared string newtype's constructor and slice accessor, and its equality, order and hash
/// by contents, equality and order short-cut when both sides share one allocation.
macro_rules! shared_str {
    ($ty:ty, $what:literal) => {
        shared_str!($ty, $what, Arc<str>, |value| value);
    };
    // `$from` is what `new` takes, `$make` makes the shared string of it.
    ($ty:ty, $what:literal, $from:ty, |$value:ident| $make:expr) => {
        impl $ty {
            #[doc = concat!("Builds ", $what, ".")]
            pub fn new(value: impl Into<$from>) -> Self {
                let $value = value.into();
                Self($make)
            }

            #[doc = concat!("The ", $what, " as a string slice.")]
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl From<&str> for $ty {
            fn from(value: &str) -> Self {
                Self::new(value)
            }
        }

        impl From<String> for $ty {
            fn from(value: String) -> Self {
                Self::new(value)
            }
        }

        impl PartialEq for $ty {
            fn eq(&self, other: &Self) -> bool {
                Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
            }
        }

        impl Eq for $ty {}

        impl Ord for $ty {
            fn cmp(&self, other: &Self) -> std::cmp::Ordering {
                if Arc::ptr_eq(&self.0, &other.0) {
                    return std::cmp::Ordering::Equal;
                }
                self.0.cmp(&other.0)
            }
        }

        impl PartialOrd for $ty {
            fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }

        impl std::hash::Hash for $ty {
            fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
                self.0.hash(state);
            }
        }
    };
}

/// Decoding a shared string newtype: the string straight into its shared allocation, or
/// whatever `$make` does with it (serde's own `Arc<str>` decodes into a box first, then copies
/// it into the shared allocation: two allocations per id on every frame).
macro_rules! decoded_str {
    ($ty:ty, $what:literal, $make:expr) => {
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct Visitor;

                impl serde::de::Visitor<'_> for Visitor {
                    type Value = $ty;

                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str($what)
                    }

                    fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<$ty, E> {
                        Ok($make(value))
                    }
                }

                // A newtype of a string is the string on the wire (postcard, JSON).
                deserializer.deserialize_str(Visitor)
            }
        }
    };
}

/// The name of an entity type; one region per node and one coordinator per cluster serve it.
/// Shared, not copied: every message and entity effect names its type, so a clone is a
/// reference count, not an allocation, and comparing two clones of one name is a pointer
/// comparison. On the wire it is a plain string.
#[derive(Clone, Debug, Serialize)]
pub struct EntityType(Arc<str>);

shared_str!(EntityType, "an entity type name");
decoded_str!(EntityType, "an entity type name", intern_type_name);

/// Most type names kept for reuse per thread (see [`intern_type_name`]).
const TYPE_NAMES_KEPT: usize = 32;

std::thread_local! {
    /// Type names this thread decoded: a node serves a handful of types and every message it
    /// receives names one, so decoding one is a lookup rather than an allocation. Bounded: a
    /// peer making names up costs an allocation per name, as without the table.
    static TYPE_NAMES: std::cell::RefCell<Vec<EntityType>> = const {
        std::cell::RefCell::new(Vec::new())
    };
}

/// The type name `name`, shared with an earlier decoding of the same name on this thread.
fn intern_type_name(name: &str) -> EntityType {
    TYPE_NAMES.with(|names| {
        let mut names = names.borrow_mut();
        if let Some(known) = names.iter().find(|known| known.as_str() == name) {
            return known.clone();
        }
        let fresh = EntityType::from(name);
        if names.len() < TYPE_NAMES_KEPT {
            names.push(fresh.clone());
        }
        fresh
    })
}

/// The id of one entity within its type. Its UTF-8 bytes feed [`crate::shard_of`]. Shared
/// like [`EntityType`]: cloning it (into effects, maps, forwarded messages) never allocates.
#[derive(Clone, Debug, Serialize)]
pub struct EntityId(Arc<str>);

shared_str!(EntityId, "an entity id");
decoded_str!(EntityId, "an entity id", EntityId::from);

/// Where a member can be reached, in the host's own terms (`"10.0.0.7:7355"` for the runtime,
/// `"node-3.sim:7355"` in the simulator). The core never interprets it: membership carries it (seed nodes,
/// joins, gossip) so a node can dial a member it learned of from others, and every
/// [`crate::Transmit`] names its receiver's. Shared like [`EntityType`], behind a one-word
/// pointer (the string's own pointer and length live with the count): a node keeps an
/// address in its record of every peer, read on every envelope, and the record fits one
/// cache line with a word less.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Address(Arc<Box<str>>);

shared_str!(Address, "an address", Box<str>, |value| Arc::new(value));

impl Address {
    /// The address hosts without a network use for `node`: `"n<node>"` (the core's tests'
    /// convention, and [`crate::Config::new`]'s default).
    pub fn of_node(node: NodeId) -> Self {
        Self::new(format!("n{}", node.0))
    }
}

/// A shard of one entity type, `0..number_of_shards`, computed by [`crate::shard_of`].
#[derive(Clone, Copy, Debug, Deserialize, Eq, Hash, Ord, PartialEq, PartialOrd, Serialize)]
pub struct ShardId(pub u32);

/// Correlates a host's command with the [`crate::Event::Reply`] that answers it. Chosen by the
/// host and echoed back; the core never interprets it.
#[derive(Clone, Copy, Debug, Deserialize, Eq, Hash, Ord, PartialEq, PartialOrd, Serialize)]
pub struct RequestId(pub u64);

/// A member's application version (Akka's `app-version`); allocation prefers newer versions
/// and rebalancing pauses while versions are mixed. Compared lexicographically.
#[derive(
    Clone, Copy, Debug, Default, Deserialize, Eq, Hash, Ord, PartialEq, PartialOrd, Serialize,
)]
pub struct AppVersion(pub u32, pub u32, pub u32);

macro_rules! display_as {
    ($ty:ty, $fmt:literal, $($field:tt)+) => {
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, $fmt, self.$($field)+)
            }
        }
    };
}

display_as!(NodeId, "n{}", 0);
display_as!(ShardId, "s{}", 0);
display_as!(EntityType, "{}", 0);
display_as!(EntityId, "{}", 0);
display_as!(Address, "{}", 0);
display_as!(RequestId, "req{}", 0);

impl fmt::Display for MemberId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}#{}", self.node.0, self.incarnation.0)
    }
}

impl fmt::Display for AppVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// A lease's revision in its store: larger for every new holder (a renewal keeps it). Writes
/// made under a lease carry it, and a store refuses one older than the newest it has seen.
#[derive(
    Clone, Copy, Debug, Default, Deserialize, Eq, Hash, Ord, PartialEq, PartialOrd, Serialize,
)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct FencingToken(pub u64);

/// A seed node: its stable node id and where to reach it.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct SeedNode {
    /// The seed's node id (its `InitJoin` goes to whichever incarnation runs there).
    pub node: NodeId,
    /// Where to reach it.
    pub address: Address,
}

impl SeedNode {
    /// A seed reached at `address`.
    pub fn new(node: NodeId, address: Address) -> Self {
        Self { node, address }
    }
}

impl From<NodeId> for SeedNode {
    /// The seed at [`Address::of_node`] (hosts without a network).
    fn from(node: NodeId) -> Self {
        Self::new(node, Address::of_node(node))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::hash_map::DefaultHasher;
    use std::hash::{Hash, Hasher};

    fn hash(id: &EntityId) -> u64 {
        let mut h = DefaultHasher::new();
        id.hash(&mut h);
        h.finish()
    }

    #[test]
    fn shared_strings_compare_and_hash_by_contents() {
        let a = EntityId::new("user-1");
        let same_allocation = a.clone();
        let same_text = EntityId::new(String::from("user-1"));
        let other = EntityId::new("user-2");
        assert_eq!(a, same_allocation);
        assert_eq!(a, same_text);
        assert_eq!(hash(&a), hash(&same_text));
        assert!(a < other && other > same_text);
        assert_eq!(a.cmp(&same_allocation), std::cmp::Ordering::Equal);
        assert_ne!(EntityType::new("a"), EntityType::new("b"));
    }

    #[test]
    fn decoded_type_names_are_shared_and_ids_decode_as_they_were_encoded() {
        let encode = |name: &str| postcard::to_allocvec(&EntityType::new(name)).unwrap();
        let decode = |bytes: &[u8]| postcard::from_bytes::<EntityType>(bytes).unwrap();
        let (first, second) = (decode(&encode("orders")), decode(&encode("orders")));
        assert_eq!(first.as_str(), "orders");
        assert!(Arc::ptr_eq(&first.0, &second.0), "one allocation for both");
        let id = EntityId::new("basket-7");
        let bytes = postcard::to_allocvec(&id).unwrap();
        assert_eq!(postcard::from_bytes::<EntityId>(&bytes).unwrap(), id);
    }

    #[test]
    fn made_up_type_names_are_not_kept_past_the_bound() {
        for n in 0..(TYPE_NAMES_KEPT + 10) {
            let bytes = postcard::to_allocvec(&EntityType::new(format!("made-up-{n}"))).unwrap();
            let decoded = postcard::from_bytes::<EntityType>(&bytes).unwrap();
            assert_eq!(decoded.as_str(), format!("made-up-{n}"));
        }
        TYPE_NAMES.with(|names| assert!(names.borrow().len() <= TYPE_NAMES_KEPT));
    }
}
