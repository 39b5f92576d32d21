//! Direct routes, as the runtime's fast path uses them: each member's clients send straight to
//! a running incarnation of an entity once `shoal_core::direct::RouteGate` opened the route,
//! and through the node otherwise; each member's reader of a peer's envelopes does the same
//! with the peer's letters (`links`). The routes are judged like every other delivery (order
//! per sender, exactly once, only to a live incarnation, never to one told to stop), and
//! direct deliveries reach the node as `Input::Accessed` before its next call, as the runtime
//! feeds them before its next round. The negative controls break one rule each.

use std::collections::BTreeMap;

use shoal_core::direct::{AccessLog, LinkNumbers, RouteChange, RouteGate, Sender};
use shoal_core::{EntityEffect, EntityId, Input, MemberId, NodeId, Payload};

use crate::check::Property;
use crate::options::DirectFault;

use super::Simulator;
use super::host::Via;

/// Every member's direct routes.
#[derive(Debug, Default)]
pub(crate) struct DirectRoutes {
    /// The rule deliberately broken, in a negative control.
    pub(super) fault: Option<DirectFault>,
    /// Each node's gate (one letter in flight at a time, as the host feeds one).
    gates: BTreeMap<NodeId, RouteGate>,
    /// Open routes, per member and sender: to which incarnation of the entity (its host
    /// number).
    open: BTreeMap<(MemberId, EntityId, Sender), u64>,
    /// Direct deliveries each node has not heard of yet.
    accessed: BTreeMap<NodeId, AccessLog>,
    /// Each member's reader of each peer's envelopes: the link's number and its account.
    pub(super) links: BTreeMap<(MemberId, MemberId), (u64, LinkNumbers)>,
    /// The number of the next link a reader opens.
    pub(super) next_link: u64,
}

impl DirectRoutes {
    /// Routes with `fault` broken, if any.
    pub(crate) fn new(fault: Option<DirectFault>) -> Self {
        Self {
            fault,
            ..Self::default()
        }
    }
}

impl Simulator {
    /// Sends `payload` from `sender` to `entity` on a direct route, if it has one to the
    /// running incarnation; gives it back otherwise (or when the mailbox is full).
    pub(super) fn send_direct(
        &mut self,
        sender: MemberId,
        entity: &EntityId,
        payload: Payload,
    ) -> Option<Payload> {
        let Some(routes) = &self.direct else {
            return Some(payload);
        };
        let Some(&incarnation) = routes.open.get(&(sender, entity.clone(), Sender::Local)) else {
            return Some(payload);
        };
        // A paused process sends nothing until it resumes (through the node, then); a route
        // to an incarnation that ended fails as a closed mailbox does.
        let paused = self.nodes.get(&sender.node).is_none_or(|n| n.is_paused());
        if paused {
            return Some(payload);
        }
        self.hand_over_direct(sender, entity, incarnation, payload)
    }

    /// Hands `payload` to `member`'s running incarnation of `entity` on a route granted for
    /// `incarnation`; gives it back if that incarnation ended or its mailbox is full.
    pub(super) fn hand_over_direct(
        &mut self,
        member: MemberId,
        entity: &EntityId,
        incarnation: u64,
        payload: Payload,
    ) -> Option<Payload> {
        let running = self.host.running(member, entity).map(|(_, _, i)| i);
        if running != Some(incarnation) {
            return Some(payload);
        }
        if self.host.stop_requested(member, entity) {
            // The gate closed the route when the node asked for the stop.
            let detail = format!("{member}: a direct letter reached an incarnation told to stop");
            self.check
                .fail(self.now, Property::HostContract, entity, detail);
        }
        let refused = self.hand_over(member, entity.clone(), payload, Via::Direct);
        if refused.is_none() {
            self.note_direct_access(member, entity);
        }
        refused
    }

    /// The incarnation `sender`'s route at `member` to `entity` was granted for, if it is open.
    pub(super) fn open_route(
        &self,
        member: MemberId,
        sender: Sender,
        entity: &EntityId,
    ) -> Option<u64> {
        let routes = self.direct.as_ref()?;
        routes.open.get(&(member, entity.clone(), sender)).copied()
    }

    /// A direct letter was handed over: its node hears of the access before its next call.
    fn note_direct_access(&mut self, member: MemberId, entity: &EntityId) {
        let ty = self.ty.clone();
        if let Some(routes) = &mut self.direct {
            routes
                .accessed
                .entry(member.node)
                .or_default()
                .note(&ty, entity);
        }
        self.mark("a letter went to its entity on a direct route");
    }

    /// `member`'s node is about to be fed a letter of `sender` to `entity`.
    pub(super) fn begin_letter(&mut self, member: MemberId, sender: Sender, entity: &EntityId) {
        let ty = self.ty.clone();
        if let Some(routes) = &mut self.direct {
            let gate = routes.gates.entry(member.node).or_default();
            gate.begin_letter(sender, &ty, entity);
        }
    }

    /// The node's call with the letter is done: its sender's route opens or closes.
    pub(super) fn end_letter(&mut self, member: MemberId) {
        let change = (self.direct.as_mut())
            .and_then(|routes| routes.gates.get_mut(&member.node))
            .and_then(RouteGate::end_letter);
        if let Some(change) = change {
            self.apply_route_change(member, change);
        }
    }

    /// An entity effect of `member`'s node, before it is carried out.
    pub(super) fn direct_effect(&mut self, member: MemberId, effect: &EntityEffect) {
        let change = (self.direct.as_mut())
            .and_then(|routes| routes.gates.get_mut(&member.node))
            .and_then(|gate| gate.handle_effect(effect));
        if let Some(change) = change {
            self.apply_route_change(member, change);
        }
    }

    /// Opens or closes routes at `member`.
    fn apply_route_change(&mut self, member: MemberId, change: RouteChange) {
        let Some(routes) = &mut self.direct else {
            return;
        };
        let running = |entity: &EntityId| self.host.running(member, entity).map(|(_, _, i)| i);
        let closed = match change {
            RouteChange::Open(sender, _, entity) => {
                if let Some(incarnation) = running(&entity) {
                    routes.open.insert((member, entity, sender), incarnation);
                }
                false
            }
            RouteChange::Close(sender, _, entity) => match routes.fault {
                Some(DirectFault::OpenUndrained) => {
                    // Opens wherever the entity runs, whether the letter was handed over.
                    if let Some(incarnation) = running(&entity) {
                        routes.open.insert((member, entity, sender), incarnation);
                    }
                    false
                }
                _ => routes.open.remove(&(member, entity, sender)).is_some(),
            },
            RouteChange::CloseAll(_, entity) => match routes.fault {
                Some(DirectFault::KeepAfterStop) => false,
                _ => {
                    let all = (member, entity.clone(), Sender::Local)
                        ..=(member, entity, Sender::Link(u64::MAX));
                    let senders: Vec<_> = routes.open.range(all).map(|(k, _)| k.clone()).collect();
                    for key in &senders {
                        routes.open.remove(key);
                    }
                    !senders.is_empty()
                }
            },
        };
        if closed {
            self.mark("a direct route closed");
        }
    }

    /// The accesses `n`'s node has not heard of, to feed it before its next call.
    pub(super) fn take_accessed(&mut self, n: NodeId) -> Vec<Input> {
        let Some(routes) = &mut self.direct else {
            return Vec::new();
        };
        match routes.accessed.get_mut(&n) {
            Some(log) if !log.is_empty() => log.take_inputs(),
            _ => Vec::new(),
        }
    }

    /// `member`'s process is gone: its routes with it.
    pub(super) fn direct_routes_gone(&mut self, member: MemberId) {
        if let Some(routes) = &mut self.direct {
            routes.open.retain(|(m, _, _), _| *m != member);
            routes.accessed.remove(&member.node);
            routes.links.retain(|(m, _), _| *m != member);
        }
    }
}
