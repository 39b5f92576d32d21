//! Cluster membership: the view the sharding roles consume ([`MembershipView`]), and the
//! membership state machine that produces it from gossip, failure detection and downing.

mod detector;
mod downing;
mod gossip;
mod lease;
mod machine;
mod message;
mod reachability;
mod search;
mod seen;
mod settings;
mod view;

pub use gossip::{Gossip, GossipMember, StateDigest};
pub use lease::{LeaseEvent, LeaseRequest, LeaseSettings};
pub(crate) use machine::Membership;
pub use machine::Phase;
pub use message::ClusterMessage;
pub use seen::Seen;
pub use settings::{Downing, FailureDetectorSettings, MembershipSettings, SeedNode};
pub use view::{Member, MemberStatus, MembershipView};
