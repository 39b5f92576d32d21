//! Membership for the figures' clusters on loopback: failures noticed within about a second,
//! keep-majority downing after 2 s of stable unreachability. Shared by the code that measures
//! (`remember_recovery` and the bench binary of `shoal-tests`, included with `#[path]`).

use std::time::Duration;

use shoal::{Downing, FailureDetectorSettings, MembershipSettings};

/// Fast gossip and failure detection, quick downing.
pub(crate) fn quick_membership() -> MembershipSettings {
    let mut membership = MembershipSettings::new(Vec::<shoal_core::SeedNode>::new());
    membership.gossip_interval = Duration::from_millis(200);
    membership.heartbeat_interval = Duration::from_millis(200);
    membership.failure_detector = FailureDetectorSettings {
        acceptable_heartbeat_pause: Duration::from_secs(1),
        first_heartbeat_estimate: Duration::from_millis(200),
        ..FailureDetectorSettings::default()
    };
    membership.downing = Downing::KeepMajority {
        stable_after: Duration::from_secs(2),
    };
    membership
}
