//! Membership scenarios on nodes that manage membership themselves, over an in-memory network
//! with a fixed latency: every status change each node observes is recorded and pinned with
//! insta (a three-node join, a graceful leave, a 2|3 partition).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::time::Duration;

use shoal_core::{
    Command, Config, Downing, Driver, Effect, EntityTypeConfig, Envelope, Event, Incarnation,
    Input, Instant, MemberId, MembershipSettings, Node, NodeId, RequestId, Transmit,
};

const LATENCY: Duration = Duration::from_millis(2);

struct Cluster {
    now: Instant,
    /// Downing strategy of the nodes started from now on.
    downing: Downing,
    nodes: BTreeMap<NodeId, Driver>,
    network: BinaryHeap<Reverse<(Instant, u64, usize)>>,
    in_flight: Vec<Option<Envelope>>,
    sequence: u64,
    /// Directed links that drop everything.
    blocked: BTreeSet<(NodeId, NodeId)>,
    /// What each node last saw of each member's status.
    seen: BTreeMap<(NodeId, MemberId), String>,
    log: Vec<String>,
}

fn settings(seeds: &[u64]) -> MembershipSettings {
    let mut s = MembershipSettings::new(seeds.iter().map(|n| NodeId(*n)));
    s.seed_node_timeout = Duration::from_secs(2);
    s.retry_join_after = Duration::from_secs(2);
    s.downing = Downing::KeepMajority {
        stable_after: Duration::from_secs(5),
    };
    s
}

impl Cluster {
    fn new() -> Self {
        Self {
            now: Instant::ZERO,
            downing: Downing::KeepMajority {
                stable_after: Duration::from_secs(5),
            },
            nodes: BTreeMap::new(),
            network: BinaryHeap::new(),
            in_flight: Vec::new(),
            sequence: 0,
            blocked: BTreeSet::new(),
            seen: BTreeMap::new(),
            log: Vec::new(),
        }
    }

    fn start(&mut self, n: u64, seeds: &[u64]) {
        let mut config =
            Config::new(NodeId(n), Incarnation(1)).with_entity_type(EntityTypeConfig::new("t"));
        let mut settings = settings(seeds);
        settings.downing = self.downing;
        config.membership = Some(settings);
        let node = Node::new(config, self.now).expect("valid config");
        self.nodes.insert(NodeId(n), Driver::new(node, self.now));
        self.wake(NodeId(n));
    }

    fn wake(&mut self, n: NodeId) {
        let mut out = Vec::new();
        if let Some(d) = self.nodes.get_mut(&n) {
            d.handle_wakeup(self.now, &mut out);
        }
        self.absorb(n, out);
    }

    fn input(&mut self, n: NodeId, input: Input) {
        let mut out = Vec::new();
        if let Some(d) = self.nodes.get_mut(&n) {
            d.handle_input(self.now, input, &mut out);
        }
        self.absorb(n, out);
    }

    fn absorb(&mut self, n: NodeId, out: Vec<Effect>) {
        for effect in out {
            match effect {
                Effect::Send(Transmit { envelope, .. }) => {
                    if self.blocked.contains(&(n, envelope.to.node)) {
                        continue;
                    }
                    self.sequence += 1;
                    self.in_flight.push(Some(envelope));
                    let slot = self.in_flight.len() - 1;
                    let at = self.now + LATENCY;
                    self.network.push(Reverse((at, self.sequence, slot)));
                }
                Effect::Event(Event::MembershipChanged) => self.record_view(n),
                Effect::Event(Event::LeftCluster { downed }) => {
                    let why = if downed { "downed" } else { "removed" };
                    self.log
                        .push(format!("{} {n} left the cluster ({why})", self.now));
                }
                _ => {}
            }
        }
    }

    fn record_view(&mut self, n: NodeId) {
        let view = self.nodes[&n].node().view().clone();
        let mut now_known = BTreeSet::new();
        for m in view.members() {
            let status = format!(
                "{:?}{}",
                m.status,
                if m.reachable { "" } else { " (unreachable)" }
            );
            now_known.insert(m.id);
            let before = self.seen.insert((n, m.id), status.clone());
            if before.as_ref() != Some(&status) {
                let was = before.unwrap_or_else(|| "-".into());
                self.log
                    .push(format!("{} {n} sees {}: {was} -> {status}", self.now, m.id));
            }
        }
        let gone: Vec<MemberId> = self
            .seen
            .keys()
            .filter(|(o, m)| *o == n && !now_known.contains(m))
            .map(|(_, m)| *m)
            .collect();
        for m in gone {
            self.seen.remove(&(n, m));
            self.log.push(format!("{} {n} sees {m}: removed", self.now));
        }
    }

    /// Runs until `until`, delivering messages and firing timers in time order.
    fn run_until(&mut self, until: Instant) {
        loop {
            let next_message = self.network.peek().map(|Reverse((at, _, _))| *at);
            let next_timer = self
                .nodes
                .iter()
                .filter_map(|(n, d)| d.next_wakeup().map(|at| (at, *n)))
                .min();
            let message_first = match (next_message, next_timer) {
                (Some(m), Some((t, _))) => m <= t,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            if message_first {
                let Some(Reverse((at, _, slot))) = self.network.pop().filter(|r| r.0.0 <= until)
                else {
                    break;
                };
                self.now = self.now.max(at);
                let envelope = self.in_flight[slot].take().expect("in flight");
                let (from, to) = (envelope.from.node, envelope.to.node);
                if !self.blocked.contains(&(from, to)) {
                    self.input(to, Input::Receive(envelope));
                }
            } else {
                let (at, n) = next_timer.expect("a timer");
                if at > until {
                    break;
                }
                self.now = self.now.max(at);
                self.wake(n);
            }
        }
        self.now = self.now.max(until);
    }

    fn at(&mut self, secs: u64) {
        self.run_until(Instant::ZERO + Duration::from_secs(secs));
    }

    fn partition(&mut self, side: &[u64]) {
        let all: Vec<NodeId> = self.nodes.keys().copied().collect();
        for a in &all {
            for b in &all {
                if side.contains(&a.0) != side.contains(&b.0) {
                    self.blocked.insert((*a, *b));
                }
            }
        }
        self.log
            .push(format!("{} partition {side:?} | rest", self.now));
    }

    fn command(&mut self, n: u64, command: Command) {
        self.log.push(format!("{} n{n} {command:?}", self.now));
        let input = Input::Command {
            request: RequestId(2),
            command,
        };
        self.input(NodeId(n), input);
    }

    fn leave(&mut self, n: u64) {
        self.log.push(format!("{} n{n} leaves", self.now));
        let leave = Input::Command {
            request: RequestId(1),
            command: Command::Leave,
        };
        self.input(NodeId(n), leave);
    }
}

#[test]
fn three_nodes_join_through_the_first_seed() {
    let mut c = Cluster::new();
    for n in 1..=3 {
        c.start(n, &[1, 2, 3]);
    }
    c.at(10);
    insta::assert_snapshot!(c.log.join("\n"));
    // Every member knows which entity types the others host (they joined saying so).
    let t = shoal_core::EntityType::new("t");
    let view = c.nodes[&NodeId(1)].node().view().clone();
    assert_eq!(view.members().len(), 3);
    for m in view.members() {
        assert_eq!(m.hosts, Some([t.clone()].into()), "{}", m.id);
    }
    assert_eq!(view.coordinator_of(&t, None), Some(MemberId::new(1, 1)));
}

#[test]
fn a_member_leaves_gracefully() {
    let mut c = Cluster::new();
    for n in 1..=3 {
        c.start(n, &[1, 2, 3]);
    }
    c.at(10);
    c.log.clear();
    c.leave(3);
    c.at(30);
    insta::assert_snapshot!(c.log.join("\n"));
}

#[test]
fn a_two_three_partition_downs_the_minority() {
    let mut c = Cluster::new();
    for n in 1..=5 {
        c.start(n, &[1, 2, 3, 4, 5]);
    }
    c.at(10);
    c.log.clear();
    c.partition(&[4, 5]);
    c.at(40);
    let log = c.log.join("\n");
    assert!(log.contains("n4 left the cluster (downed)"), "{log}");
    assert!(log.contains("n5 left the cluster (downed)"), "{log}");
    insta::assert_snapshot!(log);
}

/// Akka's `Cluster.leave(address)`: a member asks another to leave; that one hands off and
/// leaves as if it had decided to.
#[test]
fn a_member_makes_another_leave() {
    let mut c = Cluster::new();
    for n in 1..=3 {
        c.start(n, &[1, 2, 3]);
    }
    c.at(10);
    c.log.clear();
    c.command(
        1,
        Command::LeaveMember {
            member: MemberId::new(3, 1),
        },
    );
    c.at(30);
    let log = c.log.join("\n");
    assert!(log.contains("n3 sees n3#1: Up -> Leaving"), "{log}");
    assert!(log.contains("n3 left the cluster (removed)"), "{log}");
    assert!(log.contains("n1 sees n3#1: removed"), "{log}");
}

/// Akka's `Cluster.down(address)`: with automatic downing off, a partition downs nobody; an
/// operator's `Down` removes the unreachable member, which downs itself once it hears it.
#[test]
fn an_operator_downs_a_member_when_downing_is_off() {
    let mut c = Cluster::new();
    c.downing = Downing::Off;
    for n in 1..=3 {
        c.start(n, &[1, 2, 3]);
    }
    c.at(10);
    c.log.clear();
    c.partition(&[3]);
    c.at(40);
    assert!(
        !c.log.iter().any(|l| l.contains("Down")),
        "nobody downs anyone: {:?}",
        c.log
    );
    c.command(
        1,
        Command::Down {
            member: MemberId::new(3, 1),
        },
    );
    c.at(50);
    let log = c.log.join("\n");
    assert!(
        log.contains("n2 sees n3#1: Up (unreachable) -> Down (unreachable)"),
        "{log}"
    );
    assert!(log.contains("n1 sees n3#1: removed"), "{log}");
    c.blocked.clear();
    c.at(70);
    let log = c.log.join("\n");
    assert!(log.contains("n3 left the cluster (downed)"), "{log}");
}

/// An Exiting member cut off before it hears of its removal gives up waiting after a few gossip
/// rounds. Its roles must see it removed then (their region stops routing and announces its
/// exit): before, its view still listed it Exiting until the process ended (mass-shutdown seed
/// 111339, where a handoff waited for that region).
#[test]
fn an_exiting_member_that_never_hears_of_its_removal_sees_itself_removed() {
    let mut c = Cluster::new();
    // Cut off, it would otherwise down itself (keep-majority) before it gives up waiting.
    c.downing = Downing::Off;
    for n in 1..=3 {
        c.start(n, &[1, 2, 3]);
    }
    c.at(10);
    c.leave(3);
    let me = MemberId::new(3, 1);
    let exiting = |c: &Cluster| {
        let view = c.nodes[&NodeId(3)].node().view();
        view.member(me)
            .is_some_and(|m| m.status == shoal_core::MemberStatus::Exiting)
    };
    for ms in 0..10_000 {
        if exiting(&c) {
            break;
        }
        c.run_until(Instant::ZERO + Duration::from_secs(10) + Duration::from_millis(ms));
    }
    assert!(exiting(&c), "n3 became Exiting");
    for other in [1, 2] {
        c.blocked.insert((NodeId(other), NodeId(3)));
    }
    c.log.clear();
    c.at(40);
    let log = c.log.join("\n");
    assert!(log.contains("n3 sees n3#1: removed"), "{log}");
    assert!(log.contains("n3 left the cluster (removed)"), "{log}");
    assert!(c.nodes[&NodeId(3)].node().view().member(me).is_none());
}
