//! The event queue's order: a calendar of one-millisecond buckets over the next few seconds,
//! and a heap for what lies further ahead. Nearly every event is due within a few seconds of
//! the present (network latencies, heartbeat and gossip rounds), so a push appends to its
//! bucket and a take sorts a bucket once, when it comes first, then takes its keys in order;
//! the heap it replaces walked half a dozen levels for each. Most buckets hold a few keys (a
//! hundred nodes schedule about three a millisecond), sorted by insertion in place. A key
//! scheduled into the bucket being taken goes to the heap instead: a cluster's nodes fire
//! their timers together, so that bucket often holds hundreds of keys (thousands at 1,000
//! nodes), and inserting in order moved about half of them each time. The order taken is the
//! heap's: the smallest key first (time, then sequence number; keys are unique).

use shoal_core::Instant;

use crate::quad_heap::QuadHeap;

/// What the queue orders: (time, sequence number, slot of the event).
pub(crate) type Key = (Instant, u64, usize);

/// A bucket spans 2^20 ns, about a millisecond.
const BUCKET_SHIFT: u32 = 20;
/// Buckets in the calendar, about 4.3 s ahead.
const BUCKETS: usize = 4096;
const WORDS: usize = BUCKETS / 64;
/// Buckets up to this size are sorted by insertion (most hold one to three keys).
const INSERTION_SORT_MAX: usize = 16;
/// Buckets from this size on are radix sorted (its passes cost more than they save below).
const RADIX_SORT_MIN: usize = 256;

/// Keys, smallest first. Pushed keys must not precede the last one taken (the simulator
/// schedules nothing in the past); one that does still comes out in order, from the heap.
#[derive(Debug)]
pub(crate) struct CalendarQueue {
    /// Bucket `b` (a time's nanoseconds >> `BUCKET_SHIFT`) lives at `b % BUCKETS` while
    /// `base <= b < base + BUCKETS`.
    buckets: Vec<Vec<Key>>,
    /// Which buckets hold keys, a bit per bucket.
    occupied: [u64; WORDS],
    /// The bucket of the last key taken: no key pushed since lies before it.
    base: u64,
    /// The bucket whose keys are sorted (the earliest one, when it was found), and how many
    /// of them were taken (they stay in front until the bucket empties or another is sorted).
    sorted: Option<(u64, usize)>,
    /// Keys beyond the calendar, scheduled into the bucket being taken, or (never in
    /// practice) before the calendar.
    later: QuadHeap<Key>,
    /// Room for a large bucket's radix sort.
    scratch: Vec<Key>,
}

impl Default for CalendarQueue {
    fn default() -> Self {
        Self {
            buckets: (0..BUCKETS).map(|_| Vec::new()).collect(),
            occupied: [0; WORDS],
            base: 0,
            sorted: None,
            later: QuadHeap::default(),
            scratch: Vec::new(),
        }
    }
}

fn bucket_of(key: &Key) -> u64 {
    key.0.as_nanos() >> BUCKET_SHIFT
}

fn ring_index(bucket: u64) -> usize {
    // BUCKETS is a power of two: the remainder is the low bits.
    (bucket % BUCKETS as u64) as usize
}

impl CalendarQueue {
    /// Adds `key`.
    pub(crate) fn push(&mut self, key: Key) {
        let bucket = bucket_of(&key);
        let taking = self.sorted.is_some_and(|(sorted, _)| sorted == bucket);
        if taking || bucket < self.base || bucket - self.base >= BUCKETS as u64 {
            return self.later.push(key);
        }
        let i = ring_index(bucket);
        self.buckets[i].push(key);
        self.occupied[i / 64] |= 1 << (i % 64);
    }

    /// The key `ahead` places after the next one to be taken, if the bucket being taken holds
    /// it. For hints only: keys in later buckets are not sorted yet, and a key pushed since
    /// (into the heap of keys out of the calendar's range) may come first.
    pub(crate) fn peek(&self, ahead: usize) -> Option<Key> {
        let (bucket, taken) = self.sorted?;
        self.buckets[ring_index(bucket)].get(taken + ahead).copied()
    }

    /// Removes and returns the smallest key if it is no later than `until`.
    pub(crate) fn pop_due(&mut self, until: Instant) -> Option<Key> {
        let first = self.first_bucket().map(|bucket| {
            let taken = self.sort(bucket);
            (bucket, self.buckets[ring_index(bucket)][taken])
        });
        let from_heap = match (first, self.later.peek()) {
            (None, None) => return None,
            (Some((_, key)), Some(later)) => *later < key,
            (None, Some(_)) => true,
            (Some(_), None) => false,
        };
        if from_heap {
            let key = *self.later.peek().expect("peeked above");
            if key.0 > until {
                return None;
            }
            self.later.pop();
            self.base = self.base.max(bucket_of(&key));
            return Some(key);
        }
        let (bucket, key) = first.expect("the calendar's key is the smaller");
        if key.0 > until {
            return None;
        }
        let i = ring_index(bucket);
        let taken = self.sorted.map_or(0, |(_, taken)| taken) + 1;
        if taken == self.buckets[i].len() {
            self.buckets[i].clear();
            self.occupied[i / 64] &= !(1 << (i % 64));
            self.sorted = Some((bucket, 0));
        } else {
            self.sorted = Some((bucket, taken));
        }
        self.base = bucket;
        Some(key)
    }

    /// Makes `bucket` the sorted one (dropping the keys taken from the one before); how many
    /// of its keys were taken.
    fn sort(&mut self, bucket: u64) -> usize {
        match self.sorted {
            Some((sorted, taken)) if sorted == bucket => return taken,
            Some((sorted, taken)) => {
                self.buckets[ring_index(sorted)].drain(..taken);
            }
            None => {}
        }
        let keys = &mut self.buckets[ring_index(bucket)];
        if keys.len() <= INSERTION_SORT_MAX {
            for end in 2..=keys.len() {
                sift_down_last(&mut keys[..end]);
            }
        } else if keys.len() < RADIX_SORT_MIN {
            keys.sort_unstable();
        } else {
            // Nodes started together fire their timers together: some buckets hold hundreds
            // (thousands at 1,000 nodes).
            radix_sort(keys, &mut self.scratch);
        }
        self.sorted = Some((bucket, 0));
        0
    }

    /// The earliest bucket holding keys: the first occupied one from `base`, round the ring.
    fn first_bucket(&self) -> Option<u64> {
        let start = ring_index(self.base);
        let (word, bit) = (start / 64, start % 64);
        // The start word from `bit` up, the other words in order, then the start word below
        // `bit` (those bits are buckets a whole turn ahead).
        let first = self.occupied[word] & (u64::MAX << bit);
        let found = if first != 0 {
            Some(word * 64 + first.trailing_zeros() as usize)
        } else {
            (1..=WORDS).find_map(|step| {
                let w = (word + step) % WORDS;
                let bits = self.occupied[w];
                (bits != 0).then(|| w * 64 + bits.trailing_zeros() as usize)
            })
        }?;
        let ahead = (found + BUCKETS - start) % BUCKETS;
        Some(self.base + ahead as u64)
    }
}

/// Bits of a radix sort's digit, and how many digits a time within its bucket has.
const DIGIT_BITS: u32 = 7;
const DIGITS: usize = BUCKET_SHIFT.div_ceil(DIGIT_BITS) as usize;

/// Sorts a large bucket: by time, a least significant digit first (a bucket's times differ
/// only in their low `BUCKET_SHIFT` bits), each pass stable, then by the rest of the key. The
/// comparison sort this replaces was 4 % of a 1,000-node run.
fn radix_sort(keys: &mut Vec<Key>, scratch: &mut Vec<Key>) {
    const MASK: u64 = (1 << DIGIT_BITS) - 1;
    let digit =
        |key: &Key, d: usize| ((key.0.as_nanos() >> (d as u32 * DIGIT_BITS)) & MASK) as usize;
    let mut counts = [[0_usize; 1 << DIGIT_BITS]; DIGITS];
    for key in keys.iter() {
        for (d, count) in counts.iter_mut().enumerate() {
            count[digit(key, d)] += 1;
        }
    }
    for (d, count) in counts.iter_mut().enumerate() {
        if count.contains(&keys.len()) {
            continue; // every key has the same digit here
        }
        let mut start = 0;
        for n in count.iter_mut() {
            (*n, start) = (start, start + *n);
        }
        // Every place is written below: only a longer bucket than the last pays for filling.
        scratch.truncate(keys.len());
        scratch.resize(keys.len(), (Instant::ZERO, 0, 0));
        for key in keys.iter() {
            let at = &mut count[digit(key, d)];
            scratch[*at] = *key;
            *at += 1;
        }
        std::mem::swap(keys, scratch);
    }
    // Keys of equal times keep the order they were pushed in, which is the sequence numbers'
    // (the simulator numbers keys as it schedules them): this pass only confirms it, one
    // comparison a key, and would order any that were not.
    for end in 2..=keys.len() {
        sift_down_last(&mut keys[..end]);
    }
}

/// Moves the last key of `keys` back to its place (the others are sorted).
fn sift_down_last(keys: &mut [Key]) {
    let Some((&last, _)) = keys.split_last() else {
        return;
    };
    let mut at = keys.len() - 1;
    while at > 0 && keys[at - 1] > last {
        keys[at] = keys[at - 1];
        at -= 1;
    }
    keys[at] = last;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    use std::time::Duration;

    fn ns(nanos: u64) -> Instant {
        Instant::ZERO + Duration::from_nanos(nanos)
    }

    #[test]
    fn takes_the_order_a_binary_heap_takes() {
        let mut calendar = CalendarQueue::default();
        let mut binary = BinaryHeap::new();
        let mut rng = crate::rng::SimRng::stream(7, 0);
        let mut next = || rng.next_u64();
        let mut now = 0_u64;
        for seq in 0..200_000_u64 {
            let roll = next();
            if roll % 3 != 0 {
                // From the present: mostly within milliseconds, some seconds ahead, a few
                // beyond the calendar, many at equal times (the sequence number breaks ties).
                let ahead = match roll % 10 {
                    0..=5 => next() % 5_000_000,
                    6 | 7 => 0,
                    8 => next() % 3_000_000_000,
                    _ => next() % 90_000_000_000,
                };
                let key = (ns(now + ahead), seq, seq as usize);
                calendar.push(key);
                binary.push(Reverse(key));
            } else {
                // Now and then a bound before the next key: nothing is taken.
                let until = if roll % 7 == 0 { ns(now) } else { ns(u64::MAX) };
                let expected = binary
                    .peek()
                    .filter(|Reverse(k)| k.0 <= until)
                    .map(|Reverse(k)| *k);
                if expected.is_some() {
                    binary.pop();
                }
                let taken = calendar.pop_due(until);
                assert_eq!(taken, expected, "step {seq}");
                if let Some(key) = taken {
                    now = key.0.as_nanos();
                }
            }
        }
        while let Some(Reverse(key)) = binary.pop() {
            assert_eq!(calendar.pop_due(ns(u64::MAX)), Some(key));
        }
        assert_eq!(calendar.pop_due(ns(u64::MAX)), None);
    }

    #[test]
    fn a_crowded_bucket_comes_out_in_key_order() {
        // Thousands of keys in one millisecond, many at equal times, some pushed out of
        // sequence order: they come out sorted by time, then sequence number.
        let mut calendar = CalendarQueue::default();
        let mut rng = crate::rng::SimRng::stream(11, 0);
        let mut keys = Vec::new();
        for i in 0..3_000_u64 {
            let roll = rng.next_u64();
            let at = ns(5_000_000_000 + (roll % 300) * 5_000);
            let seq = if i % 500 == 7 { 1_000_000 - i } else { i };
            keys.push((at, seq, i as usize));
            calendar.push((at, seq, i as usize));
        }
        keys.sort_unstable();
        let taken: Vec<Key> = std::iter::from_fn(|| calendar.pop_due(ns(u64::MAX))).collect();
        assert_eq!(taken, keys);
    }

    #[test]
    fn a_peek_names_the_keys_taken_next() {
        // Keys over a few buckets: once a bucket is sorted, the keys peeked are the ones
        // taken next (what the simulator's prefetch hints rely on).
        let mut calendar = CalendarQueue::default();
        let mut rng = crate::rng::SimRng::stream(13, 0);
        for i in 0..2_000_u64 {
            let at = ns(1_000_000_000 + rng.next_u64() % 20_000_000);
            calendar.push((at, i, i as usize));
        }
        let mut taken = Vec::new();
        let mut peeked = Vec::new();
        while let Some(key) = calendar.pop_due(ns(u64::MAX)) {
            taken.push(key);
            peeked.push([calendar.peek(0), calendar.peek(1)]);
        }
        let mut named = 0;
        for (i, peeks) in peeked.iter().enumerate() {
            for (ahead, peek) in peeks.iter().enumerate() {
                if let Some(key) = peek {
                    assert_eq!(
                        Some(key),
                        taken.get(i + 1 + ahead),
                        "key {i}, {ahead} ahead"
                    );
                    named += 1;
                }
            }
        }
        assert!(named > 3_500, "most peeks name a key: {named}");
    }

    #[test]
    fn a_key_before_the_last_taken_still_comes_out_in_order() {
        let mut calendar = CalendarQueue::default();
        let at = |ms: u64| ns(ms * 1_000_000);
        calendar.push((at(50), 1, 0));
        calendar.push((at(70), 2, 0));
        assert_eq!(calendar.pop_due(at(100)), Some((at(50), 1, 0)));
        calendar.push((at(10), 3, 0));
        calendar.push((at(60), 4, 0));
        let order: Vec<u64> = std::iter::from_fn(|| calendar.pop_due(at(100)))
            .map(|k| k.1)
            .collect();
        assert_eq!(order, [3, 4, 2]);
    }
}
