//! The simulator's [`Io`]: a driver call's effects are kept, in order, and carried out once the
//! call returns, because carrying them out reads the nodes (the sender's view routes a message,
//! the coordinator's table judges a rebalance round), the driven node included, which the
//! driver holds during the call. Each kind of effect is a variant of its own here, so a new
//! kind is a compile error in the simulator as in every host.

use std::collections::VecDeque;

use shoal_core::lease::LeaseCall;
use shoal_core::{EntityEffect, Event, Io, StoreRequest, Transmit};

/// One effect of a driver call, kept until the call returns.
#[derive(Debug)]
pub(super) enum Deferred {
    Send(Transmit),
    Entity(EntityEffect),
    Event(Event),
    Store(StoreRequest),
    Lease(LeaseCall),
}

/// Keeps a driver call's effects in `0`, in order (taken from the front once the call returns:
/// a queue, so no drain iterator is built and dropped per call).
pub(super) struct DeferIo<'a>(pub(super) &'a mut VecDeque<Deferred>);

impl Io for DeferIo<'_> {
    fn send(&mut self, transmit: Transmit) {
        self.0.push_back(Deferred::Send(transmit));
    }
    fn entity(&mut self, effect: EntityEffect) {
        self.0.push_back(Deferred::Entity(effect));
    }
    fn emit(&mut self, event: Event) {
        self.0.push_back(Deferred::Event(event));
    }
    fn store(&mut self, request: StoreRequest) {
        self.0.push_back(Deferred::Store(request));
    }
    fn lease(&mut self, call: LeaseCall) {
        self.0.push_back(Deferred::Lease(call));
    }
}
