//! Per-shard message buffers under one region-wide budget.

use std::collections::{BTreeMap, VecDeque};

use crate::id::ShardId;
use crate::message::Delivery;

/// The region-wide buffer budget (`buffer_size`), shared by the region's per-shard buffers and
/// its shards' per-entity buffers, so the cap bounds everything the region holds.
#[derive(Debug)]
pub(crate) struct BufferBudget {
    used: usize,
    cap: usize,
}

impl BufferBudget {
    pub(crate) fn new(cap: usize) -> Self {
        Self { used: 0, cap }
    }

    /// Reserves room for one message; false when the cap is reached.
    pub(crate) fn try_take(&mut self) -> bool {
        if self.used >= self.cap {
            return false;
        }
        self.used += 1;
        true
    }

    pub(crate) fn release(&mut self, n: usize) {
        debug_assert!(n <= self.used);
        self.used -= n;
    }

    pub(crate) fn used(&self) -> usize {
        self.used
    }
}

/// Messages waiting for a shard's home to be known (or for the shard to start locally).
#[derive(Debug, Default)]
pub(crate) struct ShardBuffers {
    map: BTreeMap<ShardId, VecDeque<Delivery>>,
}

impl ShardBuffers {
    /// Appends a message. Returns whether it is the shard's first buffered message, or the
    /// message back if the budget is exhausted (nothing was buffered).
    pub(crate) fn push(
        &mut self,
        shard: ShardId,
        delivery: Delivery,
        budget: &mut BufferBudget,
    ) -> Result<bool, Delivery> {
        if !budget.try_take() {
            return Err(delivery);
        }
        let queue = self.map.entry(shard).or_default();
        queue.push_back(delivery);
        Ok(queue.len() == 1)
    }

    /// Removes and returns the shard's queue, releasing its budget.
    pub(crate) fn take(&mut self, shard: ShardId, budget: &mut BufferBudget) -> VecDeque<Delivery> {
        let queue = self.map.remove(&shard).unwrap_or_default();
        budget.release(queue.len());
        queue
    }

    /// Puts `deliveries`, whose budget is already held, in front of the shard's queue.
    pub(crate) fn prepend(&mut self, shard: ShardId, deliveries: Vec<Delivery>) {
        if deliveries.is_empty() {
            return;
        }
        let queue = self.map.entry(shard).or_default();
        for delivery in deliveries.into_iter().rev() {
            queue.push_front(delivery);
        }
    }

    pub(crate) fn contains(&self, shard: ShardId) -> bool {
        self.map.contains_key(&shard)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// How many letters are buffered, over every shard.
    pub(crate) fn letters(&self) -> usize {
        self.map.values().map(VecDeque::len).sum()
    }

    /// Shards with buffered messages, in order.
    pub(crate) fn shards(&self) -> Vec<ShardId> {
        self.map.keys().copied().collect()
    }

    /// Removes everything (the region stopped), releasing its budget.
    pub(crate) fn drain_all(&mut self, budget: &mut BufferBudget) -> Vec<Delivery> {
        let all: Vec<Delivery> = std::mem::take(&mut self.map)
            .into_values()
            .flatten()
            .collect();
        budget.release(all.len());
        all
    }
}
