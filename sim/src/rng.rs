//! All randomness of a run comes from its seed, split into independent streams per subsystem so
//! that switching one fault kind on does not shift the random choices of the others.

use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

/// One seeded stream with the few helpers the simulator needs.
#[derive(Clone, Debug)]
pub(crate) struct SimRng(ChaCha8Rng);

impl SimRng {
    /// The stream `stream` of the run seeded with `seed`.
    pub(crate) fn stream(seed: u64, stream: u64) -> Self {
        let mut key = [0u8; 32];
        key[..8].copy_from_slice(&seed.to_le_bytes());
        key[8..16].copy_from_slice(&stream.to_le_bytes());
        key[16..24].copy_from_slice(b"shoalsim");
        Self(ChaCha8Rng::from_seed(key))
    }

    /// A uniformly random `u64`.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A value in `0..bound` (`bound > 0`).
    pub(crate) fn below(&mut self, bound: u64) -> u64 {
        // Lemire's multiply-shift: unbiased enough for simulation and branch-free.
        ((u128::from(self.next_u64()) * u128::from(bound.max(1))) >> 64) as u64
    }

    /// A value in `lo..=hi`.
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// A float in `[0, 1)`.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`.
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// A duration between `lo` and `hi`.
    pub(crate) fn duration(&mut self, lo: Duration, hi: Duration) -> Duration {
        let (lo, hi) = (lo.as_micros() as u64, hi.as_micros() as u64);
        Duration::from_micros(self.range(lo, hi.max(lo)))
    }

    /// One element of a non-empty slice.
    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// Streams of one run.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Stream {
    /// Which faults are on and how hard (swarm testing).
    Options = 1,
    /// Latency, breaks, loss.
    Network = 2,
    /// Random choices of faults as they happen (restart delays of downed members, exits).
    Faults = 3,
    /// Client traffic.
    Workload = 4,
    /// Entity behaviour (stop delays, ignoring stops, passivation).
    Entities = 5,
    /// Membership detection delays.
    Membership = 6,
    /// Node seeds and clock drift.
    Nodes = 7,
    /// The fault schedule's times and targets.
    Schedule = 8,
    /// An operator's commands in the fault schedule (leaves asked by another member, downs).
    Operators = 9,
    /// Client commands other than messages (`StartEntity`).
    Commands = 10,
    /// The host's adversarial timing: forced stops, entities stopping on their own.
    Host = 11,
    /// Faults timed against membership decisions (see `schedule::plan_edges`).
    Edges = 12,
    /// Which deliveries entities answer (asks), and how long they take to.
    Replies = 13,
    /// Client queries (`GetEntityLocation`, `GetClusterShardingStats`, `SetShardLocation`).
    Queries = 14,
    /// The remember store's latency and failures.
    Store = 15,
    /// Partitions turned one-way while the majority downs the minority (see `reach`).
    LastWords = 16,
    /// Growing partitions of one side before a long one (see `reach`).
    Ratchets = 17,
    /// Quick crash-restarts of asking members (see `reach`).
    Askers = 18,
    /// Store outages timed against coordinator moves (see `plan`).
    Outages = 19,
    /// Reliable delivery's options and its producers' choices.
    Delivery = 20,
    /// Shard leases' options.
    Lease = 21,
    /// The lease store's latency and failures.
    LeaseStore = 22,
    /// The split brain resolver's strategy.
    Downing = 23,
    /// Which partitions seeds split into equal halves, and that family's strategy and leases;
    /// which mass-passivation seeds run under active-entity limits.
    Family = 24,
    /// The active-limit family's limit and replacement policy.
    Limit = 25,
    /// Whether clients use direct routes.
    Direct = 26,
}

impl SimRng {
    /// The given stream of the run seeded with `seed`.
    pub(crate) fn of(seed: u64, stream: Stream) -> Self {
        Self::stream(seed, stream as u64)
    }
}
