//! A small in-test network for node-level tests: nodes driven by the real `Driver`, one FIFO
//! queue for all links, a host that runs entities by recording them, virtual time, and a
//! readable trace of everything that crossed the network or reached an entity.

#![allow(dead_code, unreachable_pub)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use shoal_core::{
    Body, Command, Config, Driver, Effect, EntityEffect, EntityId, EntityType, EntityTypeConfig,
    Envelope, Event, Incarnation, Input, Instant, Member, MemberId, MembershipView, Node, NodeId,
    Payload, RequestId, StopReason,
};

pub const TYPE: &str = "counter";

/// How the test host answers entity stops.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum StopPolicy {
    /// Report `EntityStopped` right away.
    Immediate,
    /// Keep stops pending until the test calls `complete_stops`.
    Manual,
    /// Ignore graceful stops; obey only forced ones.
    IgnoreGraceful,
}

pub struct TestCluster {
    pub now: Instant,
    nodes: BTreeMap<NodeId, Driver>,
    members: BTreeMap<NodeId, Member>,
    /// Members removed from the view (tombstones, listed in every view).
    removed: BTreeSet<MemberId>,
    inflight: VecDeque<Envelope>,
    /// Links that drop everything (from, to).
    cut: BTreeSet<(NodeId, NodeId)>,
    host_inputs: VecDeque<(NodeId, Input)>,
    pub stop_policy: StopPolicy,
    pending_stops: Vec<(NodeId, EntityType, EntityId)>,
    /// Running entities: (node, entity).
    pub alive: BTreeSet<(NodeId, String)>,
    /// Every delivery: (node, entity, payload text).
    pub deliveries: Vec<(NodeId, String, String)>,
    pub events: Vec<(NodeId, Event)>,
    pub trace: Vec<String>,
    /// Record network messages in the trace.
    pub trace_network: bool,
    next_request: u64,
}

pub fn member(n: u64) -> MemberId {
    MemberId::new(n, 1)
}

/// The first id `e0`, `e1`, ... whose shard (of `shards`) is `shard`.
pub fn entity_in_shard(shard: u32, shards: u32) -> String {
    (0..)
        .map(|i| format!("e{i}"))
        .find(|id| shoal_core::shard_of(&EntityId::new(id.as_str()), shards).0 == shard)
        .expect("some id hashes to every shard")
}

pub fn type_config(shards: u32) -> EntityTypeConfig {
    let mut t = EntityTypeConfig::new(TYPE);
    t.number_of_shards = shards;
    t.passivate_idle_after = None;
    t
}

pub fn config(n: u64, entity_type: EntityTypeConfig) -> Config {
    let mut c = Config::new(NodeId(n), Incarnation(1)).with_entity_type(entity_type);
    c.seed = n;
    c
}

impl TestCluster {
    pub fn new() -> Self {
        Self {
            now: Instant::ZERO,
            nodes: BTreeMap::new(),
            members: BTreeMap::new(),
            removed: BTreeSet::new(),
            inflight: VecDeque::new(),
            cut: BTreeSet::new(),
            host_inputs: VecDeque::new(),
            stop_policy: StopPolicy::Immediate,
            pending_stops: Vec::new(),
            alive: BTreeSet::new(),
            deliveries: Vec::new(),
            events: Vec::new(),
            trace: Vec::new(),
            trace_network: true,
            next_request: 1,
        }
    }

    /// `n` nodes with up-numbers 1..=n (node 1 is the oldest), all Up, one type of `shards`.
    pub fn with_nodes(n: u64, shards: u32) -> Self {
        let mut cluster = Self::new();
        for i in 1..=n {
            cluster.add_node(config(i, type_config(shards)));
        }
        cluster.publish_view();
        cluster.settle();
        cluster
    }

    /// Adds a node (not yet a member: call `publish_view` or `join`).
    pub fn add_node(&mut self, config: Config) {
        let id = config.member_id();
        let roles: Vec<String> = config.roles.iter().cloned().collect();
        // The view says which types it hosts, as a node managing membership would.
        let hosts: Vec<EntityType> = config
            .entity_types
            .iter()
            .filter(|t| !t.proxy_only && t.role.as_ref().is_none_or(|r| config.roles.contains(r)))
            .map(|t| t.name.clone())
            .collect();
        let node = Node::new(config, self.now).expect("valid config");
        self.nodes.insert(id.node, Driver::new(node, self.now));
        let up_number = self
            .members
            .values()
            .map(|m| m.up_number)
            .max()
            .unwrap_or(0)
            + 1;
        let roles: Vec<&str> = roles.iter().map(String::as_str).collect();
        let member = Member::up(id, up_number, &roles).hosting(&hosts);
        self.members.insert(id.node, member);
    }

    /// Node ids currently running.
    pub fn running(&self) -> Vec<u64> {
        self.nodes.keys().map(|n| n.0).collect()
    }

    pub fn node(&self, n: u64) -> &Node {
        self.nodes[&NodeId(n)].node()
    }

    pub fn member_mut(&mut self, n: u64) -> &mut Member {
        self.members.get_mut(&NodeId(n)).expect("member")
    }

    /// Removes a member from the view (it stays running, as if partitioned and downed).
    pub fn remove_member(&mut self, n: u64) {
        if let Some(m) = self.members.remove(&NodeId(n)) {
            self.removed.insert(m.id);
        }
    }

    /// Stops a node entirely (crash) and removes it from the view.
    pub fn crash(&mut self, n: u64) {
        self.nodes.remove(&NodeId(n));
        self.remove_member(n);
        self.alive.retain(|(node, _)| *node != NodeId(n));
        self.trace.push(format!("{} n{n} crashed", self.now));
    }

    /// Tells every running node the current membership.
    pub fn publish_view(&mut self) {
        let view = self.view();
        let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
        for id in ids {
            self.input(id.0, Input::MembershipChanged(view.clone()));
        }
    }

    pub fn cut_link(&mut self, from: u64, to: u64) {
        self.cut.insert((NodeId(from), NodeId(to)));
    }

    pub fn heal(&mut self) {
        self.cut.clear();
    }

    pub fn tell(&mut self, n: u64, entity: &str, payload: &str) {
        let input = Input::Tell {
            entity_type: EntityType::new(TYPE),
            entity: EntityId::new(entity),
            payload: Payload::from(payload.as_bytes()),
        };
        self.input(n, input);
    }

    /// Sends `payload` from node `from` to one entity in each of `shards` shards and settles;
    /// returns the entity ids (entity `i` lives in shard `i`).
    pub fn one_entity_per_shard(&mut self, from: u64, shards: u32, payload: &str) -> Vec<String> {
        let ids: Vec<String> = (0..shards).map(|s| entity_in_shard(s, shards)).collect();
        for id in &ids {
            self.tell(from, id, payload);
        }
        self.settle();
        ids
    }

    pub fn command(&mut self, n: u64, command: Command) -> RequestId {
        let request = RequestId(self.next_request);
        self.next_request += 1;
        self.input(n, Input::Command { request, command });
        request
    }

    /// The reply event for a request, if it arrived.
    pub fn reply(&self, request: RequestId) -> Option<&Event> {
        self.events
            .iter()
            .map(|(_, e)| e)
            .find(|e| matches!(e, Event::Reply { request: r, .. } if *r == request))
    }

    pub fn passivate(&mut self, n: u64, entity: &str) {
        let input = Input::Passivate {
            entity_type: EntityType::new(TYPE),
            entity: EntityId::new(entity),
        };
        self.input(n, input);
    }

    /// Feeds one input to a node and processes its effects.
    pub fn input(&mut self, n: u64, input: Input) {
        let mut io: Vec<Effect> = Vec::new();
        let Some(driver) = self.nodes.get_mut(&NodeId(n)) else {
            return;
        };
        driver.handle_input(self.now, input, &mut io);
        self.absorb(NodeId(n), io);
    }

    /// Delivers in-flight messages (and the host reports they cause) one by one until `done`
    /// holds, without advancing time; messages still in flight then stay there.
    pub fn settle_until(&mut self, mut done: impl FnMut(&Self) -> bool) {
        while !done(self) {
            let envelope = self.inflight.pop_front().expect("nothing left in flight");
            if !self.cut.contains(&(envelope.from.node, envelope.to.node)) {
                self.input(envelope.to.node.0, Input::Receive(envelope));
            }
            while let Some((n, input)) = self.host_inputs.pop_front() {
                self.input(n.0, input);
            }
        }
    }

    /// Shuts node `n`'s regions down gracefully and delivers messages until it emits
    /// `RegionStopped` (what it still has to say stays in flight).
    pub fn shut_down_until_stopped(&mut self, n: u64) {
        self.command(n, Command::GracefulShutdown { entity_type: None });
        self.settle_until(|c| {
            c.events
                .iter()
                .any(|(m, e)| m.0 == n && matches!(e, Event::RegionStopped { .. }))
        });
    }

    /// Tells one node the current membership (the others learn it later, if at all).
    pub fn publish_view_to(&mut self, n: u64) {
        let view = self.view();
        self.input(n, Input::MembershipChanged(view));
    }

    /// The current membership, with the tombstones of the members removed so far.
    pub fn view(&self) -> MembershipView {
        MembershipView::new(self.members.values().cloned().collect())
            .with_removed(self.removed.iter().copied())
    }

    /// Delivers messages and host reports until nothing is left, without advancing time.
    pub fn settle(&mut self) {
        for _ in 0..100_000 {
            if let Some(envelope) = self.inflight.pop_front() {
                if self.cut.contains(&(envelope.from.node, envelope.to.node)) {
                    continue;
                }
                self.input(envelope.to.node.0, Input::Receive(envelope));
            } else if let Some((n, input)) = self.host_inputs.pop_front() {
                self.input(n.0, input);
            } else {
                return;
            }
        }
        panic!("cluster did not settle");
    }

    /// Advances virtual time by `d`, firing every timer on the way and settling after each.
    pub fn advance(&mut self, d: Duration) {
        let target = self.now + d;
        self.settle();
        loop {
            let next = self
                .nodes
                .iter()
                .filter_map(|(id, drv)| drv.next_wakeup().map(|at| (at, *id)))
                .min();
            match next {
                Some((at, id)) if at <= target => {
                    self.now = self.now.max(at);
                    let mut io: Vec<Effect> = Vec::new();
                    let driver = self.nodes.get_mut(&id).expect("node");
                    driver.handle_wakeup(self.now, &mut io);
                    self.absorb(id, io);
                    self.settle();
                }
                _ => break,
            }
        }
        self.now = target;
        for driver in self.nodes.values() {
            assert_eq!(driver.busy_loops(), 0, "busy loop detected");
        }
    }

    /// Reports every pending stop as done (with `StopPolicy::Manual`).
    pub fn complete_stops(&mut self) {
        for (n, entity_type, entity) in std::mem::take(&mut self.pending_stops) {
            self.report_stopped(n, entity_type, entity);
        }
        self.settle();
    }

    /// Entities running on node `n`.
    pub fn alive_on(&self, n: u64) -> Vec<String> {
        self.alive
            .iter()
            .filter(|(node, _)| *node == NodeId(n))
            .map(|(_, e)| e.clone())
            .collect()
    }

    /// Payloads delivered to `entity`, in order, with the node that received each.
    pub fn inbox(&self, entity: &str) -> Vec<(u64, String)> {
        self.deliveries
            .iter()
            .filter(|(_, e, _)| e == entity)
            .map(|(n, _, p)| (n.0, p.clone()))
            .collect()
    }

    pub fn dead_letters(&self) -> usize {
        self.events
            .iter()
            .filter(|(_, e)| matches!(e, Event::DeadLetter { .. }))
            .count()
    }

    /// The shards each node hosts.
    pub fn hosting(&self) -> BTreeMap<u64, Vec<u32>> {
        let t = EntityType::new(TYPE);
        self.nodes
            .iter()
            .map(|(id, d)| {
                (
                    id.0,
                    d.node().hosted_shards(&t).iter().map(|s| s.0).collect(),
                )
            })
            .collect()
    }

    /// An incarnation terminates once, so the host reports it once (a graceful stop followed by
    /// a forced one still ends one incarnation).
    fn report_stopped(&mut self, n: NodeId, entity_type: EntityType, entity: EntityId) {
        if self.alive.remove(&(n, entity.as_str().to_owned())) {
            self.trace
                .push(format!("{} n{} entity {} stopped", self.now, n.0, entity));
            self.host_inputs.push_back((
                n,
                Input::EntityStopped {
                    entity_type,
                    entity,
                },
            ));
        }
    }

    fn absorb(&mut self, n: NodeId, io: Vec<Effect>) {
        let now = self.now;
        for effect in io {
            match effect {
                Effect::Send(shoal_core::Transmit { envelope, .. }) => {
                    if self.trace_network {
                        let body = envelope
                            .message
                            .body()
                            .map_or_else(|| format!("{:?}", envelope.message), describe);
                        self.trace
                            .push(format!("{now} {} -> {} {body}", envelope.from, envelope.to));
                    }
                    self.inflight.push_back(envelope);
                }
                Effect::Entity(effect) => self.run_entity(n, effect),
                Effect::Event(event) => {
                    self.trace.push(format!(
                        "{now} n{} event {}",
                        n.0,
                        compact(&format!("{event:?}"))
                    ));
                    self.events.push((n, event));
                }
                other => panic!("unexpected effect {other:?}"),
            }
        }
    }

    fn run_entity(&mut self, n: NodeId, effect: EntityEffect) {
        let now = self.now;
        match effect {
            EntityEffect::Start { entity, shard, .. } => {
                let elsewhere = self
                    .alive
                    .iter()
                    .find(|(node, e)| *e == entity.as_str() && *node != n);
                assert!(
                    elsewhere.is_none(),
                    "{entity} started on n{} while alive on {elsewhere:?}",
                    n.0
                );
                let fresh = self.alive.insert((n, entity.as_str().to_owned()));
                assert!(
                    fresh,
                    "{entity} started twice on n{}; trace:\n{}",
                    n.0,
                    self.trace.join("\n")
                );
                self.trace
                    .push(format!("{now} n{} start {entity} ({shard})", n.0));
            }
            EntityEffect::Deliver {
                entity, payload, ..
            } => {
                assert!(
                    self.alive.contains(&(n, entity.as_str().to_owned())),
                    "delivery to a dead entity {entity}"
                );
                let text = String::from_utf8_lossy(&payload.0).into_owned();
                self.trace
                    .push(format!("{now} n{} deliver {entity} {text:?}", n.0));
                self.deliveries.push((n, entity.as_str().to_owned(), text));
            }
            EntityEffect::Stop {
                entity_type,
                entity,
                reason,
            } => {
                self.trace
                    .push(format!("{now} n{} stop {entity} {reason:?}", n.0));
                match (self.stop_policy, reason) {
                    (StopPolicy::Immediate, _)
                    | (StopPolicy::IgnoreGraceful, StopReason::Forced) => {
                        self.report_stopped(n, entity_type, entity);
                    }
                    (StopPolicy::IgnoreGraceful, _) => {}
                    (StopPolicy::Manual, _) => self.pending_stops.push((n, entity_type, entity)),
                }
            }
        }
    }
}

/// A compact rendering of a message body for traces.
pub fn describe(body: &Body) -> String {
    match body {
        Body::Forward {
            shard,
            entity,
            payload,
        } => {
            let text = String::from_utf8_lossy(&payload.0);
            format!("Forward {{ {shard}, {entity}, {text:?} }}")
        }
        other => compact(&format!("{other:?}")),
    }
}

/// Shortens ids in `Debug` output: `ShardId(3)` → `s3`, member ids → `n1#1`.
fn compact(debug: &str) -> String {
    const MEMBER: &str = "MemberId { node: NodeId(";
    const INCARNATION: &str = "), incarnation: Incarnation(";
    let mut text = debug.replace("EntityType(\"counter\")", "counter");
    while let Some(start) = text.find(MEMBER) {
        let rest = &text[start + MEMBER.len()..];
        let node_end = rest.find(INCARNATION).expect("member id");
        let inc_start = node_end + INCARNATION.len();
        let inc_end = inc_start + rest[inc_start..].find(") }").expect("member id");
        let short = format!("n{}#{}", &rest[..node_end], &rest[inc_start..inc_end]);
        let end = start + MEMBER.len() + inc_end + 3;
        text.replace_range(start..end, &short);
    }
    while let Some(start) = text.find("ShardId(") {
        let end = start + text[start..].find(')').expect("shard id");
        let short = format!("s{}", &text[start + 8..end]);
        text.replace_range(start..=end, &short);
    }
    text
}
