//! W-TinyLFU (Akka's default automatic passivation strategy, after Caffeine): a small
//! admission window (least recently used) in front of a segmented-LRU main area, a frequency
//! sketch deciding whether an entity leaving the window may displace the main area's next
//! victim, and a hill climber moving the window's size toward the better hit rate.

use super::Admission;
use super::recency::Recency;
use super::segmented::Segmented;
use super::sketch::Sketch;
use crate::id::EntityId;

/// Proportions in parts per million.
const PPM: i64 = 1_000_000;
/// The protected segment's share of the main area (Akka's 80 %).
const PROTECTED_PERCENT: u8 = 80;

/// The admission window, the main area, the sketch and the optimizer of one shard.
#[derive(Debug)]
pub(super) struct Composite {
    window: Recency,
    main: Segmented,
    /// The frequency filter; `None` admits every entity leaving the window.
    sketch: Option<Sketch>,
    /// The window's optimizer; `None` keeps its share fixed.
    climber: Option<HillClimber>,
    window_ppm: i64,
    /// The window's share at first, and the least the climber moves it to.
    min_window_ppm: i64,
}

impl Composite {
    pub(super) fn new(limit: usize, admission: Admission) -> Self {
        let min_window_ppm = i64::from(admission.window_per_mille.clamp(1, 1000)) * 1000;
        Self {
            window: Recency::default(),
            main: Segmented::new(PROTECTED_PERCENT),
            sketch: admission.frequency_filter.then(|| Sketch::new(limit)),
            climber: admission.adaptive.then(|| HillClimber::new(limit)),
            window_ppm: min_window_ppm,
            min_window_ppm,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.window.len() + self.main.len()
    }

    pub(super) fn contains(&self, id: &EntityId) -> bool {
        self.window.contains(id) || self.main.contains(id)
    }

    /// How many of `limit` the window holds: its share, at least one.
    fn window_capacity(&self, limit: usize) -> usize {
        let share = (limit as i64 * self.window_ppm / PPM) as usize;
        share.clamp(1, limit)
    }

    /// `id` accessed under `limit`: the entities passivated to make room.
    pub(super) fn access(&mut self, id: &EntityId, limit: usize) -> Vec<EntityId> {
        if let Some(sketch) = &mut self.sketch {
            sketch.increment(id);
        }
        let main_capacity = limit - self.window_capacity(limit);
        let hit = self.window.touch_existing(id) || self.main.touch_existing(id, main_capacity);
        let mut victims = Vec::new();
        if !hit {
            self.window.push_newest(id.clone());
        }
        if let Some(adjustment) = self.climber.as_mut().and_then(|c| c.record(hit)) {
            self.window_ppm = (self.window_ppm + adjustment).clamp(self.min_window_ppm, PPM);
        }
        self.fit(limit, &mut victims);
        victims
    }

    /// The limit changed from `old`: the sketch and the climber's period are sized for the
    /// new one (as Akka's filter and optimizer on a new limit); the sketch starts empty.
    pub(super) fn resize(&mut self, old: usize, limit: usize) {
        if old == limit {
            return;
        }
        if self.sketch.is_some() {
            self.sketch = Some(Sketch::new(limit));
        }
        if self.climber.is_some() {
            self.climber = Some(HillClimber::new(limit));
        }
    }

    /// Moves the window's overflow into the main area, each admitted only if the sketch
    /// counts it more often accessed than the main area's next victim; then trims the whole
    /// to `limit` (after the limit was lowered).
    pub(super) fn fit(&mut self, limit: usize, victims: &mut Vec<EntityId>) {
        let window_capacity = self.window_capacity(limit);
        let main_capacity = limit - window_capacity;
        while self.window.len() > window_capacity {
            let Some(candidate) = self.window.pop_oldest() else {
                break;
            };
            if self.main.len() < main_capacity {
                self.main.admit(candidate);
                continue;
            }
            let admitted = self.main.next_victim().is_some_and(|victim| {
                (self.sketch.as_ref()).is_none_or(|s| s.estimate(&candidate) > s.estimate(victim))
            });
            if admitted {
                victims.extend(self.main.evict());
                self.main.admit(candidate);
            } else {
                victims.push(candidate);
            }
        }
        while self.len() > limit {
            match self.main.evict().or_else(|| self.window.pop_oldest()) {
                Some(victim) => victims.push(victim),
                None => break,
            }
        }
        self.main.fit(main_capacity);
    }

    pub(super) fn remove(&mut self, id: &EntityId) {
        self.window.remove(id);
        self.main.remove(id);
    }

    /// The window's share of the limit, in parts per million (tests).
    #[cfg(test)]
    pub(super) fn window_ppm(&self) -> i64 {
        self.window_ppm
    }
}

/// Akka's hill-climbing admission optimizer: every ten accesses per entity of the limit it
/// compares the period's hit rate with the last one's and moves the window's share a step
/// the same way if it improved, the other way if not (shrinking it first); steps shrink by
/// 2 % a period and start over when the hit rate changes by 5 points or more.
#[derive(Debug)]
pub(super) struct HillClimber {
    period: usize,
    accesses: usize,
    hits: usize,
    previous_hit_rate_ppm: i64,
    step_ppm: i64,
}

/// The first step: 6.25 % of the limit.
const INITIAL_STEP_PPM: i64 = 62_500;
/// A hit-rate change that restarts the steps: 5 points.
const RESTART_THRESHOLD_PPM: i64 = 50_000;

impl HillClimber {
    pub(super) fn new(limit: usize) -> Self {
        Self {
            period: limit.max(1) * 10,
            accesses: 0,
            hits: 0,
            previous_hit_rate_ppm: 0,
            // Down first, as Akka's and Caffeine's: a steady workload wants the window small.
            step_ppm: -INITIAL_STEP_PPM,
        }
    }

    /// One access, a hit or not: the window's adjustment at the end of a period.
    pub(super) fn record(&mut self, hit: bool) -> Option<i64> {
        self.accesses += 1;
        self.hits += usize::from(hit);
        if self.accesses < self.period {
            return None;
        }
        let hit_rate = (self.hits as i64 * PPM) / self.accesses as i64;
        let change = hit_rate - self.previous_hit_rate_ppm;
        let adjustment = if change >= 0 {
            self.step_ppm
        } else {
            -self.step_ppm
        };
        self.step_ppm = if change.abs() >= RESTART_THRESHOLD_PPM {
            INITIAL_STEP_PPM * adjustment.signum()
        } else {
            adjustment * 98 / 100
        };
        self.previous_hit_rate_ppm = hit_rate;
        (self.accesses, self.hits) = (0, 0);
        Some(adjustment)
    }
}
