//! A region asks its coordinator where a shard lives when the shard's first letter starts
//! waiting, and again only on its retry tick, its registration or the shard's stop: never once
//! per waiting letter, which under steady traffic would flood the coordinator.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use shoal_core::{Instant, MemberId, ShardId};

use crate::check::Property;

use super::Simulator;

/// Asks a region may send for one shard within one retry interval: the first waiting letter's,
/// the retry tick's, a registration's and a stop's, and one more for a window that straddles
/// two retry ticks.
const ASKS_PER_RETRY_INTERVAL: usize = 5;

/// When each region recently asked where each shard lives.
#[derive(Debug, Default)]
pub(super) struct HomeAsks(BTreeMap<(MemberId, ShardId), VecDeque<Instant>>);

impl HomeAsks {
    /// Records `member`'s ask for `shard` at `now`; returns how many it sent within `window`.
    fn record(
        &mut self,
        now: Instant,
        member: MemberId,
        shard: ShardId,
        window: Duration,
    ) -> usize {
        let asks = self.0.entry((member, shard)).or_default();
        while asks.front().is_some_and(|at| *at + window <= now) {
            asks.pop_front();
        }
        asks.push_back(now);
        asks.len()
    }
}

impl Simulator {
    /// `member` asked its coordinator where `shard` lives: not too often.
    pub(super) fn check_home_ask_rate(&mut self, member: MemberId, shard: ShardId) {
        let window = self.settings.retry_interval;
        let asks = self.home_asks.record(self.now, member, shard, window);
        if asks > ASKS_PER_RETRY_INTERVAL {
            let detail =
                format!("{member} asked where {shard} lives {asks} times within {window:?}");
            self.check
                .fail(self.now, Property::CoreInvariant, member, detail);
        }
    }
}
