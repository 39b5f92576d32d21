//! The one drain loop shared by every host. The simulator and the tokio runtime implement
//! [`Io`]; neither writes its own loop, so the code the simulator tests is the code that runs.

use crate::effect::{Effect, EntityEffect, Event, Transmit};
use crate::id::NodeId;
use crate::input::Input;
use crate::lease::LeaseCall;
use crate::node::Node;
use crate::remember::StoreRequest;
use crate::time::Instant;

/// Most consecutive `handle_timeout` rounds one wakeup may run before the driver declares a
/// busy loop (a timer that stays due after firing is a bug in the core).
const MAX_TIMER_ROUNDS: u32 = 64;

/// Executes effects. Implemented by the simulator's and the runtime's I/O layers.
pub trait Io {
    /// Send an envelope to its member (encode, then write to the connection to the member,
    /// dialling `transmit.address` if there is none).
    fn send(&mut self, transmit: Transmit);
    /// Start, deliver to, or stop an entity.
    fn entity(&mut self, effect: EntityEffect);
    /// Hand an event to the application.
    fn emit(&mut self, event: Event);
    /// Send a request to the remember store, and feed its outcome back as
    /// `Input::StoreCompleted` (echoing the request) whenever it ends.
    fn store(&mut self, request: StoreRequest);
    /// Call the lease store; feed its outcome back as `Input::LeaseAnswered` (echoing the
    /// call) whenever it ends, a failure or a timeout as `LeaseAnswer::Failed`.
    fn lease(&mut self, call: LeaseCall);
}

/// Records effects in order, for hosts that act on them after the driver call returns (the
/// simulator, tests).
impl Io for Vec<Effect> {
    fn send(&mut self, transmit: Transmit) {
        self.push(Effect::Send(transmit));
    }
    fn entity(&mut self, effect: EntityEffect) {
        self.push(Effect::Entity(effect));
    }
    fn emit(&mut self, event: Event) {
        self.push(Effect::Event(event));
    }
    fn store(&mut self, request: StoreRequest) {
        self.push(Effect::Store(request));
    }
    fn lease(&mut self, call: LeaseCall) {
        self.push(Effect::Lease(call));
    }
}

/// Owns a [`Node`] and drives it: clamps time, runs due timers, drains every effect into an
/// [`Io`] in order, and exposes the next wakeup.
#[derive(Debug)]
pub struct Driver {
    node: Node,
    now: Instant,
    busy_loops: u64,
    /// The node's `poll_timeout` after the last call (only the driver changes the node).
    next_wakeup: Option<Instant>,
}

impl Driver {
    /// Wraps a node created at `now`.
    pub fn new(node: Node, now: Instant) -> Self {
        Self {
            next_wakeup: node.poll_timeout(),
            node,
            now,
            busy_loops: 0,
        }
    }

    /// Feeds `input` at `now` (clamped so time never goes backwards), runs due timers, and
    /// drains all effects into `io`.
    pub fn handle_input(&mut self, now: Instant, input: Input, io: &mut impl Io) {
        let now = self.advance(now);
        self.node.handle_input(now, input);
        self.drain(io);
        self.run_timers(now, io);
    }

    /// The armed wakeup fired (or a spurious wakeup): runs due timers and drains.
    pub fn handle_wakeup(&mut self, now: Instant, io: &mut impl Io) {
        let now = self.advance(now);
        self.drain(io);
        self.run_timers(now, io);
    }

    /// When the host should call [`Driver::handle_wakeup`] next.
    #[must_use]
    pub fn next_wakeup(&self) -> Option<Instant> {
        self.next_wakeup
    }

    /// The driven node, for queries and checkers.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// A hint from a host that knows which envelope it hands the driver next: starts loading
    /// the node's record of the peer at `node` (its address and link numbers, read for every
    /// envelope received from it or sent to it), so that the load overlaps with the host's
    /// work before. Changes nothing (see [`crate::hint::prefetch`]).
    pub fn prefetch_peer(&self, node: NodeId) {
        self.node.prefetch_peer(node);
    }

    /// The latest time the driver has seen.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// How many busy loops were detected (must stay zero; the simulator fails a run on it).
    pub fn busy_loops(&self) -> u64 {
        self.busy_loops
    }

    fn advance(&mut self, now: Instant) -> Instant {
        self.now = self.now.max(now);
        self.now
    }

    fn run_timers(&mut self, now: Instant, io: &mut impl Io) {
        for _ in 0..MAX_TIMER_ROUNDS {
            self.next_wakeup = self.node.poll_timeout();
            if self.next_wakeup.is_none_or(|at| at > now) {
                return;
            }
            self.node.handle_timeout(now);
            self.drain(io);
        }
        self.next_wakeup = self.node.poll_timeout();
        self.busy_loops += 1;
        tracing::error!(
            %now,
            due = ?self.node.due_timers(now),
            "busy loop: a timer stays due after firing"
        );
    }

    fn drain(&mut self, io: &mut impl Io) {
        self.node.drain_effects(|effect| match effect {
            Effect::Send(transmit) => io.send(transmit),
            Effect::Entity(effect) => io.entity(effect),
            Effect::Event(event) => io.emit(event),
            Effect::Store(request) => io.store(request),
            Effect::Lease(call) => io.lease(call),
        });
        // Debug builds (tests, fuzzing) check the node's internal invariants after every
        // drain; the simulator reports them as violations in its release builds too.
        #[cfg(debug_assertions)]
        if let Err(broken) = self.node.check_invariants() {
            panic!("a node's internal invariant broke: {broken}");
        }
    }
}
