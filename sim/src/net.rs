//! The simulated network: like TCP, FIFO per link. Latency is usually well under a few
//! milliseconds with a rare long tail. A link can break (everything in flight on it is lost,
//! then it reconnects), links can be blocked in one or both directions (partitions), a node or
//! a link can be clogged (messages are held until the clog ends, not lost), and, as an optional
//! fault, a message can arrive twice (the core must drop the copy).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use shoal_core::{Instant, NodeId};

use crate::rng::SimRng;

/// A directed link.
pub(crate) type Link = (NodeId, NodeId);

/// Network state.
#[derive(Debug)]
pub(crate) struct Net {
    rng: SimRng,
    /// Latest delivery time scheduled per link, so later messages never overtake earlier ones.
    last_delivery: BTreeMap<Link, Instant>,
    /// Connection generation per link; a break bumps it and in-flight messages are dropped.
    generation: BTreeMap<Link, u64>,
    /// Links that currently drop everything.
    blocked: BTreeSet<Link>,
    /// Clogged nodes and links (either direction, smaller address first): held until then.
    clogged_nodes: BTreeMap<NodeId, Instant>,
    clogged_links: BTreeMap<Link, Instant>,
    /// Probability that a message is delivered twice.
    duplicate: f64,
    /// Messages lost so far (breaks, partitions).
    pub(crate) lost: u64,
}

/// A message in flight: when it arrives and on which connection generation it was sent.
#[derive(Clone, Copy, Debug, Eq, Ord, PartialEq, PartialOrd)]
pub(crate) struct Flight {
    /// Arrival time.
    pub(crate) at: Instant,
    /// Connection generation at sending.
    pub(crate) generation: u64,
}

impl Net {
    /// A network drawing latencies from `rng` that duplicates messages with probability
    /// `duplicate`.
    pub(crate) fn new(rng: SimRng, duplicate: f64) -> Self {
        Self {
            rng,
            last_delivery: BTreeMap::new(),
            generation: BTreeMap::new(),
            blocked: BTreeSet::new(),
            clogged_nodes: BTreeMap::new(),
            clogged_links: BTreeMap::new(),
            duplicate,
            lost: 0,
        }
    }

    /// Sends on `link` at `now`: when it arrives (nothing if the link is blocked), and when its
    /// duplicate arrives if the network makes one.
    pub(crate) fn send(&mut self, now: Instant, link: Link) -> [Option<Flight>; 2] {
        if self.blocked.contains(&link) {
            self.lost += 1;
            return [None, None];
        }
        let generation = self.generation.get(&link).copied().unwrap_or(0);
        let held = self.held_until(link, now);
        let first = self.next_arrival(link, held);
        let copy = (self.duplicate > 0.0 && self.rng.chance(self.duplicate))
            .then(|| self.next_arrival(link, held));
        [Some(first), copy].map(|at| at.map(|at| Flight { at, generation }))
    }

    /// The arrival of the next message sent on `link` no earlier than `from`: after the
    /// latency, and never before an earlier message of the link (FIFO).
    fn next_arrival(&mut self, link: Link, from: Instant) -> Instant {
        let latency = self.latency();
        let last = self.last_delivery.entry(link).or_insert(Instant::ZERO);
        *last = (from + latency).max(*last);
        *last
    }

    /// When a message sent on `link` at `now` may leave: after any clog on its ends or the link.
    fn held_until(&self, (a, b): Link, now: Instant) -> Instant {
        let pair = (a.min(b), a.max(b));
        [
            self.clogged_nodes.get(&a),
            self.clogged_nodes.get(&b),
            self.clogged_links.get(&pair),
        ]
        .into_iter()
        .flatten()
        .fold(now, |at, until| at.max(*until))
    }

    /// Holds every message to or from `node` until `until`.
    pub(crate) fn clog_node(&mut self, node: NodeId, until: Instant) {
        let at = self.clogged_nodes.entry(node).or_insert(until);
        *at = (*at).max(until);
    }

    /// Holds every message between `a` and `b` (both directions) until `until`.
    pub(crate) fn clog_link(&mut self, a: NodeId, b: NodeId, until: Instant) {
        let at = self
            .clogged_links
            .entry((a.min(b), a.max(b)))
            .or_insert(until);
        *at = (*at).max(until);
    }

    /// Whether a message that left in `flight` still arrives (its connection did not break and
    /// the link is not blocked now).
    pub(crate) fn arrives(&mut self, link: Link, flight: Flight) -> bool {
        let current = self.generation.get(&link).copied().unwrap_or(0);
        let ok = current == flight.generation && !self.blocked.contains(&link);
        if !ok {
            self.lost += 1;
        }
        ok
    }

    /// Breaks the connection between `a` and `b` in both directions.
    pub(crate) fn break_connection(&mut self, a: NodeId, b: NodeId) {
        for link in [(a, b), (b, a)] {
            *self.generation.entry(link).or_default() += 1;
        }
    }

    /// Blocks traffic from every node of `from` to every node of `to` (and breaks those
    /// connections, losing what was in flight).
    pub(crate) fn block(&mut self, from: &[NodeId], to: &[NodeId]) {
        for &a in from {
            for &b in to {
                self.blocked.insert((a, b));
                *self.generation.entry((a, b)).or_default() += 1;
            }
        }
    }

    /// Unblocks every link.
    pub(crate) fn heal(&mut self) {
        self.blocked.clear();
    }

    /// Whether `a` and `b` reach each other in both directions.
    pub(crate) fn connected(&self, a: NodeId, b: NodeId) -> bool {
        !self.blocked.contains(&(a, b)) && !self.blocked.contains(&(b, a))
    }

    /// Whether any link is blocked.
    pub(crate) fn partitioned(&self) -> bool {
        !self.blocked.is_empty()
    }

    /// Sub-millisecond to a few milliseconds, with a rare long tail.
    fn latency(&mut self) -> Duration {
        let base = Duration::from_micros(self.rng.range(100, 2_000));
        if self.rng.chance(0.001) {
            base + Duration::from_millis(self.rng.range(500, 2_000))
        } else if self.rng.chance(0.01) {
            base + Duration::from_millis(self.rng.range(10, 200))
        } else {
            base
        }
    }
}
