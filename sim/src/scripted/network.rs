//! The scripted cluster's network: every envelope travels as its encoded frame (the real codec,
//! counted), after a latency (fixed, or drawn from a range and kept FIFO per link), and a link
//! the script cut drops what is sent on it and what would arrive over it.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::time::Duration;

use shoal_core::{Envelope, Instant, NodeId, codec};

use crate::rng::SimRng;

/// A directed link: (from, to).
type Link = (NodeId, NodeId);

/// Frames in flight between the scripted cluster's nodes.
#[derive(Debug)]
pub(crate) struct Network {
    latency: (Duration, Duration),
    rng: SimRng,
    seq: u64,
    queue: BinaryHeap<Reverse<(Instant, u64, usize)>>,
    in_flight: Vec<Option<(Link, Vec<u8>)>>,
    free: Vec<usize>,
    /// When the last frame on each link arrives, so a link stays FIFO under random latency.
    link_clock: BTreeMap<Link, Instant>,
    cut: BTreeSet<Link>,
    frames: u64,
    bytes: u64,
}

impl Network {
    /// A network delivering after a latency drawn from `latency` (both ends included; equal
    /// ends: a fixed latency, no draw), with `rng` for the draws.
    pub(crate) fn new(latency: (Duration, Duration), rng: SimRng) -> Self {
        Self {
            latency,
            rng,
            seq: 0,
            queue: BinaryHeap::new(),
            in_flight: Vec::new(),
            free: Vec::new(),
            link_clock: BTreeMap::new(),
            cut: BTreeSet::new(),
            frames: 0,
            bytes: 0,
        }
    }

    /// What is sent from now on takes between `least` and `most`, drawn from `rng`.
    pub(crate) fn set_latency(&mut self, least: Duration, most: Duration, rng: SimRng) {
        self.latency = (least, most.max(least));
        self.rng = rng;
    }

    /// Sends `envelope` at `now` (dropped if its link is cut).
    ///
    /// # Panics
    /// The envelope does not fit a frame: the core never sends such a message.
    pub(crate) fn send(&mut self, now: Instant, envelope: &Envelope) {
        let link = (envelope.from.node, envelope.to.node);
        let frame = codec::encode(envelope).expect("the core's messages fit in a frame");
        self.frames += 1;
        self.bytes += frame.len() as u64;
        if self.cut.contains(&link) {
            return;
        }
        let (least, most) = self.latency;
        let latency = if most > least {
            self.rng.duration(least, most)
        } else {
            least
        };
        let clock = self.link_clock.entry(link).or_insert(Instant::ZERO);
        let at = (now + latency).max(*clock);
        *clock = at;
        self.seq += 1;
        let slot = match self.free.pop() {
            Some(slot) => {
                self.in_flight[slot] = Some((link, frame));
                slot
            }
            None => {
                self.in_flight.push(Some((link, frame)));
                self.in_flight.len() - 1
            }
        };
        self.queue.push(Reverse((at, self.seq, slot)));
    }

    /// When the next frame arrives, if one is in flight.
    pub(crate) fn next_arrival(&self) -> Option<Instant> {
        self.queue.peek().map(|Reverse((at, _, _))| *at)
    }

    /// Takes the next frame in flight: its arrival time and its envelope, `None` for the
    /// envelope if its link was cut meanwhile (it is lost).
    ///
    /// # Panics
    /// A frame does not decode: the codec does not round-trip.
    pub(crate) fn pop(&mut self) -> Option<(Instant, Option<Envelope>)> {
        let Reverse((at, _, slot)) = self.queue.pop()?;
        let (link, frame) = self.in_flight[slot].take().expect("a frame in flight");
        self.free.push(slot);
        if self.cut.contains(&link) {
            return Some((at, None));
        }
        let envelope = codec::decode(&frame).expect("the codec round-trips every frame");
        Some((at, Some(envelope)))
    }

    /// Cuts the link from `from` to `to`.
    pub(crate) fn cut(&mut self, from: NodeId, to: NodeId) {
        self.cut.insert((from, to));
    }

    /// Restores every link.
    pub(crate) fn heal(&mut self) {
        self.cut.clear();
    }

    /// Frames sent so far, and their bytes.
    pub(crate) fn sent(&self) -> (u64, u64) {
        (self.frames, self.bytes)
    }
}
