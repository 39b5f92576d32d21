//! A scripted multi-node cluster for scenario tests: the real core on every node, driven by the
//! shared `Driver`, over an in-memory network that encodes every message with the real codec,
//! in virtual time that moves only when the script says so. A script builds a cluster, tells
//! entities, sends commands, crashes nodes, cuts and heals links, publishes membership views
//! (or lets nodes manage membership themselves), settles or advances time, and reads back
//! replies, events, deliveries, which entity runs where, and a readable trace. Entities behave
//! as a pluggable [`EntityBehaviour`] says, and checks of the script's own run after every step.
//!
//! ```
//! use sim::scripted::{Cluster, StopPolicy, entity_in_shard};
//!
//! let mut c = Cluster::with_nodes(2, 10);
//! c.set_behaviour(StopPolicy::Manual);
//! let entity = entity_in_shard(3, 10);
//! c.tell(1, &entity, "hello");
//! c.settle();
//! assert_eq!(c.inbox(&entity).len(), 1); // (node, payload) of each delivery
//! ```

mod host;
mod io;
mod network;
mod read;
mod run;
mod text;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use shoal_core::{
    Config, Driver, EntityId, EntityType, EntityTypeConfig, Incarnation, Instant, Member, MemberId,
    MembershipView, Node, NodeId,
};

pub use host::{EntityBehaviour, Reaction, StopAnswer, StopPolicy};
pub use text::describe;

use crate::rng::{SimRng, Stream};

/// The entity type of [`type_config`].
pub const TYPE: &str = "counter";

/// A check of the script's own, run after every step: an error fails the run with the trace.
pub type Check = Box<dyn FnMut(&Cluster) -> Result<(), String>>;

/// Nodes of the core, an in-memory network between them, an entity host and virtual time.
pub struct Cluster {
    now: Instant,
    nodes: BTreeMap<NodeId, Driver>,
    /// The membership the script publishes (nodes managing membership themselves are not in
    /// it).
    members: BTreeMap<NodeId, Member>,
    /// Members removed from the published view (tombstones, listed in every view).
    removed: BTreeSet<MemberId>,
    network: network::Network,
    host: host::Host,
    store: io::Store,
    record: io::Record,
    /// What each node last saw of each member's status (for the membership log).
    seen: BTreeMap<(NodeId, MemberId), String>,
    membership_log: Vec<String>,
    checks: Vec<Check>,
    next_request: u64,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("now", &self.now)
            .field("nodes", &self.nodes.keys().collect::<Vec<_>>())
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

/// `n`'s first incarnation.
pub fn member(n: u64) -> MemberId {
    MemberId::new(n, 1)
}

/// The first id `e0`, `e1`, ... whose shard (of `shards`) is `shard`.
///
/// # Panics
/// `shard` is not below `shards`.
pub fn entity_in_shard(shard: u32, shards: u32) -> String {
    assert!(shard < shards, "shard {shard} of {shards}");
    (0..)
        .map(|i| format!("e{i}"))
        .find(|id| shoal_core::shard_of(&EntityId::new(id.as_str()), shards).0 == shard)
        .expect("some id hashes to every shard")
}

/// The [`TYPE`] entity type with `shards` shards and no idle passivation.
pub fn type_config(shards: u32) -> EntityTypeConfig {
    let mut t = EntityTypeConfig::new(TYPE);
    t.number_of_shards = shards;
    t.passivate_idle_after = None;
    t
}

/// Node `n`'s first incarnation hosting `entity_type`, seeded with `n`.
pub fn config(n: u64, entity_type: EntityTypeConfig) -> Config {
    let mut c = Config::new(NodeId(n), Incarnation(1)).with_entity_type(entity_type);
    c.seed = n;
    c
}

impl Default for Cluster {
    fn default() -> Self {
        Self::new()
    }
}

impl Cluster {
    /// An empty cluster at time zero: messages arrive at once (in order), entities stop at once.
    pub fn new() -> Self {
        Self {
            now: Instant::ZERO,
            nodes: BTreeMap::new(),
            members: BTreeMap::new(),
            removed: BTreeSet::new(),
            network: network::Network::new(
                (Duration::ZERO, Duration::ZERO),
                SimRng::of(0, Stream::Network),
            ),
            host: host::Host::new(),
            store: io::Store::new(0),
            record: io::Record {
                trace_network: true,
                ..io::Record::default()
            },
            seen: BTreeMap::new(),
            membership_log: Vec::new(),
            checks: Vec::new(),
            next_request: 1,
        }
    }

    /// `n` nodes with up-numbers 1..=n (node 1 is the oldest), all Up, one type of `shards`,
    /// settled.
    pub fn with_nodes(n: u64, shards: u32) -> Self {
        let mut cluster = Self::new();
        for i in 1..=n {
            cluster.add_node(config(i, type_config(shards)));
        }
        cluster.publish_view();
        cluster.settle();
        cluster
    }

    /// Messages sent from now on take between `least` and `most` (drawn from `seed`; each link
    /// stays FIFO).
    pub fn set_latency(&mut self, least: Duration, most: Duration, seed: u64) {
        let rng = SimRng::of(seed, Stream::Network);
        self.network.set_latency(least, most, rng);
    }

    /// Entities behave as `behaviour` says from now on.
    pub fn set_behaviour(&mut self, behaviour: impl EntityBehaviour + 'static) {
        self.host.set_behaviour(Box::new(behaviour));
    }

    /// Whether the trace records every message (on by default).
    pub fn trace_network(&mut self, on: bool) {
        self.record.trace_network = on;
    }

    /// Adds a check run after every step from now on.
    pub fn add_check(&mut self, check: impl FnMut(&Self) -> Result<(), String> + 'static) {
        self.checks.push(Box::new(check));
    }

    /// Adds a node whose membership the script publishes: an Up member with the next up-number
    /// (not in any view until `publish_view`).
    ///
    /// # Panics
    /// The config is invalid.
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
        self.members
            .insert(id.node, Member::up(id, up_number, &roles).hosting(&hosts));
    }

    /// Starts a node that manages membership itself (`config.membership` set): it joins
    /// through its seeds from now on.
    ///
    /// # Panics
    /// The config is invalid.
    pub fn start(&mut self, config: Config) {
        let n = config.member_id().node;
        let node = Node::new(config, self.now).expect("valid config");
        self.nodes.insert(n, Driver::new(node, self.now));
        self.wake(n);
    }

    /// Node addresses currently running.
    pub fn running(&self) -> Vec<u64> {
        self.nodes.keys().map(|n| n.0).collect()
    }

    /// Node `n`'s state.
    ///
    /// # Panics
    /// `n` does not run.
    pub fn node(&self, n: u64) -> &Node {
        let driver = self.nodes.get(&NodeId(n));
        driver.unwrap_or_else(|| panic!("n{n} does not run")).node()
    }

    /// The published member at `n`, to change its status or roles before the next
    /// `publish_view`.
    ///
    /// # Panics
    /// `n` is not a published member.
    pub fn member_mut(&mut self, n: u64) -> &mut Member {
        self.members.get_mut(&NodeId(n)).expect("member")
    }

    /// Removes a member from the published view (it stays running, as if partitioned and
    /// downed).
    pub fn remove_member(&mut self, n: u64) {
        if let Some(m) = self.members.remove(&NodeId(n)) {
            self.removed.insert(m.id);
        }
    }

    /// Stops node `n` entirely (a crash: its entities die with it) and removes it from the
    /// published view.
    pub fn crash(&mut self, n: u64) {
        self.nodes.remove(&NodeId(n));
        self.remove_member(n);
        self.host.crashed(NodeId(n));
        self.record.trace.push(format!("{} n{n} crashed", self.now));
    }

    /// Tells every running node the published membership.
    pub fn publish_view(&mut self) {
        let view = self.view();
        let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
        for id in ids {
            self.input(id.0, shoal_core::Input::MembershipChanged(view.clone()));
        }
    }

    /// Tells node `n` the published membership (the others learn it later, if at all).
    pub fn publish_view_to(&mut self, n: u64) {
        let view = self.view();
        self.input(n, shoal_core::Input::MembershipChanged(view));
    }

    /// The published membership, with the tombstones of the members removed so far.
    pub fn view(&self) -> MembershipView {
        MembershipView::new(self.members.values().cloned().collect())
            .with_removed(self.removed.iter().copied())
    }

    /// Cuts the link from `from` to `to`: what is sent on it, or in flight over it, is lost.
    pub fn cut_link(&mut self, from: u64, to: u64) {
        self.network.cut(NodeId(from), NodeId(to));
    }

    /// Cuts every link between `side` and the other running nodes, both ways.
    pub fn partition(&mut self, side: &[u64]) {
        let all = self.running();
        for a in &all {
            for b in &all {
                if side.contains(a) != side.contains(b) {
                    self.cut_link(*a, *b);
                }
            }
        }
        self.note(format!("{} partition {side:?} | rest", self.now));
    }

    /// Restores every link.
    pub fn heal(&mut self) {
        self.network.heal();
    }

    /// Virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }
}
