//! The membership state machine: joining through seed nodes, gossiping the membership state
//! (`crate::members`), failure detection, downing, and leaving. The node runs it when it
//! manages membership itself and hands the resulting [`MembershipView`](crate::MembershipView)
//! to its sharding roles.

mod bootstrap;
mod detector;
mod downing;
mod machine;
mod settings;

pub(crate) use machine::Membership;
pub use machine::Phase;
pub use settings::{BootstrapSettings, Downing, FailureDetectorSettings, MembershipSettings};
