//! Membership settings, with Akka's defaults (`akka.cluster.*`, and the split brain
//! resolver's `keep-majority` with `stable-after = 20s`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;
use crate::id::{AppVersion, SeedNode};

/// How this member joins, gossips, detects failures and downs unreachable members. Set as
/// `Config::membership`; without it the host supplies membership views itself
/// (`Input::MembershipChanged`).
#[derive(Clone, Debug, Deserialize, PartialEq, Serialize)]
pub struct MembershipSettings {
    /// Members to join through. The first one may form a new cluster when no other seed
    /// answers within `seed_node_timeout`; the others keep trying until one answers.
    pub seed_nodes: Vec<SeedNode>,
    /// This member's application version: allocation prefers the newest, and rebalancing
    /// waits while versions are mixed (rolling updates).
    pub app_version: AppVersion,
    /// Joining members become Up only once this many members are known (Akka's
    /// `min-nr-of-members`).
    pub min_nr_of_members: usize,
    /// Joining members become Up only once, for each role listed, this many members with it
    /// are known (Akka's `role.<name>.min-nr-of-members`).
    pub min_nr_of_members_per_role: BTreeMap<String, usize>,
    /// How often the membership state is gossiped to a random member.
    pub gossip_interval: Duration,
    /// How often monitored members are sent a heartbeat.
    pub heartbeat_interval: Duration,
    /// How many members monitor each member (Akka's `monitored-by-nr-of-members`).
    pub monitored_by: usize,
    /// The phi-accrual failure detector.
    pub failure_detector: FailureDetectorSettings,
    /// How long the first seed waits for the other seeds before forming a new cluster itself.
    pub seed_node_timeout: Duration,
    /// Whether this node, as the first seed, may form a new cluster when no other seed
    /// answers: true when a cluster is first bootstrapped, false when a node restarts (a
    /// restarted first seed that cannot reach the others, say during a partition, must not
    /// form a second cluster next to the first).
    pub may_form_cluster: bool,
    /// How long a joining node waits for an answer before asking the seeds again.
    pub retry_join_after: Duration,
    /// What to do about members that stay unreachable.
    pub downing: Downing,
    /// Bootstrapping from contacts the host discovers (DNS) instead of a seed list: without a
    /// cluster among them, the lowest of them forms one (see [`BootstrapSettings`]). Seed
    /// nodes may then be left empty; any listed are probed like discovered contacts.
    #[serde(default)]
    pub bootstrap: Option<BootstrapSettings>,
}

/// Bootstrapping from discovered contacts (`MembershipSettings::bootstrap`).
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
pub struct BootstrapSettings {
    /// How many contacts (this node included) must be known before one may form a cluster:
    /// more than half of the nodes that may form (the initial replica count is safe), so
    /// that two groups that do not see each other cannot both form.
    pub required_contacts: usize,
    /// How long the known contacts must stay the same before the lowest forms: time for a
    /// burst of starting pods to see each other, so that the lowest of all usually forms.
    pub stable_margin: Duration,
    /// How often each known contact is asked whether it is in a cluster.
    pub probe_interval: Duration,
}

impl BootstrapSettings {
    /// `required_contacts` known contacts, Akka's stable margin (5 s) and probe interval (1 s).
    pub fn new(required_contacts: usize) -> Self {
        Self {
            required_contacts,
            stable_margin: Duration::from_secs(5),
            probe_interval: Duration::from_secs(1),
        }
    }
}

impl MembershipSettings {
    /// Akka's defaults, joining through `seed_nodes` (a [`NodeId`](crate::NodeId) alone stands for the seed
    /// at [`Address::of_node`](crate::Address::of_node)).
    pub fn new(seed_nodes: impl IntoIterator<Item = impl Into<SeedNode>>) -> Self {
        Self {
            seed_nodes: seed_nodes.into_iter().map(Into::into).collect(),
            app_version: AppVersion::default(),
            min_nr_of_members: 1,
            min_nr_of_members_per_role: BTreeMap::new(),
            gossip_interval: Duration::from_secs(1),
            heartbeat_interval: Duration::from_secs(1),
            monitored_by: 9,
            failure_detector: FailureDetectorSettings::default(),
            seed_node_timeout: Duration::from_secs(5),
            may_form_cluster: true,
            retry_join_after: Duration::from_secs(10),
            downing: Downing::KeepMajority {
                stable_after: Duration::from_secs(20),
            },
            bootstrap: None,
        }
    }

    /// For a cluster on one machine or a fast LAN: gossip and heartbeats every 200 ms, a
    /// failure noticed within about a second, keep-majority downing after 2 s of stable
    /// unreachability (Akka's defaults, [`MembershipSettings::new`], take about 25 s).
    pub fn lan(seed_nodes: impl IntoIterator<Item = impl Into<SeedNode>>) -> Self {
        let mut settings = Self::new(seed_nodes);
        settings.gossip_interval = Duration::from_millis(200);
        settings.heartbeat_interval = Duration::from_millis(200);
        settings.failure_detector = FailureDetectorSettings {
            acceptable_heartbeat_pause: Duration::from_secs(1),
            first_heartbeat_estimate: Duration::from_millis(200),
            ..FailureDetectorSettings::default()
        };
        settings.downing = Downing::KeepMajority {
            stable_after: Duration::from_secs(2),
        };
        settings
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        match &self.bootstrap {
            None if self.seed_nodes.is_empty() => return Err(ConfigError::NoSeedNodes),
            Some(b) if b.required_contacts == 0 => {
                return Err(ConfigError::InvalidMembership(
                    "bootstrap.required_contacts must be at least 1",
                ));
            }
            Some(b) if b.probe_interval.is_zero() => {
                return Err(ConfigError::ZeroDuration("bootstrap.probe_interval"));
            }
            _ => {}
        }
        let durations = [
            ("gossip_interval", self.gossip_interval),
            ("heartbeat_interval", self.heartbeat_interval),
            ("seed_node_timeout", self.seed_node_timeout),
            ("retry_join_after", self.retry_join_after),
            (
                "failure_detector.acceptable_heartbeat_pause",
                self.failure_detector.acceptable_heartbeat_pause,
            ),
            (
                "failure_detector.min_std_deviation",
                self.failure_detector.min_std_deviation,
            ),
            (
                "failure_detector.first_heartbeat_estimate",
                self.failure_detector.first_heartbeat_estimate,
            ),
        ];
        if let Some((name, _)) = durations.iter().find(|(_, d)| d.is_zero()) {
            return Err(ConfigError::ZeroDuration(name));
        }
        if self.min_nr_of_members == 0 || self.min_nr_of_members_per_role.values().any(|n| *n == 0)
        {
            return Err(ConfigError::ZeroMinMembers);
        }
        if self.monitored_by == 0 || self.failure_detector.max_sample_size == 0 {
            return Err(ConfigError::InvalidMembership(
                "monitored_by and failure_detector.max_sample_size must be at least 1",
            ));
        }
        let threshold = self.failure_detector.threshold;
        if !threshold.is_finite() || threshold <= 0.0 {
            return Err(ConfigError::InvalidMembership(
                "failure_detector.threshold must be a positive number",
            ));
        }
        if self.downing.stable_after().is_some_and(|d| d.is_zero()) {
            return Err(ConfigError::ZeroDuration("downing.stable_after"));
        }
        match self.downing {
            Downing::StaticQuorum { quorum_size: 0, .. } => Err(ConfigError::InvalidMembership(
                "downing.quorum_size must be at least 1",
            )),
            Downing::LeaseMajority {
                stable_after,
                acquire_delay_for_minority,
                lease_ttl,
            } if lease_ttl < stable_after * 2 + acquire_delay_for_minority => {
                Err(ConfigError::InvalidMembership(
                    "downing.lease_ttl must be at least twice stable_after plus acquire_delay_for_minority",
                ))
            }
            _ => Ok(()),
        }
    }
}

/// The phi-accrual failure detector's settings (Akka's `akka.cluster.failure-detector`).
#[derive(Clone, Debug, Deserialize, PartialEq, Serialize)]
pub struct FailureDetectorSettings {
    /// Suspicion level above which a member is unreachable.
    pub threshold: f64,
    /// Heartbeats may be late by this much without raising suspicion (pauses, GC).
    pub acceptable_heartbeat_pause: Duration,
    /// Floor of the standard deviation of heartbeat intervals.
    pub min_std_deviation: Duration,
    /// How many intervals the detector remembers.
    pub max_sample_size: usize,
    /// The interval assumed before any was measured.
    pub first_heartbeat_estimate: Duration,
}

impl Default for FailureDetectorSettings {
    fn default() -> Self {
        Self {
            threshold: 8.0,
            acceptable_heartbeat_pause: Duration::from_secs(3),
            min_std_deviation: Duration::from_millis(100),
            max_sample_size: 1000,
            first_heartbeat_estimate: Duration::from_secs(1),
        }
    }
}

/// What to do about members that stay unreachable (Akka's split brain resolver).
#[derive(Clone, Copy, Debug, Deserialize, Eq, PartialEq, Serialize)]
pub enum Downing {
    /// Once reachability has been stable for `stable_after`, the side holding a majority of
    /// the Up and Leaving members downs the unreachable ones; a tie goes to the side holding
    /// the lowest address; a minority side downs itself.
    KeepMajority {
        /// How long reachability must stay unchanged before deciding.
        stable_after: Duration,
    },
    /// **Unsafe.** Every side downs every member it cannot reach once reachability has been
    /// stable for `after`: a partition splits the cluster in two, each running every entity.
    /// Exists as the simulator's negative control; never use it in production.
    AutoDown {
        /// How long reachability must stay unchanged before downing.
        after: Duration,
    },
    /// Once reachability has been stable for `stable_after`, the side holding at least
    /// `quorum_size` members survives and the other downs itself. For a cluster of a fixed
    /// size: with more than `2 × quorum_size − 1` members, two sides could each hold a quorum,
    /// so then every side downs itself.
    StaticQuorum {
        /// How long reachability must stay unchanged before deciding.
        stable_after: Duration,
        /// How many members a side must hold to survive (at least 1).
        quorum_size: usize,
    },
    /// Once reachability has been stable for `stable_after`, the side holding the oldest
    /// member (where the coordinators run: they do not move) survives and the other downs
    /// itself, however small the oldest's side is. If the oldest crashes, the others down
    /// themselves, unless `down_if_alone`: then an oldest member cut off from all the others
    /// downs itself and they keep going (with more than two members).
    KeepOldest {
        /// How long reachability must stay unchanged before deciding.
        stable_after: Duration,
        /// An oldest member alone on its side downs itself, and the others survive.
        down_if_alone: bool,
    },
    /// Once reachability has been stable for `stable_after`, the leader of each side asks the
    /// lease store for the cluster's downing lease (the side without a majority only after
    /// `acquire_delay_for_minority`, so that the majority usually wins): the side whose leader
    /// gets it downs the members it cannot reach, the other downs itself at the unstable bound
    /// (it still sees the winners unreachable). Where the other strategies down every member
    /// when reachability keeps changing, a leader asks for the lease once someone has been
    /// unreachable for 5/4 of `stable_after`, stable or not, and its side survives, downing
    /// the members cut off for `stable_after` at least (the others once they are). Any side
    /// may survive, a minority or one of three, as long as it reaches the store; a store that
    /// fails or cannot be reached downs the side that asked. Needs a lease store on the host.
    LeaseMajority {
        /// How long reachability must stay unchanged before deciding.
        stable_after: Duration,
        /// How long the side without a majority waits before asking for the lease.
        acquire_delay_for_minority: Duration,
        /// How long a grant lasts (Akka's `release-after`): at least twice `stable_after` and
        /// the delay, so that the other side's leader, which asks within that of the partition
        /// beginning, is refused.
        lease_ttl: Duration,
    },
    /// Once reachability has been stable for `stable_after` with some member unreachable,
    /// every member downs itself: for a cluster that a platform restarts as a whole, where a
    /// fresh start is better than any side going on alone.
    DownAll {
        /// How long reachability must stay unchanged before deciding.
        stable_after: Duration,
    },
    /// Never down anyone automatically (an operator downs members).
    Off,
}

impl Downing {
    /// How long reachability must stay unchanged before a decision (`None`: never decides).
    pub fn stable_after(&self) -> Option<Duration> {
        match *self {
            Self::KeepMajority { stable_after }
            | Self::StaticQuorum { stable_after, .. }
            | Self::KeepOldest { stable_after, .. }
            | Self::DownAll { stable_after }
            | Self::LeaseMajority { stable_after, .. }
            | Self::AutoDown {
                after: stable_after,
            } => Some(stable_after),
            Self::Off => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::{Address, NodeId};

    fn with(downing: Downing) -> Result<(), ConfigError> {
        let mut settings =
            MembershipSettings::new([SeedNode::new(NodeId(1), Address::new("127.0.0.1:1"))]);
        settings.downing = downing;
        settings.validate()
    }

    #[test]
    fn every_strategy_needs_a_stable_after_and_a_quorum_of_one_at_least() {
        let second = Duration::from_secs(1);
        assert!(
            with(Downing::StaticQuorum {
                stable_after: second,
                quorum_size: 1
            })
            .is_ok()
        );
        assert_eq!(
            with(Downing::StaticQuorum {
                stable_after: second,
                quorum_size: 0
            }),
            Err(ConfigError::InvalidMembership(
                "downing.quorum_size must be at least 1"
            ))
        );
        let zero = Duration::ZERO;
        for downing in [
            Downing::KeepMajority { stable_after: zero },
            Downing::StaticQuorum {
                stable_after: zero,
                quorum_size: 3,
            },
            Downing::KeepOldest {
                stable_after: zero,
                down_if_alone: true,
            },
            Downing::DownAll { stable_after: zero },
            Downing::AutoDown { after: zero },
        ] {
            assert_eq!(
                with(downing),
                Err(ConfigError::ZeroDuration("downing.stable_after")),
                "{downing:?}"
            );
        }
        assert!(with(Downing::Off).is_ok());
        let lease = |lease_ttl| Downing::LeaseMajority {
            stable_after: Duration::from_secs(20),
            acquire_delay_for_minority: Duration::from_secs(2),
            lease_ttl,
        };
        assert!(with(lease(Duration::from_secs(42))).is_ok());
        assert!(matches!(
            with(lease(Duration::from_secs(41))),
            Err(ConfigError::InvalidMembership(_))
        ));
    }
}
