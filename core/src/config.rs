//! Node configuration: identity, entity types and Akka's sharding settings, validated once.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;
use crate::id::{Address, EntityType, Incarnation, MemberId, NodeId};
use crate::membership::MembershipSettings;

/// Everything a [`crate::Node`] needs to start. Build it with [`Config::new`], adjust the public
/// fields, and let [`crate::Node::new`] validate it.
#[derive(Clone, Debug, Deserialize, PartialEq, Serialize)]
pub struct Config {
    /// This member's address.
    pub node: NodeId,
    /// This life of the member; a restart must use a new (higher) incarnation.
    pub incarnation: Incarnation,
    /// Where other members reach this one; membership carries it to them. Defaults to
    /// [`Address::of_node`].
    pub address: Address,
    /// Roles this member carries (decide where entity types are hosted).
    pub roles: BTreeSet<String>,
    /// Seed for the core's PRNG (retry jitter). Hosts log it so a run can be replayed.
    pub seed: u64,
    /// The entity types this node serves, as a region (or proxy) for each.
    pub entity_types: Vec<EntityTypeConfig>,
    /// Timers, limits and gates shared by every entity type.
    pub settings: ShardingSettings,
    /// Membership managed by the node (joining through seeds, gossip, failure detection,
    /// downing). `None`: the host supplies views with `Input::MembershipChanged`.
    pub membership: Option<MembershipSettings>,
}

impl Config {
    /// A config with default settings and no entity types.
    pub fn new(node: NodeId, incarnation: Incarnation) -> Self {
        Self {
            node,
            incarnation,
            address: Address::of_node(node),
            roles: BTreeSet::new(),
            seed: 0,
            entity_types: Vec::new(),
            settings: ShardingSettings::default(),
            membership: None,
        }
    }

    /// Adds an entity type (builder style).
    pub fn with_entity_type(mut self, entity_type: EntityTypeConfig) -> Self {
        self.entity_types.push(entity_type);
        self
    }

    /// This member's id.
    pub fn member_id(&self) -> MemberId {
        MemberId {
            node: self.node,
            incarnation: self.incarnation,
        }
    }

    /// Checks every invariant the roles rely on.
    ///
    /// # Errors
    /// The first violated rule, naming the offending field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.settings.validate()?;
        if let Some(membership) = &self.membership {
            membership.validate()?;
        }
        self.validate_addresses()?;
        let mut names = BTreeSet::new();
        for t in &self.entity_types {
            if t.name.as_str().is_empty() {
                return Err(ConfigError::EmptyEntityTypeName);
            }
            if !names.insert(&t.name) {
                return Err(ConfigError::DuplicateEntityType(t.name.clone()));
            }
            t.validate()?;
        }
        Ok(())
    }

    /// Every address is non-empty and every node id has one address.
    fn validate_addresses(&self) -> Result<(), ConfigError> {
        let mut by_node = std::collections::BTreeMap::from([(self.node, &self.address)]);
        let seeds = self.membership.iter().flat_map(|m| &m.seed_nodes);
        for seed in seeds {
            if *by_node.entry(seed.node).or_insert(&seed.address) != &seed.address {
                return Err(ConfigError::ConflictingAddresses(seed.node));
            }
        }
        if by_node.values().any(|a| a.as_str().is_empty()) {
            return Err(ConfigError::EmptyAddress);
        }
        Ok(())
    }
}

/// One entity type served by this node.
#[derive(Clone, Debug, Deserialize, PartialEq, Serialize)]
pub struct EntityTypeConfig {
    /// The type's name; identical on every node.
    pub name: EntityType,
    /// Shards of this type (Akka's `number-of-shards`); must be identical on every node because
    /// it is part of [`crate::shard_of`].
    pub number_of_shards: u32,
    /// Only members with this role host the type (and run its coordinator); others are proxies.
    pub role: Option<String>,
    /// Serve this type as a proxy even if this member has the role.
    pub proxy_only: bool,
    /// Where new shards go and which move when the cluster changes.
    pub allocation: AllocationStrategyConfig,
    /// Passivate an entity that received no message routed through sharding for this long.
    /// `None` disables idle passivation.
    pub passivate_idle_after: Option<Duration>,
    /// Bound the entities active at once in each region of the type (Akka's automatic
    /// passivation strategies): the limit is divided among the region's shards, and a shard
    /// over its share passivates the entity its replacement policy names (the default,
    /// W-TinyLFU, keeps both the recent and the frequent). Composes with
    /// `passivate_idle_after`. Remembered entities passivated by the limit stay remembered,
    /// dormant: they start again on their next message, not when their shard starts. `None`
    /// (the default): no limit.
    #[serde(default)]
    pub active_entity_limit: Option<crate::passivation::ActiveEntityLimit>,
    /// Remember entities (Akka's `remember-entities`): a shard records which of its entities
    /// run, in the host's remember store, and starts them again wherever it is allocated next
    /// (after a rebalance, a crash or a full restart), without waiting for a message. Only a
    /// passivation forgets an entity; as in Akka, remembered entities are not passivated for
    /// idleness (`passivate_idle_after` is ignored), only when they ask to. `None` (the
    /// default) remembers nothing.
    pub remember: Option<crate::remember::RememberSettings>,
    /// The type's entities persist their state through the host (event-sourced or durable
    /// state). Every allocation of its shards then gets a fencing epoch above any the store
    /// holds (as for remembering), carried to the host in `EntityEffect::Start` so that the
    /// entity's writes carry it: a store refuses a write older than the newest epoch it has
    /// seen for the entity's shard, and the host reports that with `Input::WriteFenced`.
    #[serde(default)]
    pub persistent: bool,
    /// The type's coordinator allocates nothing until this many regions of the type (members
    /// hosting it) have registered (1; Akka's per-role `min-nr-of-members`, which sharding's
    /// coordinator waits for). Each type has its own: a type hosted by a role waits for that
    /// role's members only. Not to be confused with `MembershipSettings::min_nr_of_members`,
    /// which holds joining members back from becoming Up.
    pub min_registered_regions: usize,
    /// A lease per shard (Akka's sharding `use-lease`): an instance of a shard runs its
    /// entities only while it holds the shard's lease in the host's lease store, and stops
    /// them as soon as it cannot count on it, on its own clock. A member cut off or paused
    /// then stops its entities before anyone else can be granted the lease, whatever the
    /// downing decision and however late; the new home starts them once the old grant has
    /// expired. `None` (the default): no lease.
    #[serde(default)]
    pub shard_lease: Option<crate::lease::LeaseTerms>,
    /// A lease for the type's coordinator (Akka's singleton `use-lease`): a coordinator
    /// allocates shards only while it holds the type's lease in the host's lease store, so
    /// that a coordinator cut off from the rest (or paused), which still believes it is the
    /// oldest, stops allocating on its own clock before another can be granted the lease.
    /// `None` (the default): no lease.
    #[serde(default)]
    pub coordinator_lease: Option<crate::lease::LeaseTerms>,
}

impl EntityTypeConfig {
    /// A type with 1000 shards (Akka typed's default), no role, the default allocation strategy
    /// and idle passivation after 120 s (Akka's `default-idle-strategy`).
    pub fn new(name: impl Into<std::sync::Arc<str>>) -> Self {
        Self {
            name: EntityType::new(name),
            number_of_shards: 1000,
            role: None,
            proxy_only: false,
            allocation: AllocationStrategyConfig::default(),
            passivate_idle_after: Some(Duration::from_secs(120)),
            active_entity_limit: None,
            remember: None,
            persistent: false,
            min_registered_regions: 1,
            shard_lease: None,
            coordinator_lease: None,
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.number_of_shards == 0 {
            return Err(ConfigError::ZeroShards(self.name.clone()));
        }
        if self.passivate_idle_after == Some(Duration::ZERO) {
            return Err(ConfigError::ZeroDuration("passivate_idle_after"));
        }
        if self.active_entity_limit.is_some_and(|l| l.per_region == 0) {
            return Err(ConfigError::ZeroActiveEntityLimit(self.name.clone()));
        }
        if let Some(crate::passivation::ActiveEntityLimit {
            policy: crate::passivation::ReplacementPolicy::WindowTinyLfu(admission),
            ..
        }) = self.active_entity_limit
        {
            if !(1..=1000).contains(&admission.window_per_mille) {
                return Err(ConfigError::InvalidAdmissionWindow(self.name.clone()));
            }
        }
        if self.min_registered_regions == 0 {
            return Err(ConfigError::ZeroMinRegisteredRegions(self.name.clone()));
        }
        self.allocation.validate()
    }
}

/// Which allocation strategy a type uses (see [`crate::allocation`]).
#[derive(Clone, Debug, Deserialize, PartialEq, Serialize)]
pub enum AllocationStrategyConfig {
    /// Akka's newer least-shard strategy: new shards go to the region with fewest shards;
    /// rebalance moves at most `min(absolute_limit, relative_limit × total)` shards per round.
    LeastShard {
        /// Most shards moved per rebalance round (Akka's `rebalance-absolute-limit`).
        absolute_limit: u32,
        /// Most shards moved per round as a fraction of all shards (`rebalance-relative-limit`).
        relative_limit: f64,
    },
    /// Consistent hashing over region addresses: stable when regions join or leave.
    ConsistentHashing {
        /// Most shards moved per round; 0 means unlimited.
        rebalance_limit: u32,
    },
    /// Shards go where the application says (`Command::SetShardLocation`), else to the region
    /// that asked first.
    External,
}

impl Default for AllocationStrategyConfig {
    /// Least-shard with Akka's recommended limits: 20 shards or 10 % per round.
    fn default() -> Self {
        Self::LeastShard {
            absolute_limit: 20,
            relative_limit: 0.1,
        }
    }
}

impl AllocationStrategyConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        match *self {
            Self::LeastShard {
                absolute_limit,
                relative_limit,
            } => {
                if absolute_limit == 0 {
                    return Err(ConfigError::InvalidRebalanceLimit(
                        "absolute_limit must be ≥ 1",
                    ));
                }
                if !(relative_limit > 0.0 && relative_limit <= 1.0) {
                    return Err(ConfigError::InvalidRebalanceLimit(
                        "relative_limit must be in (0, 1]",
                    ));
                }
                Ok(())
            }
            Self::ConsistentHashing { .. } | Self::External => Ok(()),
        }
    }
}

/// Akka's `akka.cluster.sharding.*` settings that apply to Shoal, with Akka's defaults.
#[derive(Clone, Debug, Deserialize, PartialEq, Serialize)]
pub struct ShardingSettings {
    /// Region retry tick: re-register, re-ask shard homes, re-send shutdown requests (2 s).
    pub retry_interval: Duration,
    /// Most messages a region buffers while shard homes are unknown or moving, and most a
    /// shard buffers for its passivating entities (100 000). Overflow is a dead letter.
    pub buffer_size: usize,
    /// Whole handoff of one shard: acks plus stop (60 s). Entities are force-stopped after
    /// `max(1 s, handoff_timeout − 5 s)`.
    pub handoff_timeout: Duration,
    /// `HostShard` is re-sent this often until `ShardStarted` (10 s).
    pub shard_start_timeout: Duration,
    /// Coordinator rebalance tick (10 s).
    pub rebalance_interval: Duration,
    /// A passivating or handing-off entity that has not stopped after this is force-stopped
    /// (`passivation.stop-timeout`, 10 s).
    pub passivation_stop_timeout: Duration,
    /// How long after a member's removal its shards are reallocated, so that a downed member
    /// has stopped its entities first (20 s, the keep-majority `stable-after`).
    pub down_removal_margin: Duration,
    /// Cluster-wide statistics queries give up on regions that did not answer by then (3 s).
    pub shard_region_query_timeout: Duration,
    /// Largest message payload accepted (4 MiB); larger ones become dead letters at once
    /// rather than failing later at the transport. At most [`MAX_PAYLOAD_SIZE`].
    pub max_payload_size: usize,
    /// Test-only negative control: the coordinator allocates unknown shards without waiting for
    /// every possible host to register. Breaks single activation on purpose.
    #[cfg(feature = "fault-injection")]
    #[serde(default)]
    pub broken_coordinator_gate: bool,
}

/// The largest `max_payload_size` allowed: a frame holds one payload plus the envelope, and
/// frames are capped at [`crate::codec::MAX_FRAME_LEN`].
pub const MAX_PAYLOAD_SIZE: usize = crate::codec::MAX_FRAME_LEN - 64 * 1024;

impl Default for ShardingSettings {
    fn default() -> Self {
        Self {
            retry_interval: Duration::from_secs(2),
            buffer_size: 100_000,
            handoff_timeout: Duration::from_secs(60),
            shard_start_timeout: Duration::from_secs(10),
            rebalance_interval: Duration::from_secs(10),
            passivation_stop_timeout: Duration::from_secs(10),
            down_removal_margin: Duration::from_secs(20),
            shard_region_query_timeout: Duration::from_secs(3),
            max_payload_size: 4 * 1024 * 1024,
            #[cfg(feature = "fault-injection")]
            broken_coordinator_gate: false,
        }
    }
}

impl ShardingSettings {
    /// How long a shard being handed off waits for its entities before force-stopping them.
    pub fn entity_handoff_timeout(&self) -> Duration {
        self.handoff_timeout
            .saturating_sub(Duration::from_secs(5))
            .max(Duration::from_secs(1))
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let durations = [
            ("retry_interval", self.retry_interval),
            ("handoff_timeout", self.handoff_timeout),
            ("shard_start_timeout", self.shard_start_timeout),
            ("rebalance_interval", self.rebalance_interval),
            ("passivation_stop_timeout", self.passivation_stop_timeout),
            (
                "shard_region_query_timeout",
                self.shard_region_query_timeout,
            ),
        ];
        if let Some((name, _)) = durations.iter().find(|(_, d)| d.is_zero()) {
            return Err(ConfigError::ZeroDuration(name));
        }
        if self.buffer_size == 0 {
            return Err(ConfigError::ZeroBufferSize);
        }
        if self.max_payload_size == 0 || self.max_payload_size > MAX_PAYLOAD_SIZE {
            return Err(ConfigError::InvalidMaxPayloadSize(self.max_payload_size));
        }
        Ok(())
    }
}
