//! Active-entity limits (Akka's automatic passivation strategies): a pure tracker of a
//! shard's active entities that, told of every access and stop, names the entities to
//! passivate when the shard holds more than its share of the limit. Deterministic: no clock,
//! no randomness, ordered maps only.
//!
//! - **Least recently used**: the entity accessed longest ago goes first.
//! - **Most recently used**: the entity accessed last (before the one arriving) goes first;
//!   for loops larger than the limit, where LRU evicts exactly what comes next.
//! - **Segmented LRU**: new entities enter a probationary segment; a second access promotes
//!   to a protected segment (a share of the limit), whose least recently used one is demoted
//!   back when it overflows; victims come from the probationary segment first. A scan passes
//!   through without displacing entities used more than once.
//! - **Least frequently used**: the entity accessed least often goes first (the least
//!   recently used among equals); with dynamic aging, an entity's priority is its count plus
//!   the priority of the last victim at its latest access, so entities once popular age out.
//! - **W-TinyLFU** (Akka's default): a small LRU admission window in front of a segmented-LRU
//!   main area; an entity leaving the window displaces the main area's next victim only if a
//!   frequency sketch counts it more often accessed, and a hill climber moves the window's
//!   share toward the better hit rate. Recent and frequent entities both stay.
//!
//! Victims are forgotten when named: the caller stops them through the ordinary passivation
//! path, and an access before the stop completes admits the entity again.

mod composite;
mod frequency;
mod recency;
mod segmented;
mod sketch;

use serde::{Deserialize, Serialize};

use crate::id::EntityId;

use composite::Composite;
use frequency::Frequency;
use recency::Recency;
use segmented::Segmented;

/// An entity type's active-entity limit (Akka's `passivation.strategy` with an
/// `active-entity-limit`): how many of its entities may be active at once in one region, and
/// the policy choosing whom to passivate when a shard is over its share.
#[derive(Clone, Copy, Debug, Deserialize, Eq, PartialEq, Serialize)]
pub struct ActiveEntityLimit {
    /// Most entities active at once in one region (at least 1), divided evenly among the
    /// shards it hosts (each shard is allowed one at least). `Command::SetActiveEntityLimit`
    /// changes it at run time.
    pub per_region: usize,
    /// Whom a shard over its share passivates.
    pub policy: ReplacementPolicy,
}

impl ActiveEntityLimit {
    /// Akka's default strategy: 100,000 active entities per region under W-TinyLFU.
    pub const DEFAULT: Self = Self {
        per_region: 100_000,
        policy: ReplacementPolicy::WINDOW_TINY_LFU,
    };
}

impl Default for ActiveEntityLimit {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The share of a region's `limit` that the `index`th of its `shards` active shards (in id
/// order) gets: an even division, the remainder going one each to the first shards, so the
/// shares add up to the limit; at least one.
pub fn share_of_limit(limit: usize, shards: usize, index: usize) -> usize {
    let shards = shards.max(1);
    let share = limit / shards + usize::from(index < limit % shards);
    share.max(1)
}

/// Which entity a full shard passivates to make room.
#[derive(Clone, Copy, Debug, Deserialize, Eq, PartialEq, Serialize)]
pub enum ReplacementPolicy {
    /// The entity accessed longest ago.
    LeastRecentlyUsed,
    /// The entity accessed most recently.
    MostRecentlyUsed,
    /// Least recently used in two segments: probationary, and protected (`protected_percent`
    /// of the limit) for entities accessed more than once. Akka's default split is 80.
    SegmentedLeastRecentlyUsed {
        /// The protected segment's share of the limit, in percent (at most 100).
        protected_percent: u8,
    },
    /// The entity accessed least often, optionally with dynamic aging.
    LeastFrequentlyUsed {
        /// Add the last victim's priority to an entity's count at each access.
        dynamic_aging: bool,
    },
    /// W-TinyLFU: an admission window, a frequency-sketch filter and a segmented-LRU main
    /// area, with the window's share adapted by hill climbing (Akka's default strategy).
    WindowTinyLfu(Admission),
}

impl ReplacementPolicy {
    /// W-TinyLFU with Akka's default admission: a 1 % window adapted by hill climbing, and the
    /// frequency filter.
    pub const WINDOW_TINY_LFU: Self = Self::WindowTinyLfu(Admission::DEFAULT);

    /// Every policy with its default parameters, as the passivation simulator compares them.
    pub const ALL: [(&'static str, Self); 6] = [
        ("lru", Self::LeastRecentlyUsed),
        ("mru", Self::MostRecentlyUsed),
        (
            "slru",
            Self::SegmentedLeastRecentlyUsed {
                protected_percent: 80,
            },
        ),
        (
            "lfu",
            Self::LeastFrequentlyUsed {
                dynamic_aging: false,
            },
        ),
        (
            "lfu-aging",
            Self::LeastFrequentlyUsed {
                dynamic_aging: true,
            },
        ),
        ("w-tinylfu", Self::WINDOW_TINY_LFU),
    ];
}

impl Default for ReplacementPolicy {
    /// W-TinyLFU with Akka's default admission.
    fn default() -> Self {
        Self::WINDOW_TINY_LFU
    }
}

/// W-TinyLFU's admission: the window in front of the main area, and the filter deciding
/// whether an entity leaving it may displace the main area's next victim (Akka's
/// `admission.window` and `admission.filter`).
#[derive(Clone, Copy, Debug, Deserialize, Eq, PartialEq, Serialize)]
pub struct Admission {
    /// The window's share of the limit at first, in per mille (Akka's `proportion`, 0.01 =
    /// 10); with `adaptive` it is also the least share the climber moves it to. 1 to 1000.
    pub window_per_mille: u16,
    /// Move the window's share toward the better hit rate by hill climbing (Akka's
    /// `optimizer = hill-climbing`); `false` keeps it fixed.
    pub adaptive: bool,
    /// Admit an entity leaving the window only if a frequency sketch counts it more often
    /// accessed than the main area's next victim (Akka's `filter = frequency-sketch`);
    /// `false` admits every one.
    pub frequency_filter: bool,
}

impl Admission {
    /// Akka's default: a 1 % window, hill climbing, the frequency filter.
    pub const DEFAULT: Self = Self {
        window_per_mille: 10,
        adaptive: true,
        frequency_filter: true,
    };
}

impl Default for Admission {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The active entities of one shard under a limit, with the policy that picks victims.
#[derive(Debug)]
pub struct ActiveEntities {
    limit: usize,
    tracker: Tracker,
}

#[derive(Debug)]
enum Tracker {
    Recency { order: Recency, newest_first: bool },
    Segmented(Segmented),
    Frequency(Frequency),
    Composite(Box<Composite>),
}

impl ActiveEntities {
    /// An empty shard under `limit` active entities (at least one is always allowed).
    pub fn new(policy: ReplacementPolicy, limit: usize) -> Self {
        let limit = limit.max(1);
        let tracker = match policy {
            ReplacementPolicy::LeastRecentlyUsed => Tracker::Recency {
                order: Recency::default(),
                newest_first: false,
            },
            ReplacementPolicy::MostRecentlyUsed => Tracker::Recency {
                order: Recency::default(),
                newest_first: true,
            },
            ReplacementPolicy::SegmentedLeastRecentlyUsed { protected_percent } => {
                Tracker::Segmented(Segmented::new(protected_percent))
            }
            ReplacementPolicy::LeastFrequentlyUsed { dynamic_aging } => {
                Tracker::Frequency(Frequency::new(dynamic_aging))
            }
            ReplacementPolicy::WindowTinyLfu(admission) => {
                Tracker::Composite(Box::new(Composite::new(limit, admission)))
            }
        };
        Self { limit, tracker }
    }

    /// How many entities are active.
    pub fn len(&self) -> usize {
        match &self.tracker {
            Tracker::Recency { order, .. } => order.len(),
            Tracker::Segmented(s) => s.len(),
            Tracker::Frequency(f) => f.len(),
            Tracker::Composite(c) => c.len(),
        }
    }

    /// Whether no entity is active.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The limit in force.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// `id` was accessed (a message or a start for it): the entities to passivate to make room
    /// if it was not active and the shard is full, never `id` itself.
    pub fn handle_access(&mut self, id: &EntityId) -> Vec<EntityId> {
        // An active entity's access (the common case) looks it up once and allocates nothing.
        let active = match &mut self.tracker {
            Tracker::Recency { order, .. } => order.touch_existing(id),
            Tracker::Segmented(s) => s.touch_existing(id, self.limit),
            Tracker::Frequency(f) => f.touch_existing(id),
            // Admission decides after the newcomer entered the window.
            Tracker::Composite(c) => return c.access(id, self.limit),
        };
        if active {
            return Vec::new();
        }
        let mut victims = Vec::new();
        while self.len() >= self.limit {
            match self.evict() {
                Some(victim) => victims.push(victim),
                None => break,
            }
        }
        match &mut self.tracker {
            Tracker::Recency { order, .. } => order.push_newest(id.clone()),
            Tracker::Segmented(s) => s.admit(id.clone()),
            Tracker::Frequency(f) => f.touch(id),
            // Took its access above.
            Tracker::Composite(_) => {}
        }
        victims
    }

    /// `id` stopped (passivated, idle, failed, handed off): it no longer counts.
    pub fn handle_stopped(&mut self, id: &EntityId) {
        match &mut self.tracker {
            Tracker::Recency { order, .. } => {
                order.remove(id);
            }
            Tracker::Segmented(s) => s.remove(id),
            Tracker::Frequency(f) => f.remove(id),
            Tracker::Composite(c) => c.remove(id),
        }
    }

    /// The limit changed to `limit` (a command, or the region dividing its limit among
    /// another number of shards): the entities to passivate to fit under it.
    pub fn set_limit(&mut self, limit: usize) -> Vec<EntityId> {
        let old = std::mem::replace(&mut self.limit, limit.max(1));
        let mut victims = Vec::new();
        if let Tracker::Composite(c) = &mut self.tracker {
            c.resize(old, self.limit);
            c.fit(self.limit, &mut victims);
            return victims;
        }
        while self.len() > self.limit {
            match self.evict() {
                Some(victim) => victims.push(victim),
                None => break,
            }
        }
        if let Tracker::Segmented(s) = &mut self.tracker {
            s.fit(self.limit);
        }
        victims
    }

    /// Whether `id` is active.
    pub fn contains(&self, id: &EntityId) -> bool {
        match &self.tracker {
            Tracker::Recency { order, .. } => order.contains(id),
            Tracker::Segmented(s) => s.contains(id),
            Tracker::Frequency(f) => f.contains(id),
            Tracker::Composite(c) => c.contains(id),
        }
    }

    fn evict(&mut self) -> Option<EntityId> {
        match &mut self.tracker {
            Tracker::Recency {
                order,
                newest_first: false,
            } => order.pop_oldest(),
            Tracker::Recency {
                order,
                newest_first: true,
            } => order.pop_newest(),
            Tracker::Segmented(s) => s.evict(),
            Tracker::Frequency(f) => f.evict(),
            // Evicts on its own, in `access` and `fit`.
            Tracker::Composite(_) => None,
        }
    }
}

#[cfg(test)]
mod tests;
