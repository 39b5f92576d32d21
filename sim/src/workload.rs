//! Client traffic: sequenced messages from random members to entities picked with a Zipf
//! distribution (a few hot entities, a long tail), in occasional bursts.

use std::time::Duration;

use shoal_core::{EntityId, Input};

use crate::requests::Asked;
use crate::world::{Ev, World};

/// Zipf(1) over `n` entities, as a cumulative table.
#[derive(Debug)]
pub(crate) struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    /// The distribution over `n` items.
    pub(crate) fn new(n: u32) -> Self {
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
    pub(crate) fn sample(&self, u: f64) -> usize {
        let target = u * self.cdf.last().copied().unwrap_or(1.0);
        self.cdf
            .partition_point(|c| *c <= target)
            .min(self.cdf.len() - 1)
    }
}

/// One client message (sometimes a burst), then the next one is scheduled.
pub(crate) fn client_message(w: &mut World) {
    if !w.traffic {
        return;
    }
    let burst = if w.rng_work.chance(0.02) {
        w.rng_work.range(5, 50)
    } else {
        1
    };
    for _ in 0..burst {
        send_one(w);
    }
    if w.opts.start_entity > 0.0 && w.rng_commands.chance(w.opts.start_entity) {
        start_one(w);
    }
    if w.opts.queries > 0.0 && w.rng_queries.chance(w.opts.queries) {
        query_one(w);
    }
    let mean = w.opts.message_every;
    let next = w.rng_work.duration(mean / 2, mean * 3 / 2);
    w.schedule(w.now + next.max(Duration::from_micros(1)), Ev::Client);
}

fn send_one(w: &mut World) {
    let Some(sender) = w.pick_sender() else {
        return;
    };
    let index = w.zipf.sample(w.rng_work.unit());
    let entity = w.entity_ids[index].clone();
    tell(w, sender, &entity);
}

/// A client asks a random Up member to start a random entity (`StartEntity`); the checker
/// follows its answer. Drawn from a stream of its own, so the messages stay what they were.
fn start_one(w: &mut World) {
    let senders = w.up_members();
    if senders.is_empty() {
        return;
    }
    let sender = *w.rng_commands.pick(&senders);
    let entity = w.rng_commands.pick(&w.entity_ids).clone();
    let request = w.requests.send(w.now, sender, Asked::Start(entity.clone()));
    let command = shoal_core::Command::StartEntity {
        entity_type: w.ty.clone(),
        entity,
    };
    w.input(sender.node, Input::Command { request, command });
}

/// A client asks a random Up member where a random entity lives or for the cluster's
/// statistics, or, under the external allocation strategy, sometimes tells it where a random
/// shard should live.
fn query_one(w: &mut World) {
    let senders = w.up_members();
    if senders.is_empty() {
        return;
    }
    let sender = *w.rng_queries.pick(&senders);
    let entity_type = w.ty.clone();
    let external = w.opts.allocation == shoal_core::AllocationStrategyConfig::External;
    let (asked, command) = if external && w.rng_queries.chance(0.3) {
        let shard = shoal_core::ShardId(w.rng_queries.below(u64::from(w.opts.shards)) as u32);
        let node = shoal_core::NodeId(w.rng_queries.range(1, w.opts.nodes));
        let command = shoal_core::Command::SetShardLocation {
            entity_type,
            shard,
            node,
        };
        (Asked::SetLocation(shard), command)
    } else if w.rng_queries.chance(0.25) {
        let command = shoal_core::Command::GetClusterShardingStats { entity_type };
        (Asked::Stats, command)
    } else {
        let entity = w.rng_queries.pick(&w.entity_ids).clone();
        let command = shoal_core::Command::GetEntityLocation {
            entity_type,
            entity: entity.clone(),
        };
        (Asked::Locate(entity), command)
    };
    let request = w.requests.send(w.now, sender, asked);
    w.input(sender.node, Input::Command { request, command });
}

/// Sends the next sequenced message from `sender` to `entity`.
pub(crate) fn tell(w: &mut World, sender: shoal_core::MemberId, entity: &EntityId) {
    let payload = w.check.send(entity, sender);
    let input = Input::Tell {
        entity_type: w.ty.clone(),
        entity: entity.clone(),
        payload,
    };
    w.input(sender.node, input);
}
