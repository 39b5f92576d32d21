//! `node_inputs`: a structure-aware sequence of inputs fed to one `Node` through the `Driver`:
//! messages from fake peers (structured, or raw frames through the decoder), host membership
//! views, application tells and commands, entity signals, and time passing. The harness plays
//! the host and checks after every step:
//!
//! * no panic and no busy loop (a timer that stays due after firing);
//! * buffers within `buffer_size`; no shard hosted twice or outside `0..number_of_shards`, in
//!   the region or in the coordinator's table;
//! * entities: the entity contract (`shoal_core::EntityLedger`: one start per incarnation, no
//!   delivery to an entity not running or asked to stop, no stop of one not running), started
//!   on the shard their id hashes to, for a type the node serves;
//! * every command answered at most once, and only commands that were asked;
//! * every envelope the node sends encodes, and decodes back to itself.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use arbitrary::{Arbitrary, Unstructured};
use shoal_core::codec;
use shoal_core::{
    AllocationStrategyConfig, Config, Driver, EntityEffect, EntityId, EntityLedger, EntityType,
    EntityTypeConfig, Envelope, Event, Incarnation, Input, Instant, Io, Member, MemberId,
    MembershipSettings, MembershipView, Message, Node, NodeId, RequestId, StoreRequest, Transmit,
    shard_of,
};

/// One thing that happens to the node.
#[derive(Arbitrary, Debug)]
enum Step {
    /// Any input a host could feed, including envelopes and views from anywhere.
    Input(Input),
    /// A message from a fake peer to this node, numbered on its link.
    Peer {
        from: MemberId,
        seq: u8,
        message: Message,
    },
    /// Bytes from the network, fed if they decode.
    Frame(Vec<u8>),
    /// A host view: this node Up with some peers (bit i: member n{i+2}#1), some unreachable.
    View {
        peers: u8,
        unreachable: u8,
        oldest: bool,
    },
    /// Time passes (milliseconds).
    Advance(u16),
    /// Time passes (seconds).
    AdvanceSecs(u8),
    /// The host finishes stopping the i-th entity it was asked to stop.
    FinishStop(u8),
}

/// How the node is set up, then what happens to it.
/// One fuzz input, as `cargo fuzz fmt node_inputs <artifact>` prints it.
#[derive(Arbitrary, Debug)]
pub struct Scenario {
    managed_membership: bool,
    small_buffer: bool,
    ledger_role: bool,
    strategy: u8,
    steps: Vec<Step>,
}

const ME: MemberId = MemberId {
    node: NodeId(1),
    incarnation: Incarnation(1),
};

fn config(s: &Scenario) -> Config {
    let allocation = match s.strategy % 3 {
        0 => AllocationStrategyConfig::default(),
        1 => AllocationStrategyConfig::ConsistentHashing { rebalance_limit: 2 },
        _ => AllocationStrategyConfig::External,
    };
    let counter = EntityTypeConfig {
        number_of_shards: 8,
        allocation,
        passivate_idle_after: Some(Duration::from_secs(30)),
        ..EntityTypeConfig::new("counter")
    };
    let ledger = EntityTypeConfig {
        number_of_shards: 4,
        role: Some("ledger".to_owned()),
        ..EntityTypeConfig::new("ledger")
    };
    let mut config = Config::new(ME.node, ME.incarnation)
        .with_entity_type(counter)
        .with_entity_type(ledger);
    if s.ledger_role {
        config.roles.insert("ledger".to_owned());
    }
    if s.small_buffer {
        config.settings.buffer_size = 4;
    }
    if s.managed_membership {
        config.membership = Some(MembershipSettings::new(vec![NodeId(1), NodeId(2)]));
    }
    config
}

fn host_view(peers: u8, unreachable: u8, oldest: bool, roles: &[&str]) -> MembershipView {
    let mut members = vec![Member::up(ME, if oldest { 1 } else { 50 }, roles)];
    for i in 0..8u64 {
        if peers & (1 << i) != 0 {
            let mut peer = Member::up(MemberId::new(i + 2, 1), i + 2, roles);
            peer.reachable = unreachable & (1 << i) == 0;
            members.push(peer);
        }
    }
    MembershipView::new(members)
}

/// Checks one input's bytes, read as [`Scenario`]; panics on a broken property.
pub fn run(data: &[u8]) {
    if let Ok(input) = Scenario::arbitrary_take_rest(Unstructured::new(data)) {
        check(input);
    }
}

/// Checks one structured input (what the fuzz target calls); panics on a broken property.
pub fn check(scenario: Scenario) {
    let config = config(&scenario);
    let mut host = Host::new(&config);
    let mut now = Instant::from_millis(0);
    let node = Node::new(config, now).expect("the harness config is valid");
    let mut driver = Driver::new(node, now);
    let roles: Vec<&str> = if scenario.ledger_role {
        vec!["ledger"]
    } else {
        vec![]
    };
    for step in scenario.steps {
        let input = match step {
            Step::Input(input) => Some(input),
            Step::Peer { from, seq, message } => Some(Input::Receive(Box::new(Envelope {
                from,
                to: ME,
                seq: u64::from(seq),
                message,
            }))),
            Step::Frame(bytes) => codec::decode(&bytes)
                .ok()
                .map(|envelope| Input::Receive(Box::new(envelope))),
            Step::View {
                peers,
                unreachable,
                oldest,
            } => Some(Input::MembershipChanged(host_view(
                peers,
                unreachable,
                oldest,
                &roles,
            ))),
            Step::Advance(ms) => {
                now += Duration::from_millis(u64::from(ms));
                None
            }
            Step::AdvanceSecs(s) => {
                now += Duration::from_secs(u64::from(s));
                None
            }
            Step::FinishStop(i) => host.finish_stop(i),
        };
        match input {
            Some(input) => {
                host.fed(&input);
                driver.handle_input(now, input, &mut host);
            }
            None => driver.handle_wakeup(now, &mut host),
        }
        host.check_node(&driver);
    }
}

/// The harness's host: what it runs and what it asked, to check the node's effects against.
struct Host {
    types: BTreeMap<EntityType, u32>,
    buffer_size: usize,
    /// The node's entities: the entity contract every effect is checked against.
    ledger: EntityLedger,
    /// Entities asked to stop, in order, not yet reported stopped.
    stopping: Vec<(EntityType, EntityId)>,
    /// Commands asked and not yet answered, by request id (ids may repeat).
    outstanding: BTreeMap<RequestId, u32>,
}

impl Host {
    fn new(config: &Config) -> Self {
        Self {
            types: config
                .entity_types
                .iter()
                .map(|t| (t.name.clone(), t.number_of_shards))
                .collect(),
            buffer_size: config.settings.buffer_size,
            ledger: EntityLedger::default(),
            stopping: Vec::new(),
            outstanding: BTreeMap::new(),
        }
    }

    /// Keeps the model in step with an input about to be fed.
    fn fed(&mut self, input: &Input) {
        match input {
            Input::Command { request, .. } => *self.outstanding.entry(*request).or_default() += 1,
            Input::EntityStopped {
                entity_type,
                entity,
            } => {
                // An entity that terminated on its own (or a host reporting nonsense, which
                // is this harness's to send and the node's to ignore).
                let key = (entity_type.clone(), entity.clone());
                let _ = self.ledger.stopped(entity_type, entity);
                self.stopping.retain(|k| *k != key);
            }
            _ => {}
        }
    }

    fn finish_stop(&mut self, i: u8) -> Option<Input> {
        if self.stopping.is_empty() {
            return None;
        }
        let (entity_type, entity) = self.stopping[usize::from(i) % self.stopping.len()].clone();
        Some(Input::EntityStopped {
            entity_type,
            entity,
        })
    }

    fn check_node(&self, driver: &Driver) {
        assert_eq!(driver.busy_loops(), 0, "a timer stays due after firing");
        let node = driver.node();
        for (entity_type, &shards) in &self.types {
            let buffered = node.buffered(entity_type);
            assert!(
                buffered <= self.buffer_size,
                "{entity_type}: {buffered} buffered, cap {}",
                self.buffer_size
            );
            let hosted = node.hosted_shards(entity_type);
            let distinct: BTreeSet<_> = hosted.iter().collect();
            assert_eq!(
                distinct.len(),
                hosted.len(),
                "a shard hosted twice: {hosted:?}"
            );
            assert!(
                hosted.iter().all(|s| s.0 < shards),
                "{entity_type}: hosts a shard out of range: {hosted:?}"
            );
            if let Some(table) = node.coordinator_allocations(entity_type) {
                assert!(
                    table.keys().all(|s| s.0 < shards),
                    "{entity_type}: coordinator allocated a shard out of range: {table:?}"
                );
            }
        }
    }
}

fn check_encodes(envelope: &Envelope) {
    let frame = codec::encode(envelope)
        .unwrap_or_else(|e| panic!("the node sent an envelope that does not encode: {e}"));
    let decoded = codec::decode(&frame).expect("a frame the node encoded decodes");
    assert_eq!(&decoded, envelope, "the wire changed an envelope");
}

/// The harness's host carries out the node's effects as they come, checking each.
impl Io for Host {
    fn send(&mut self, transmit: Transmit) {
        check_encodes(&transmit.envelope);
    }

    fn entity(&mut self, effect: EntityEffect) {
        if let Err(breach) = self.ledger.effect(&effect) {
            panic!("the entity contract: {breach}");
        }
        match effect {
            EntityEffect::Start {
                entity_type,
                entity,
                shard,
                ..
            } => {
                let shards = *self
                    .types
                    .get(&entity_type)
                    .unwrap_or_else(|| panic!("started {entity} of unserved type {entity_type}"));
                assert_eq!(
                    shard,
                    shard_of(&entity, shards),
                    "{entity} started on {shard}"
                );
            }
            EntityEffect::Deliver { .. } => {}
            EntityEffect::Stop {
                entity_type,
                entity,
                ..
            } => {
                let key = (entity_type, entity);
                if !self.stopping.contains(&key) {
                    self.stopping.push(key);
                }
            }
        }
    }

    fn emit(&mut self, event: Event) {
        if let Event::Reply { request, .. } = event {
            let asked = self.outstanding.get_mut(&request);
            let asked = asked.filter(|n| **n > 0).unwrap_or_else(|| {
                panic!("{request} answered more often than asked, or never asked")
            });
            *asked -= 1;
        }
    }

    /// No store answers: a store that never answers is one the node must survive too.
    fn store(&mut self, _: StoreRequest) {}

    /// No lease store answers either (the scenario's inputs may answer calls never made).
    fn lease(&mut self, _: shoal_core::lease::LeaseCall) {}
}
