//! An in-process cluster of core `Driver`s on an instant, lossless network: what the core rows
//! measure. Every envelope crosses the real codec (encode, decode), and the host answers entity
//! stops at once, so handoffs complete as they would behind a runtime.

use std::collections::VecDeque;
use std::time::Duration;

use shoal_core::{
    AllocationStrategyConfig, Config, Driver, EntityEffect, EntityId, EntityType, EntityTypeConfig,
    Envelope, Event, Incarnation, Input, Instant, Io, Member, MemberId, MembershipView, Node,
    NodeId, Payload, StoreRequest, Transmit, codec,
};

/// The entity type every core row uses.
pub(crate) const TYPE: &str = "counter";

/// What one node's host saw.
#[derive(Default)]
pub(crate) struct LabIo {
    /// Messages delivered to entities.
    pub(crate) delivered: usize,
    outbox: Vec<Envelope>,
    stopped: Vec<EntityId>,
}

impl Io for LabIo {
    fn send(&mut self, transmit: Transmit) {
        self.outbox.push(*transmit.envelope);
    }

    fn entity(&mut self, effect: EntityEffect) {
        match effect {
            EntityEffect::Deliver { .. } => self.delivered += 1,
            EntityEffect::Stop { entity, .. } => self.stopped.push(entity),
            EntityEffect::Start { .. } => {}
        }
    }

    fn emit(&mut self, _event: Event) {}

    fn store(&mut self, request: StoreRequest) {
        unreachable!("the bench's type remembers nothing: {request:?}");
    }

    fn lease(&mut self, call: shoal_core::lease::LeaseCall) {
        unreachable!("the bench's type holds no shard leases: {call:?}");
    }
}

/// Nodes `1..=n` of one cluster, all Up, sharing one membership view.
pub(crate) struct Lab {
    /// The nodes' drivers, node `i + 1` at index `i`.
    pub(crate) drivers: Vec<Driver>,
    /// Their hosts.
    pub(crate) io: Vec<LabIo>,
    /// Simulated time.
    pub(crate) now: Instant,
    /// The type's name, made once and shared with the nodes' configs, as a runtime's region
    /// handle shares its node's: a new one per message would charge an allocation to the core.
    pub(crate) entity_type: EntityType,
    shards: u32,
    allocation: AllocationStrategyConfig,
}

impl Lab {
    /// A cluster of `nodes` hosting one type with `shards` shards.
    pub(crate) fn new(nodes: u64, shards: u32, allocation: AllocationStrategyConfig) -> Self {
        let mut lab = Self {
            drivers: Vec::new(),
            io: Vec::new(),
            now: Instant::ZERO,
            entity_type: EntityType::new(TYPE),
            shards,
            allocation,
        };
        lab.grow(nodes);
        lab
    }

    /// Adds members until there are `nodes`, tells every node the new view and lets the new
    /// regions register.
    pub(crate) fn grow(&mut self, nodes: u64) {
        for n in self.drivers.len() as u64 + 1..=nodes {
            let mut t = EntityTypeConfig::new(TYPE);
            // The config and the tells share one name, as a runtime's region handle and its
            // node do (names compare by pointer first).
            t.name = self.entity_type.clone();
            t.number_of_shards = self.shards;
            t.passivate_idle_after = None;
            t.allocation = self.allocation.clone();
            let mut c = Config::new(NodeId(n), Incarnation(1)).with_entity_type(t);
            c.seed = n;
            let node = Node::new(c, self.now).expect("the bench's config is valid");
            self.drivers.push(Driver::new(node, self.now));
            self.io.push(LabIo::default());
        }
        let view = MembershipView::new(
            (1..=nodes)
                .map(|n| Member::up(MemberId::new(n, 1), n, &[]))
                .collect(),
        );
        for (d, io) in self.drivers.iter_mut().zip(self.io.iter_mut()) {
            d.handle_input(self.now, Input::MembershipChanged(view.clone()), io);
        }
        self.pump();
    }

    /// Tells `entity` a 32-byte message at node `from` (1-based).
    pub(crate) fn tell(&mut self, from: u64, entity: &EntityId) {
        let i = (from - 1) as usize;
        let input = self.tell_input(entity);
        self.drivers[i].handle_input(self.now, input, &mut self.io[i]);
    }

    /// Delivers every queued envelope and entity stop until nothing moves.
    pub(crate) fn pump(&mut self) {
        let mut queue = VecDeque::new();
        loop {
            for io in &mut self.io {
                queue.extend(io.outbox.drain(..));
            }
            let mut moved = !queue.is_empty();
            while let Some(env) = queue.pop_front() {
                let frame = codec::encode(&env).expect("encodes");
                let env = codec::decode(&frame).expect("decodes");
                let to = (env.to.node.0 - 1) as usize;
                self.drivers[to].handle_input(
                    self.now,
                    Input::Receive(Box::new(env)),
                    &mut self.io[to],
                );
                queue.extend(self.io[to].outbox.drain(..));
            }
            for i in 0..self.io.len() {
                for entity in std::mem::take(&mut self.io[i].stopped) {
                    moved = true;
                    let stopped = Input::EntityStopped {
                        entity_type: self.entity_type.clone(),
                        entity,
                    };
                    self.drivers[i].handle_input(self.now, stopped, &mut self.io[i]);
                }
            }
            if !moved {
                return;
            }
        }
    }

    /// A 32-byte `Tell` for `entity`, as a host makes it.
    pub(crate) fn tell_input(&self, entity: &EntityId) -> Input {
        Input::Tell {
            entity_type: self.entity_type.clone(),
            entity: entity.clone(),
            payload: Payload(vec![7; 32]),
        }
    }

    /// Moves time forward by `by`, firing every timer due, and pumps.
    pub(crate) fn advance(&mut self, by: Duration) {
        self.now += by;
        for (d, io) in self.drivers.iter_mut().zip(self.io.iter_mut()) {
            d.handle_wakeup(self.now, io);
        }
        self.pump();
    }

    /// Shards each node hosts.
    pub(crate) fn hosted(&self) -> Vec<usize> {
        self.drivers
            .iter()
            .map(|d| d.node().hosted_shards(&self.entity_type).len())
            .collect()
    }
}

/// One entity id per shard of `shards` (the first id found hashing to it).
pub(crate) fn one_entity_per_shard(shards: u32) -> Vec<EntityId> {
    let mut found: Vec<Option<EntityId>> = vec![None; shards as usize];
    let mut missing = shards as usize;
    let mut i = 0u64;
    while missing > 0 {
        let id = EntityId::new(format!("e{i}"));
        let slot = &mut found[shoal_core::shard_of(&id, shards).0 as usize];
        if slot.is_none() {
            *slot = Some(id);
            missing -= 1;
        }
        i += 1;
    }
    found.into_iter().flatten().collect()
}
