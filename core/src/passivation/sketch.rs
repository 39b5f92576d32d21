//! A count-min frequency sketch with 4-bit counters that halve now and then (TinyLFU's), so
//! that popularity is remembered for entities long passivated, and forgotten slowly.

use crate::id::EntityId;

/// How many rows (hash functions) the sketch has.
const DEPTH: usize = 4;
/// A counter's largest value (4 bits).
const MAX_COUNT: u8 = 15;

/// Estimated access counts for any entity, active or not, in a fixed space.
#[derive(Debug)]
pub(super) struct Sketch {
    /// `DEPTH` rows of `width` counters each.
    counters: Vec<u8>,
    /// A power of two.
    width: usize,
    /// Increments since the counters were last halved.
    additions: usize,
    /// Halve every counter after this many increments.
    reset_after: usize,
}

impl Sketch {
    /// A sketch for `capacity` active entities: four counters per entity and row, halved
    /// after ten increments per entity (Akka's and Caffeine's defaults).
    pub(super) fn new(capacity: usize) -> Self {
        let width = (capacity.max(1) * 4).next_power_of_two().max(16);
        Self {
            counters: vec![0; width * DEPTH],
            width,
            additions: 0,
            reset_after: capacity.max(1) * 10,
        }
    }

    /// One more access of `id`.
    pub(super) fn increment(&mut self, id: &EntityId) {
        // Conservative update: only the smallest counters grow (the others already count
        // more than `id`'s accesses, for other entities sharing them), which keeps the
        // estimates of rarely seen entities from rising with their popular neighbours'.
        let slots: [usize; DEPTH] = {
            let mut slots = [0; DEPTH];
            for (i, slot) in self.slots(id).enumerate() {
                slots[i] = slot;
            }
            slots
        };
        let least = slots
            .iter()
            .map(|&slot| self.counters[slot])
            .min()
            .unwrap_or(0);
        let mut grew = false;
        for slot in slots {
            if self.counters[slot] == least && least < MAX_COUNT {
                self.counters[slot] += 1;
                grew = true;
            }
        }
        if grew {
            self.additions += 1;
            if self.additions >= self.reset_after {
                for counter in &mut self.counters {
                    *counter /= 2;
                }
                self.additions /= 2;
            }
        }
    }

    /// How often `id` was accessed, at least (the smallest of its counters).
    pub(super) fn estimate(&self, id: &EntityId) -> u8 {
        (self.slots(id).map(|slot| self.counters[slot]))
            .min()
            .unwrap_or(0)
    }

    /// The counter of `id` in each row.
    fn slots(&self, id: &EntityId) -> impl Iterator<Item = usize> + use<> {
        let hash = crate::fnv::fnv1a(id.as_str().as_bytes());
        let (width, mask) = (self.width, self.width as u64 - 1);
        (0..DEPTH).map(move |row| {
            let mixed = splitmix(hash.wrapping_add(row as u64));
            row * width + (mixed & mask) as usize
        })
    }
}

/// SplitMix64's finaliser: spreads one hash into independent-looking row indexes.
fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
