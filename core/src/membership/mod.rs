//! Cluster membership: the view the sharding roles consume ([`MembershipView`]), and the
//! membership state machine that produces it from gossip, failure detection and downing.

mod gossip;
mod reachability;
mod view;

pub use gossip::{Gossip, GossipMember};
pub use view::{Member, MemberStatus, MembershipView};
