//! Who is in the cluster: the membership state that nodes gossip (Akka's `Gossip`: members
//! with their status, reachability observations, who has seen the state) and the
//! [`MembershipView`] of it that the sharding roles read. Plain data with its pure
//! transitions (merge, leader actions, digests); the state machine that runs the protocol is
//! `crate::membership`.

mod gossip;
mod reachability;
mod search;
mod seen;
mod view;

pub use gossip::{Gossip, GossipMember, StateDigest};
pub(crate) use gossip::{Received, StateStamp, StatusMatch};
pub(crate) use search::{search, search_from};
pub use seen::Seen;
pub use view::{Member, MemberStatus, MembershipView};
