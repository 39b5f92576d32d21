//! How the scripted cluster carries out a node's effects: an [`Io`] borrowing the network, the
//! entity host, the remember store and the record, split from the driver it serves, so a new
//! kind of effect is a compile error here as in every host.

use std::collections::BTreeMap;

use shoal_core::{
    EntityEffect, EntityType, Event, Input, Instant, Io, MemberId, NodeId, StoreRequest, Transmit,
};

use super::host::Host;
use super::network::Network;
use super::text::{compact, describe};
use crate::rng::{SimRng, Stream};
use crate::store::{Answer, Call, SimStore, StoreSettings, Ticket};

/// The remember store every scripted node shares: the simulator's, without faults.
#[derive(Debug)]
pub(crate) struct Store {
    store: SimStore,
    tickets: BTreeMap<Ticket, (MemberId, StoreRequest)>,
}

impl Store {
    /// A fault-free store (1–5 ms per request).
    pub(crate) fn new(seed: u64) -> Self {
        Self {
            store: SimStore::new(StoreSettings::default(), SimRng::of(seed, Stream::Store)),
            tickets: BTreeMap::new(),
        }
    }

    fn submit(&mut self, now: Instant, member: MemberId, request: StoreRequest) {
        let ticket = (self.store).submit(now, member, Call::Remember(request.clone()));
        self.tickets.insert(ticket, (member, request));
    }

    /// Every id of `entity_type` the store holds, with the shard whose entry holds it, by shard.
    pub(crate) fn remembered(&self, entity_type: &EntityType) -> Vec<(String, u32)> {
        self.store.remembered_ids(entity_type)
    }

    /// When the store next answers.
    pub(crate) fn next_event(&self) -> Option<Instant> {
        self.store.next_event()
    }

    /// The answers due at `now`, as inputs to the members that asked, or what the store's own
    /// checks found broken (a write of an old epoch accepted, two allocations at one epoch).
    pub(crate) fn poll(&mut self, now: Instant) -> Result<Vec<(MemberId, Input)>, String> {
        let answers = self.store.poll(now);
        if let Some(broken) = self.store.take_violations().into_iter().next() {
            return Err(broken);
        }
        Ok(answers
            .into_iter()
            .filter_map(|(ticket, answer)| {
                let Answer::Remember(completion) = answer else {
                    return None;
                };
                let (n, request) = self.tickets.remove(&ticket)?;
                let input = Input::StoreCompleted {
                    request,
                    completion,
                };
                Some((n, input))
            })
            .collect())
    }
}

/// Something the membership log records once the driver call is over.
#[derive(Debug)]
pub(crate) enum LogEntry {
    /// A line as it is.
    Line(String),
    /// The node's view changed: each member whose status it sees differently gets a line.
    ViewOf(NodeId),
}

/// What the scripted cluster records of every node's effects.
#[derive(Debug, Default)]
pub(crate) struct Record {
    /// Every event, with the node that emitted it.
    pub(crate) events: Vec<(NodeId, Event)>,
    /// Readable lines: messages (if `trace_network`), entity effects, events, script actions.
    pub(crate) trace: Vec<String>,
    pub(crate) trace_network: bool,
    /// Membership entries of the current driver call, resolved after it.
    pub(crate) pending_log: Vec<LogEntry>,
    /// The first broken drive contract, with the node's call that broke it.
    pub(crate) broken: Option<String>,
}

/// The effects of one driver call on node `node`.
pub(crate) struct ScriptIo<'a> {
    pub(crate) node: NodeId,
    pub(crate) member: MemberId,
    pub(crate) now: Instant,
    pub(crate) network: &'a mut Network,
    pub(crate) host: &'a mut Host,
    pub(crate) store: &'a mut Store,
    pub(crate) record: &'a mut Record,
}

impl Io for ScriptIo<'_> {
    fn send(&mut self, transmit: Transmit) {
        let envelope = transmit.envelope;
        if self.record.trace_network {
            let body = envelope
                .message
                .body()
                .map_or_else(|| format!("{:?}", envelope.message), describe);
            let (now, from, to) = (self.now, envelope.from, envelope.to);
            self.record
                .trace
                .push(format!("{now} {from} -> {to} {body}"));
        }
        self.network.send(self.now, &envelope);
    }

    fn entity(&mut self, effect: EntityEffect) {
        match self.host.run(self.now, self.node, effect) {
            Ok(lines) => self.record.trace.extend(lines),
            Err(broken) => {
                self.record.broken.get_or_insert(broken);
            }
        }
    }

    fn emit(&mut self, event: Event) {
        let (now, n) = (self.now, self.node.0);
        let line = format!("{now} n{n} event {}", compact(&format!("{event:?}")));
        self.record.trace.push(line);
        match &event {
            Event::MembershipChanged => self.record.pending_log.push(LogEntry::ViewOf(self.node)),
            Event::LeftCluster { downed } => {
                let why = if *downed { "downed" } else { "removed" };
                let line = format!("{now} {} left the cluster ({why})", self.node);
                self.record.pending_log.push(LogEntry::Line(line));
            }
            _ => {}
        }
        self.record.events.push((self.node, event));
    }

    fn store(&mut self, request: StoreRequest) {
        self.store.submit(self.now, self.member, request);
    }

    fn lease(&mut self, call: shoal_core::lease::LeaseCall) {
        // Scripted specs configure no shard leases: a call is a broken contract.
        let broken = format!(
            "{} called a lease store scripted runs do not have: {call:?}",
            self.member
        );
        self.record.broken.get_or_insert(broken);
    }
}
