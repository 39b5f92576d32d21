//! The simulated network: like TCP, FIFO per link and lane (a transport lets control traffic
//! overtake data, as the runtime's does; each lane stays in order). Latency is usually well
//! under a few milliseconds with a rare long tail. A link can break (everything in flight on it is lost,
//! then it reconnects), links can be blocked in one or both directions (partitions), a node or
//! a link can be clogged (messages are held until the clog ends, not lost), one link may be
//! slower than the others (see [`SlowLink`]), and, as an optional fault, a message can arrive
//! twice (the core must drop the copy).

use std::time::Duration;

use shoal_core::{Instant, Lane, NodeId};

use crate::connections::bit;
use crate::nodes::index;
use crate::options::{NetworkOptions, SlowLink};
use crate::rng::SimRng;

/// A directed link.
pub(crate) type Link = (NodeId, NodeId);

/// What the network knows about one directed link: 32 bytes, so that a link read on every
/// message sent (a million of them at 1,000 nodes) is always one cache line (at 48 bytes,
/// half of them were two). Whether it is blocked is kept apart (see [`Net::blocked_links`]).
#[derive(Clone, Copy, Debug, Default)]
struct LinkState {
    /// Latest delivery time scheduled per lane (`[control, data]`), so later messages never
    /// overtake earlier ones of their lane.
    last_delivery: [Instant; 2],
    /// Messages on the link (either direction) are held until then.
    clogged_until: Instant,
    /// The network's break count when this link last broke (see [`Net::breaks`]): what was
    /// in flight on it then is dropped.
    broken_at: u32,
    /// Envelopes of application traffic on their way (what the sender's bounded outbound
    /// queue to the peer holds).
    user_in_flight: u32,
}

/// Network state.
#[derive(Debug)]
pub(crate) struct Net {
    rng: SimRng,
    /// Per directed link, indexed `[from][to]` by address (small integers; looked up on every
    /// message, so a table beats a map).
    links: Vec<Vec<LinkState>>,
    /// Clogged nodes: everything to and from them is held until then.
    clogged_nodes: Vec<Instant>,
    /// Blocked links (partitions: they drop everything), a bit per receiver in a row per
    /// sender; read only while `blocked` says some link is.
    blocked_links: Vec<Vec<u64>>,
    /// How many links are blocked.
    blocked: usize,
    /// Probability that a message is delivered twice.
    duplicate: f64,
    /// The run's slow link, if any.
    slow: Option<SlowLink>,
    /// Share of messages delayed by 0.5–2 s.
    long_tail: f64,
    /// Most envelopes of application traffic a sender's outbound queue to a peer holds on
    /// their way (`None`: unbounded).
    outbound_cap: Option<usize>,
    /// Whether control traffic keeps its own FIFO lane (may overtake data).
    lanes: bool,
    /// Messages lost so far (breaks, partitions).
    pub(crate) lost: u64,
    /// How many times a link broke (a break, or a block, which breaks the connection too).
    /// A message that arrives when no link broke since it left arrives without a look at its
    /// link, which at 1,000 nodes is a cold read out of a million.
    breaks: u32,
}

/// A message in flight: when it arrives, and the network's break count when it left.
#[derive(Clone, Copy, Debug, Eq, Ord, PartialEq, PartialOrd)]
pub(crate) struct Flight {
    /// Arrival time.
    pub(crate) at: Instant,
    /// [`Net::breaks`] at sending.
    breaks: u32,
    /// It carries application traffic (it holds a place in the outbound queue until it ends).
    user: bool,
}

impl Net {
    /// A network as `options` describe it (duplication, the slow link, the latency tail,
    /// bounded outbound queues, lanes), drawing from `rng`.
    pub(crate) fn new(rng: SimRng, options: &NetworkOptions) -> Self {
        Self {
            rng,
            long_tail: options.long_tail,
            outbound_cap: options.outbound_cap,
            lanes: options.lanes,
            links: Vec::new(),
            clogged_nodes: Vec::new(),
            blocked_links: Vec::new(),
            blocked: 0,
            duplicate: options.duplicate,
            slow: options.slow_link,
            lost: 0,
            breaks: 0,
        }
    }

    fn link(&self, (a, b): Link) -> LinkState {
        self.links
            .get(index(a))
            .and_then(|row| row.get(index(b)))
            .copied()
            .unwrap_or_default()
    }

    /// Starts loading `link`'s state, if it has any (a hint: see
    /// [`shoal_core::hint::prefetch`]).
    pub(crate) fn prefetch_link(&self, (a, b): Link) {
        if let Some(state) = self.links.get(index(a)).and_then(|row| row.get(index(b))) {
            shoal_core::hint::prefetch(state);
        }
    }

    fn link_mut(&mut self, (a, b): Link) -> &mut LinkState {
        let (a, b) = (index(a), index(b));
        if a >= self.links.len() {
            self.links.resize_with(a + 1, Vec::new);
        }
        let nodes = self.links.len();
        let row = &mut self.links[a];
        if b >= row.len() {
            // To every address known to send at once: a row grown one peer at a time was
            // copied a dozen times as a large cluster formed.
            row.resize(b.max(nodes - 1) + 1, LinkState::default());
        }
        &mut row[b]
    }

    /// Whether `link` drops everything.
    fn is_blocked(&self, (a, b): Link) -> bool {
        let (word, bit) = bit(index(b));
        self.blocked > 0
            && self
                .blocked_links
                .get(index(a))
                .and_then(|row| row.get(word))
                .is_some_and(|w| w & bit != 0)
    }

    fn node_clog(&self, node: NodeId) -> Instant {
        self.clogged_nodes
            .get(index(node))
            .copied()
            .unwrap_or(Instant::ZERO)
    }

    /// Sends on `link` at `now`: when it arrives (nothing if the link is blocked), and when its
    /// duplicate arrives if the network makes one; `None` when it is application traffic
    /// (`user`) and the sender's outbound queue on the link is full, so it never leaves.
    pub(crate) fn send(
        &mut self,
        now: Instant,
        link: Link,
        (lane, user, slower): (Lane, bool, Duration),
    ) -> Option<[Option<Flight>; 2]> {
        let state = self.link(link);
        if user
            && self
                .outbound_cap
                .is_some_and(|cap| in_flight(state.user_in_flight) >= cap)
        {
            return None;
        }
        if self.is_blocked(link) {
            self.lost += 1;
            return Some([None, None]);
        }
        // Held by a clog on either end or on the link.
        let held = now
            .max(state.clogged_until)
            .max(self.node_clog(link.0))
            .max(self.node_clog(link.1));
        let first = self.next_arrival(link, lane, held + slower);
        let copy = (self.duplicate > 0.0 && self.rng.chance(self.duplicate))
            .then(|| self.next_arrival(link, lane, held + slower));
        let breaks = self.breaks;
        let flights = [Some(first), copy].map(|at| at.map(|at| Flight { at, breaks, user }));
        if user {
            let sent = flights.iter().flatten().count();
            let state = self.link_mut(link);
            state.user_in_flight = u32::try_from(in_flight(state.user_in_flight) + sent)
                .expect("fewer than 2^32 envelopes in flight on a link");
        }
        Some(flights)
    }

    /// The arrival of the next message sent on `link` no earlier than `from`: after the
    /// latency, and never before an earlier message of the link's lane (FIFO).
    fn next_arrival(&mut self, link: Link, lane: Lane, from: Instant) -> Instant {
        let mut latency = self.latency();
        if let Some(slow) = self.slow.filter(|s| (s.from, s.to) == link) {
            latency += slow.latency;
        }
        let lane = if self.lanes { lane } else { Lane::Data };
        let last = &mut self.link_mut(link).last_delivery[lane_index(lane)];
        *last = (from + latency).max(*last);
        *last
    }

    /// Whether a message arriving at `at` on `link` overtakes data already on its way.
    pub(crate) fn overtakes_data(&self, link: Link, at: Instant) -> bool {
        at < self.link(link).last_delivery[lane_index(Lane::Data)]
    }

    /// Holds every message to or from `node` until `until`.
    pub(crate) fn clog_node(&mut self, node: NodeId, until: Instant) {
        let i = index(node);
        if i >= self.clogged_nodes.len() {
            self.clogged_nodes.resize(i + 1, Instant::ZERO);
        }
        self.clogged_nodes[i] = self.clogged_nodes[i].max(until);
    }

    /// Holds every message between `a` and `b` (both directions) until `until`.
    pub(crate) fn clog_link(&mut self, a: NodeId, b: NodeId, until: Instant) {
        for link in [(a, b), (b, a)] {
            let state = self.link_mut(link);
            state.clogged_until = state.clogged_until.max(until);
        }
    }

    /// Whether a message that left in `flight` still arrives (its connection did not break and
    /// the link is not blocked now).
    pub(crate) fn arrives(&mut self, link: Link, flight: Flight) -> bool {
        if flight.user {
            let state = self.link_mut(link);
            state.user_in_flight = state.user_in_flight.saturating_sub(1);
        }
        // A link breaks when it is blocked, and a blocked link sends nothing: with no break
        // since the message left, its link is as it was then.
        let ok = flight.breaks == self.breaks || {
            let state = self.link(link);
            state.broken_at <= flight.breaks && !self.is_blocked(link)
        };
        if !ok {
            self.lost += 1;
        }
        ok
    }

    /// Breaks the connection between `a` and `b` in both directions.
    pub(crate) fn break_connection(&mut self, a: NodeId, b: NodeId) {
        for link in [(a, b), (b, a)] {
            self.break_link(link);
        }
    }

    /// Blocks traffic from every node of `from` to every node of `to` (and breaks those
    /// connections, losing what was in flight).
    pub(crate) fn block(&mut self, from: &[NodeId], to: &[NodeId]) {
        for &a in from {
            let row = index(a);
            if row >= self.blocked_links.len() {
                self.blocked_links.resize_with(row + 1, Vec::new);
            }
            for &b in to {
                let (word, bit) = bit(index(b));
                let row = &mut self.blocked_links[row];
                if word >= row.len() {
                    row.resize(word + 1, 0);
                }
                if row[word] & bit == 0 {
                    row[word] |= bit;
                    self.blocked += 1;
                    self.break_link((a, b));
                }
            }
        }
    }

    /// Breaks `link`'s connection: what is in flight on it is lost.
    fn break_link(&mut self, link: Link) {
        self.breaks = self
            .breaks
            .checked_add(1)
            .expect("fewer than 2^32 link breaks in a run");
        self.link_mut(link).broken_at = self.breaks;
    }

    /// Unblocks every link.
    pub(crate) fn heal(&mut self) {
        self.blocked_links.clear();
        self.blocked = 0;
    }

    /// Whether `a` and `b` reach each other in both directions.
    pub(crate) fn connected(&self, a: NodeId, b: NodeId) -> bool {
        !self.is_blocked((a, b)) && !self.is_blocked((b, a))
    }

    /// Whether any link is blocked.
    pub(crate) fn partitioned(&self) -> bool {
        self.blocked > 0
    }

    /// Sub-millisecond to a few milliseconds, with a rare long tail: 1 % of messages take
    /// 10–200 ms more, `long_tail` of them (0.1 % by default) 0.5–2 s more.
    fn latency(&mut self) -> Duration {
        let base = Duration::from_micros(self.rng.range(100, 2_000));
        let tail = self.rng.unit();
        if tail < self.long_tail {
            base + Duration::from_millis(self.rng.range(500, 2_000))
        } else if tail < self.long_tail + 0.01 {
            base + Duration::from_millis(self.rng.range(10, 200))
        } else {
            base
        }
    }
}

/// A link's count of envelopes in flight, as a length.
fn in_flight(count: u32) -> usize {
    usize::try_from(count).expect("a u32 fits a usize")
}

fn lane_index(lane: Lane) -> usize {
    match lane {
        Lane::Control => 0,
        Lane::Data => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Stream;

    fn network() -> Net {
        let options = NetworkOptions {
            slow_link: None,
            long_tail: 0.0,
            outbound_cap: None,
            lanes: false,
            duplicate: 0.0,
            slow_register_acks: None,
        };
        Net::new(SimRng::of(3, Stream::Network), &options)
    }

    fn send(net: &mut Net, link: Link) -> Flight {
        let [first, _] = net
            .send(Instant::ZERO, link, (Lane::Data, true, Duration::ZERO))
            .expect("no cap");
        first.expect("the link is open")
    }

    #[test]
    fn a_link_state_fits_half_a_cache_line() {
        assert_eq!(size_of::<LinkState>(), 32);
    }

    #[test]
    fn breaks_and_blocks_lose_what_is_in_flight_on_their_links_only() {
        let (a, b, c) = (NodeId(0), NodeId(1), NodeId(2));
        let mut net = network();
        let (ab, ac) = (send(&mut net, (a, b)), send(&mut net, (a, c)));
        assert!(
            net.arrives((a, b), ab) && net.arrives((a, c), ac),
            "nothing broke"
        );
        let (ab, ba, ac) = (
            send(&mut net, (a, b)),
            send(&mut net, (b, a)),
            send(&mut net, (a, c)),
        );
        net.break_connection(a, b);
        let after = send(&mut net, (a, b));
        assert!(!net.arrives((a, b), ab), "sent before the break");
        assert!(!net.arrives((b, a), ba), "both directions break");
        assert!(net.arrives((a, c), ac), "another link");
        assert!(net.arrives((a, b), after), "sent after the break");
        let ca = send(&mut net, (c, a));
        net.block(&[c], &[a]);
        assert!(!net.arrives((c, a), ca), "blocked while in flight");
        assert_eq!(
            net.send(Instant::ZERO, (c, a), (Lane::Data, false, Duration::ZERO)),
            Some([None, None])
        );
        net.heal();
        let ca = send(&mut net, (c, a));
        assert!(net.arrives((c, a), ca), "healed");
        assert_eq!(net.lost, 4);
    }

    #[test]
    fn blocks_are_per_direction_and_per_link_until_healed() {
        let (a, b, far) = (NodeId(0), NodeId(1), NodeId(70));
        let mut net = network();
        assert!(!net.partitioned());
        net.block(&[a], &[far, b]);
        net.block(&[a], &[far]);
        assert!(net.partitioned());
        assert!(
            !net.connected(a, far) && !net.connected(a, b),
            "either direction blocked"
        );
        assert!(net.connected(b, far), "links between others");
        let sent = |net: &mut Net, link| {
            net.send(Instant::ZERO, link, (Lane::Data, false, Duration::ZERO))
        };
        assert_eq!(sent(&mut net, (a, far)), Some([None, None]));
        let back = sent(&mut net, (far, a)).expect("no cap")[0].expect("one way only");
        assert!(
            net.arrives((far, a), back),
            "the other direction stays open"
        );
        net.heal();
        assert!(!net.partitioned() && net.connected(a, far));
        let healed = sent(&mut net, (a, far)).expect("no cap")[0].expect("open again");
        assert!(net.arrives((a, far), healed));
    }
}
