//! Client traffic: sequenced messages from random members to entities picked with a Zipf
//! distribution (a few hot entities, a long tail), in occasional bursts, and now and then a
//! command or a query. The workload draws what to send from its own random streams; the
//! simulator sends it (see `simulator/workload.rs`).

use std::time::Duration;

use shoal_core::{
    AllocationStrategyConfig, Command, EntityId, EntityType, MemberId, NodeId, ShardId,
};

use crate::options::{ExplainQueries, Options};
use crate::requests::Asked;
use crate::rng::{SimRng, Stream};

/// Zipf(1) over `n` entities, as a cumulative table.
#[derive(Debug)]
struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    /// The distribution over `n` items.
    fn new(n: u32) -> Self {
        let mut total = 0.0;
        let cdf = (1..=n.max(1))
            .map(|k| {
                total += 1.0 / f64::from(k);
                total
            })
            .collect();
        Self { cdf }
    }

    /// The item for a uniform draw `u` in `[0, 1)`.
    fn sample(&self, u: f64) -> usize {
        let target = u * self.cdf.last().copied().unwrap_or(1.0);
        self.cdf
            .partition_point(|c| *c <= target)
            .min(self.cdf.len() - 1)
    }
}

/// What the workload needs of the run's options.
#[derive(Clone, Debug)]
struct ClientSettings {
    message_every: Duration,
    start_entity: f64,
    queries: f64,
    external_allocation: bool,
    shards: u32,
    nodes: u64,
    /// The type has an active-entity limit: some queries change it, between one and four
    /// entities per shard.
    limited: bool,
    /// Whether half of the location queries are `Explain`.
    explain: ExplainQueries,
}

/// The clients of a run.
#[derive(Debug)]
pub(crate) struct Workload {
    options: ClientSettings,
    /// Messages (which sender, which entity, bursts, pacing).
    rng: SimRng,
    /// `StartEntity` commands: a stream of their own, so the messages stay what they were.
    rng_commands: SimRng,
    /// Queries.
    rng_queries: SimRng,
    on: bool,
    zipf: Zipf,
    entity_ids: Vec<EntityId>,
    /// The Up members clients send through, cached under the key it was computed for.
    senders: ((u64, u64), Vec<MemberId>),
}

impl Workload {
    /// The clients of a run with `opts`.
    pub(crate) fn new(opts: &Options) -> Self {
        let seed = opts.seed;
        Self {
            options: ClientSettings {
                message_every: opts.workload.message_every,
                start_entity: opts.workload.start_entity,
                queries: opts.workload.queries,
                external_allocation: opts.cluster.allocation == AllocationStrategyConfig::External,
                shards: opts.cluster.shards,
                nodes: opts.cluster.nodes,
                limited: opts.cluster.active_entity_limit.is_some(),
                explain: opts.workload.explain,
            },
            rng: SimRng::of(seed, Stream::Workload),
            rng_commands: SimRng::of(seed, Stream::Commands),
            rng_queries: SimRng::of(seed, Stream::Queries),
            on: true,
            zipf: Zipf::new(opts.workload.entities),
            entity_ids: (0..opts.workload.entities)
                .map(|i| EntityId::new(format!("e{i}")))
                .collect(),
            senders: ((u64::MAX, 0), Vec::new()),
        }
    }

    /// Whether clients still send.
    pub(crate) fn is_on(&self) -> bool {
        self.on
    }

    /// Clients stop sending (the probes after healing are sent by the simulator).
    pub(crate) fn stop(&mut self) {
        self.on = false;
    }

    /// The type has `shards` shards from now on (the cluster restarted with them).
    pub(crate) fn set_shards(&mut self, shards: u32) {
        self.options.shards = shards;
    }

    /// Every entity clients address.
    pub(crate) fn entity_ids(&self) -> &[EntityId] {
        &self.entity_ids
    }

    /// How many messages this round sends (usually one, sometimes a burst).
    pub(crate) fn burst(&mut self) -> u64 {
        if self.rng.chance(0.02) {
            self.rng.range(5, 50)
        } else {
            1
        }
    }

    /// Whether the cached Up members clients send through are older than `key` (membership
    /// and process changes): clients send thousands of messages between changes.
    pub(crate) fn senders_stale(&self, key: (u64, u64)) -> bool {
        self.senders.0 != key
    }

    /// Caches `up` as the members clients send through, as of `key`.
    pub(crate) fn set_senders(&mut self, key: (u64, u64), up: Vec<MemberId>) {
        self.senders = (key, up);
    }

    /// A random member to send through, among the cached Up members.
    pub(crate) fn pick_sender(&mut self) -> Option<MemberId> {
        pick_member(&mut self.rng, &self.senders.1)
    }

    /// The entity the next message goes to.
    pub(crate) fn hot_entity(&mut self) -> EntityId {
        let index = self.zipf.sample(self.rng.unit());
        self.entity_ids[index].clone()
    }

    /// Whether this round also asks a member to start an entity.
    pub(crate) fn wants_start(&mut self) -> bool {
        let p = self.options.start_entity;
        p > 0.0 && self.rng_commands.chance(p)
    }

    /// A `StartEntity` through one of the cached Up members: who asks, and for which entity
    /// (`None` without any).
    pub(crate) fn start(&mut self) -> Option<(MemberId, EntityId)> {
        let sender = pick_member(&mut self.rng_commands, &self.senders.1)?;
        let entity = self.rng_commands.pick(&self.entity_ids).clone();
        Some((sender, entity))
    }

    /// Whether this round also sends a query.
    pub(crate) fn wants_query(&mut self) -> bool {
        let p = self.options.queries;
        p > 0.0 && self.rng_queries.chance(p)
    }

    /// A query through one of the cached Up members (`None` without any): where a random
    /// entity lives, the cluster's statistics, or, under the external allocation strategy,
    /// sometimes where a random shard should live.
    pub(crate) fn query(&mut self, entity_type: EntityType) -> Option<(MemberId, Asked, Command)> {
        let sender = pick_member(&mut self.rng_queries, &self.senders.1)?;
        let o = &self.options;
        let (asked, command) = if o.limited && self.rng_queries.chance(0.3) {
            let shards = o.shards as usize;
            let limit = self.rng_queries.range(1, 4) as usize * shards;
            let command = Command::SetActiveEntityLimit { entity_type, limit };
            (Asked::SetLimit(limit), command)
        } else if o.external_allocation && self.rng_queries.chance(0.3) {
            let shard = ShardId(self.rng_queries.below(u64::from(o.shards)) as u32);
            let node = NodeId(self.rng_queries.range(1, o.nodes));
            let command = Command::SetShardLocation {
                entity_type,
                shard,
                node,
            };
            (Asked::SetLocation(shard), command)
        } else if self.rng_queries.chance(0.25) {
            let command = Command::GetClusterShardingStats { entity_type };
            (Asked::Stats, command)
        } else {
            let entity = self.rng_queries.pick(&self.entity_ids).clone();
            // Drawn only when explaining, so that runs without it draw what they always did.
            if o.explain != ExplainQueries::Off && self.rng_queries.chance(0.5) {
                let command = Command::Explain {
                    entity_type,
                    entity: entity.clone(),
                };
                return Some((sender, Asked::Explain(entity), command));
            }
            let command = Command::GetEntityLocation {
                entity_type,
                entity: entity.clone(),
            };
            (Asked::Locate(entity), command)
        };
        Some((sender, asked, command))
    }

    /// How long until the next round.
    pub(crate) fn pause(&mut self) -> Duration {
        let mean = self.options.message_every;
        let next = self.rng.duration(mean / 2, mean * 3 / 2);
        next.max(Duration::from_micros(1))
    }
}

/// A member of `members` drawn from `rng` (`None`, drawing nothing, when there is none).
fn pick_member(rng: &mut SimRng, members: &[MemberId]) -> Option<MemberId> {
    (!members.is_empty()).then(|| *rng.pick(members))
}
