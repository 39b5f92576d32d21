//! The discrete-event world: one core `Driver` per simulated node, events ordered by
//! (true time, sequence number), every message through the real codec and the network model,
//! every entity effect through the checker.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use std::time::Duration;

use shoal_core::{
    Config, Driver, Effect, EntityId, EntityType, EntityTypeConfig, Envelope, Event, Incarnation,
    Input, Instant, MemberId, MembershipView, Node, NodeId, ShardingSettings, StopReason, codec,
};

use crate::check::{Checker, Property};
use crate::net::{Flight, Link, Net};
use crate::nodes::Nodes;
use crate::options::Options;
use crate::oracle::Oracle;
use crate::rng::{SimRng, Stream};

/// The entity type every simulated node serves.
pub(crate) const TYPE: &str = "sim";

/// Something scheduled to happen.
#[derive(Debug)]
pub(crate) enum Ev {
    Deliver {
        link: Link,
        flight: Flight,
        envelope: Envelope,
    },
    Wakeup(NodeId),
    EntityStopped {
        member: MemberId,
        entity: EntityId,
        incarnation: u64,
    },
    Passivate {
        member: MemberId,
        entity: EntityId,
    },
    View {
        member: MemberId,
        version: u64,
        view: MembershipView,
    },
    Client,
    Fault(crate::faults::Fault),
}

/// A node's clock: offset and drift against true time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    offset: u64,
    skew_ppm: i64,
}

impl Clock {
    /// This clock's reading at true time `t`: `t + offset + t·skew/10⁶`, in 64-bit arithmetic
    /// (split so that `t·skew` cannot overflow; this runs twice per simulated event).
    fn local(self, t: Instant) -> Instant {
        let t = t.as_nanos() as i64;
        let drift = (t / 1_000_000) * self.skew_ppm + (t % 1_000_000) * self.skew_ppm / 1_000_000;
        Instant((t + self.offset as i64 + drift) as u64)
    }

    /// The true time at which this clock reads `local` (rounded up: never earlier).
    fn true_time(self, local: Instant) -> Instant {
        let l = local.as_nanos() as i64 - self.offset as i64;
        let scale = 1_000_000 + self.skew_ppm;
        let t = match l.checked_mul(1_000_000) {
            Some(scaled) => (scaled + scale - 1) / scale,
            None => {
                ((i128::from(l) * 1_000_000 + i128::from(scale) - 1) / i128::from(scale)) as i64
            }
        };
        Instant(t.max(0) as u64)
    }
}

/// One simulated member process.
#[derive(Debug)]
pub(crate) struct SimNode {
    pub(crate) driver: Driver,
    pub(crate) id: MemberId,
    clock: Clock,
    wakeup: Option<Instant>,
    view_version: u64,
    /// While the process is paused: the inputs that reached it, replayed in order on resume.
    paused: Option<Vec<Input>>,
}

impl SimNode {
    /// Whether the process is paused.
    pub(crate) fn is_paused(&self) -> bool {
        self.paused.is_some()
    }
}

/// Where a JSON-lines trace goes (`sim replay <seed> --trace <file>`).
pub(crate) struct TraceSink(pub(crate) Box<dyn std::io::Write>);

impl std::fmt::Debug for TraceSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TraceSink")
    }
}

/// The simulated cluster.
#[derive(Debug)]
pub(crate) struct World {
    pub(crate) opts: Options,
    pub(crate) now: Instant,
    seq: u64,
    /// Pending events by (time, sequence number), each naming its slot in `slots`.
    queue: BinaryHeap<Reverse<(Instant, u64, usize)>>,
    /// Scheduled events; freed slots are reused (`free`), so scheduling rarely allocates.
    slots: Vec<Option<Ev>>,
    free: Vec<usize>,
    pub(crate) nodes: Nodes,
    pub(crate) oracle: Oracle,
    pub(crate) net: Net,
    /// The guarantees, checked as the run goes.
    pub(crate) check: Checker,
    pub(crate) rng_faults: SimRng,
    pub(crate) rng_work: SimRng,
    pub(crate) rng_entities: SimRng,
    rng_membership: SimRng,
    rng_nodes: SimRng,
    /// Entity stops the host has not reported yet: (member, entity, incarnation).
    pub(crate) pending_stops: BTreeMap<(MemberId, EntityId, u64), StopReason>,
    /// Graceful stops an entity ignored (it runs on until forced).
    pub(crate) ignored_stops: BTreeSet<(MemberId, EntityId, u64)>,
    /// Current incarnation number of each running entity.
    pub(crate) incarnations: BTreeMap<(MemberId, EntityId), u64>,
    pub(crate) settings: ShardingSettings,
    /// Crashed nodes (no process) and downed nodes (process running, must restart).
    pub(crate) crashed: BTreeSet<NodeId>,
    pub(crate) downed: BTreeSet<NodeId>,
    /// Nodes that left gracefully (their process exited).
    pub(crate) left: BTreeSet<NodeId>,
    /// Highest incarnation each address has used (every address ever started is here).
    pub(crate) last_incarnation: BTreeMap<NodeId, u64>,
    /// Bumped on every connectivity change; a downing decision applies only to its epoch.
    pub(crate) topology_epoch: u64,
    /// Some downing decision left no surviving majority (no progress possible afterwards).
    pub(crate) no_survivors: bool,
    /// Whether clients send messages.
    pub(crate) traffic: bool,
    pub(crate) zipf: crate::workload::Zipf,
    /// Print a readable trace of the run to stderr (`SIM_TRACE=1`).
    pub(crate) trace: bool,
    /// Also trace forwarded messages and deliveries (`SIM_TRACE=2`, or a trace file).
    pub(crate) trace_all: bool,
    /// The JSON-lines trace file, if one was asked for.
    pub(crate) sink: Option<TraceSink>,
    /// How often each interesting situation ("sometimes" marker) occurred.
    pub(crate) coverage: BTreeMap<&'static str, u64>,
    /// The entity whose stop is being reported in the current driver call.
    pub(crate) reporting_stop: Option<(MemberId, EntityId, StopReason)>,
    /// Events processed.
    pub(crate) events_processed: u64,
    /// Dead letters reported by nodes.
    pub(crate) dead_letters: u64,
    /// The entity type every node serves, and the names of the workload's entities.
    pub(crate) ty: EntityType,
    pub(crate) entity_ids: Vec<EntityId>,
    /// Bumped whenever a process starts or stops, to know when `senders` is stale.
    nodes_epoch: u64,
    /// Up members clients send through, as of (oracle version, nodes epoch).
    senders: ((u64, u64), Vec<MemberId>),
    /// The effects of one driver call, reused from call to call.
    scratch: Vec<Effect>,
    digest: u64,
}

impl World {
    /// A world for `opts` with its initial nodes started and told about each other.
    pub(crate) fn new(opts: Options) -> Self {
        let seed = opts.seed;
        let opts_entities = opts.entities;
        // A shorter handoff timeout than Akka's 60 s; the removal margin covers the oracle's
        // stable-after plus its longest detection delay, as down-removal-margin must.
        let settings = ShardingSettings {
            handoff_timeout: Duration::from_secs(30),
            buffer_size: opts.buffer_size,
            down_removal_margin: crate::faults::STABLE_AFTER
                + opts.detection_delay
                + Duration::from_secs(1),
            broken_coordinator_gate: opts.broken_coordinator,
            ..ShardingSettings::default()
        };
        let mut w = Self {
            oracle: Oracle::new(opts.downing),
            net: Net::new(SimRng::of(seed, Stream::Network), opts.faults.duplicate),
            opts,
            now: Instant::ZERO,
            seq: 0,
            queue: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            nodes: Nodes::default(),
            check: Checker::default(),
            rng_faults: SimRng::of(seed, Stream::Faults),
            rng_work: SimRng::of(seed, Stream::Workload),
            rng_entities: SimRng::of(seed, Stream::Entities),
            rng_membership: SimRng::of(seed, Stream::Membership),
            rng_nodes: SimRng::of(seed, Stream::Nodes),
            pending_stops: BTreeMap::new(),
            ignored_stops: BTreeSet::new(),
            incarnations: BTreeMap::new(),
            settings,
            crashed: BTreeSet::new(),
            downed: BTreeSet::new(),
            left: BTreeSet::new(),
            last_incarnation: BTreeMap::new(),
            topology_epoch: 0,
            no_survivors: false,
            traffic: true,
            zipf: crate::workload::Zipf::new(opts_entities),
            trace: std::env::var_os("SIM_TRACE").is_some(),
            trace_all: std::env::var("SIM_TRACE").is_ok_and(|v| v == "2"),
            sink: None,
            coverage: BTreeMap::new(),
            reporting_stop: None,
            events_processed: 0,
            dead_letters: 0,
            ty: EntityType::new(TYPE),
            entity_ids: (0..opts_entities)
                .map(|i| EntityId::new(format!("e{i}")))
                .collect(),
            nodes_epoch: 0,
            senders: ((u64::MAX, 0), Vec::new()),
            scratch: Vec::new(),
            digest: 0xcbf2_9ce4_8422_2325,
        };
        for n in 1..=w.opts.nodes {
            w.start_node(NodeId(n), Incarnation(1));
        }
        let everyone: BTreeSet<NodeId> = w.nodes.keys().copied().collect();
        w.publish(&everyone, w.oracle.view());
        w
    }

    /// Schedules `ev` at `at` (never in the past).
    pub(crate) fn schedule(&mut self, at: Instant, ev: Ev) {
        self.seq += 1;
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = Some(ev);
                slot
            }
            None => {
                self.slots.push(Some(ev));
                self.slots.len() - 1
            }
        };
        self.queue.push(Reverse((at.max(self.now), self.seq, slot)));
    }

    /// Processes events until `until` (true time).
    pub(crate) fn run_until(&mut self, until: Instant) {
        while let Some(&Reverse((at, _, slot))) = self.queue.peek() {
            if at > until {
                break;
            }
            self.queue.pop();
            let ev = self.slots[slot].take().expect("scheduled event");
            self.free.push(slot);
            self.now = at;
            self.events_processed += 1;
            self.handle(ev);
        }
        self.now = self.now.max(until);
    }

    /// A digest of everything that happened, equal for equal seeds.
    pub(crate) fn digest(&self) -> u64 {
        self.digest
    }

    /// Starts (or restarts) `node` as incarnation `incarnation` and adds it to the membership.
    pub(crate) fn start_node(&mut self, node: NodeId, incarnation: Incarnation) {
        let mut t = EntityTypeConfig::new(TYPE);
        t.number_of_shards = self.opts.shards;
        t.passivate_idle_after = Some(Duration::from_secs(60));
        let mut config = Config::new(node, incarnation).with_entity_type(t);
        config.seed = self.rng_nodes.next_u64();
        config.settings = self.settings.clone();
        let drift = i64::from(self.opts.faults.drift_ppm);
        let skew_ppm = if drift == 0 {
            0
        } else {
            self.rng_nodes.range(0, 2 * drift as u64) as i64 - drift
        };
        let offset = self.rng_nodes.range(0, 1_000_000_000);
        let id = config.member_id();
        let clock = Clock { offset, skew_ppm };
        let local = clock.local(self.now);
        let state = Node::new(config, local).expect("the simulator's config is valid");
        let sim = SimNode {
            driver: Driver::new(state, local),
            id,
            clock,
            wakeup: None,
            view_version: 0,
            paused: None,
        };
        self.nodes.insert(node, sim);
        self.nodes_epoch += 1;
        let last = self.last_incarnation.entry(node).or_default();
        // A member id never comes back (DESIGN.md decision 7); reusing one is a simulator bug.
        assert!(incarnation.0 > *last, "{id} was started before");
        *last = incarnation.0;
        self.oracle.join(id);
    }

    /// Running processes of current Up members (those clients send through).
    pub(crate) fn up_members(&self) -> Vec<MemberId> {
        self.nodes
            .values()
            .filter(|n| self.oracle.is_up(n.id))
            .map(|n| n.id)
            .collect()
    }

    /// A random running Up member for a client to send through (the list is cached until the
    /// membership or the set of processes changes: clients send thousands of messages between).
    pub(crate) fn pick_sender(&mut self) -> Option<MemberId> {
        let key = (self.oracle.version, self.nodes_epoch);
        if self.senders.0 != key {
            self.senders = (key, self.up_members());
        }
        let senders = &self.senders.1;
        (!senders.is_empty()).then(|| *self.rng_work.pick(senders))
    }

    /// Delivers `view` to each of `to` (running nodes) after its own detection delay.
    pub(crate) fn publish(&mut self, to: &BTreeSet<NodeId>, view: MembershipView) {
        let version = self.oracle.version;
        for n in to {
            let Some(node) = self.nodes.get(n) else {
                continue;
            };
            let member = node.id;
            let delay = self
                .rng_membership
                .duration(Duration::from_millis(10), self.opts.detection_delay);
            let ev = Ev::View {
                member,
                version,
                view: view.clone(),
            };
            self.schedule(self.now + delay, ev);
        }
    }

    /// Feeds `input` to node `n` (if it runs) and handles its effects; a paused node gets it
    /// when it resumes.
    pub(crate) fn input(&mut self, n: NodeId, input: Input) {
        let Some(node) = self.nodes.get_mut(&n) else {
            return;
        };
        if let Some(deferred) = &mut node.paused {
            deferred.push(input);
            return;
        }
        let mut out = std::mem::take(&mut self.scratch);
        let local = node.clock.local(self.now);
        node.driver.handle_input(local, input, &mut out);
        self.after_call(n, &mut out);
        self.scratch = out;
    }

    /// Pauses node `n`'s process; whether it was running and not already paused.
    pub(crate) fn pause(&mut self, n: NodeId) -> bool {
        match self.nodes.get_mut(&n) {
            Some(node) if node.paused.is_none() => {
                node.paused = Some(Vec::new());
                self.log(|| format!("{n} paused"));
                true
            }
            _ => false,
        }
    }

    /// Resumes a paused node: it handles what reached it meanwhile, in order, then its timers.
    pub(crate) fn resume(&mut self, n: NodeId) -> bool {
        let Some(deferred) = self.nodes.get_mut(&n).and_then(|node| node.paused.take()) else {
            return false;
        };
        self.log(|| format!("{n} resumed with {} inputs waiting", deferred.len()));
        if !deferred.is_empty() {
            self.mark("a paused node resumed with inputs waiting");
        }
        for input in deferred {
            self.input(n, input);
        }
        self.wake(n);
        true
    }

    /// Members (by address) that some running member cannot reach: crashed but not yet
    /// removed, paused, or cut off by a partition in either direction.
    pub(crate) fn unreachable(&self) -> BTreeSet<NodeId> {
        let live: Vec<NodeId> = self
            .nodes
            .values()
            .filter(|n| !n.is_paused())
            .map(|n| n.id.node)
            .collect();
        self.oracle
            .view()
            .members()
            .iter()
            .map(|m| m.id)
            .filter(|m| {
                let running = self.nodes.get(&m.node).is_some_and(|n| n.id == *m);
                !running
                    || !live.contains(&m.node)
                    || live.iter().any(|o| !self.net.connected(m.node, *o))
            })
            .map(|m| m.node)
            .collect()
    }

    /// Removes a node's process (crash): its entities die at once.
    pub(crate) fn kill(&mut self, n: NodeId) -> Option<MemberId> {
        let node = self.nodes.remove(&n)?;
        self.nodes_epoch += 1;
        self.check.crashed(node.id);
        self.incarnations.retain(|(m, _), _| *m != node.id);
        Some(node.id)
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Deliver {
                link,
                flight,
                envelope,
            } => {
                self.mix(1, link.1.0);
                if self.net.arrives(link, flight) {
                    self.input(link.1, Input::Receive(envelope));
                }
            }
            Ev::Wakeup(n) => {
                self.mix(2, n.0);
                if self
                    .nodes
                    .get(&n)
                    .is_some_and(|node| node.wakeup == Some(self.now))
                {
                    self.wake(n);
                }
            }
            Ev::EntityStopped {
                member,
                entity,
                incarnation,
            } => {
                self.mix(3, member.node.0);
                if let Some(reason) =
                    self.pending_stops
                        .remove(&(member, entity.clone(), incarnation))
                {
                    self.incarnations.remove(&(member, entity.clone()));
                    self.log(|| format!("{member} stopped {entity}"));
                    self.check.stopped(member, &entity);
                    let entity_type = self.ty.clone();
                    self.reporting_stop = Some((member, entity.clone(), reason));
                    self.input_to(
                        member,
                        Input::EntityStopped {
                            entity_type,
                            entity,
                        },
                    );
                    self.reporting_stop = None;
                }
            }
            Ev::Passivate { member, entity } => {
                self.mix(4, member.node.0);
                self.input_to(
                    member,
                    Input::Passivate {
                        entity_type: self.ty.clone(),
                        entity,
                    },
                );
            }
            Ev::View {
                member,
                version,
                view,
            } => {
                self.mix(5, member.node.0);
                let Some(node) = self.nodes.get_mut(&member.node).filter(|n| n.id == member) else {
                    return;
                };
                if version > node.view_version {
                    node.view_version = version;
                    let summary: Vec<String> = view
                        .members()
                        .iter()
                        .map(|m| format!("{}:{:?}", m.id, m.status))
                        .collect();
                    self.log(|| format!("{member} view v{version} [{}]", summary.join(" ")));
                    self.input(member.node, Input::MembershipChanged(view));
                }
            }
            Ev::Client => {
                self.mix(6, 0);
                crate::workload::client_message(self);
            }
            Ev::Fault(fault) => {
                self.mix(7, 0);
                self.log(|| format!("fault {fault:?}"));
                crate::faults::apply(self, fault);
            }
        }
    }

    /// Runs node `n`'s due timers (unless it is paused: it runs them when it resumes).
    fn wake(&mut self, n: NodeId) {
        let Some(node) = self.nodes.get_mut(&n) else {
            return;
        };
        node.wakeup = None;
        if node.is_paused() {
            return;
        }
        let mut out = std::mem::take(&mut self.scratch);
        let local = node.clock.local(self.now);
        node.driver.handle_wakeup(local, &mut out);
        self.after_call(n, &mut out);
        self.scratch = out;
    }

    fn input_to(&mut self, member: MemberId, input: Input) {
        if self.nodes.get(&member.node).is_some_and(|n| n.id == member) {
            self.input(member.node, input);
        }
    }

    /// Handles a driver call's effects, checks buffer caps and busy loops, re-arms the wakeup.
    fn after_call(&mut self, n: NodeId, out: &mut Vec<Effect>) {
        let Some(member) = self.nodes.get(&n).map(|node| node.id) else {
            return out.clear();
        };
        for effect in out.drain(..) {
            match effect {
                Effect::Send(envelope) => self.send(envelope),
                Effect::Entity(e) => self.entity(member, e),
                Effect::Event(Event::DeadLetter {
                    entity: Some(entity),
                    payload: Some(payload),
                    reason,
                    ..
                }) => {
                    self.dead_letters += 1;
                    if reason == shoal_core::DeadLetterReason::BufferFull {
                        self.mark("a full buffer dead-lettered a message");
                    }
                    self.log(|| format!("{member} dead letter {entity} {reason:?}"));
                    self.check.dead_letter(&entity, &payload);
                }
                _ => {}
            }
        }
        let node = self.nodes.get_mut(&n).expect("node still running");
        let buffered = node.driver.node().buffered(&self.ty);
        let busy = node.driver.busy_loops();
        let next = node
            .driver
            .next_wakeup()
            .map(|local| node.clock.true_time(local).max(self.now))
            // A busy loop (reported below as a violation) must not spin the world at one instant.
            .map(|at| {
                if busy > 0 {
                    at.max(self.now + Duration::from_millis(100))
                } else {
                    at
                }
            });
        if let Some(at) = next {
            if node.wakeup.is_none_or(|w| at < w || w < self.now) {
                node.wakeup = Some(at);
                self.schedule(at, Ev::Wakeup(n));
            }
        }
        if buffered > self.settings.buffer_size {
            let detail = format!("{member} buffers {buffered}");
            self.check
                .fail(self.now, Property::BufferCap, member, detail);
        }
        if busy > 0 {
            let detail = format!("{member}: {busy} busy loops");
            self.check
                .fail(self.now, Property::BusyLoop, member, detail);
        }
    }

    fn send(&mut self, envelope: Envelope) {
        // Every message is encoded as it would be for the wire (so one that does not fit a frame
        // fails the run). Test builds also decode every frame and check the round trip; release
        // builds (sweeps, the bench) skip that third of a message's cost.
        let frame = codec::encode(&envelope).expect("core messages fit in a frame");
        if cfg!(debug_assertions) {
            let decoded = codec::decode(&frame).expect("frames decode");
            assert_eq!(decoded, envelope, "the codec round-trips every message");
        }
        let link = (envelope.from.node, envelope.to.node);
        match &envelope.message.body {
            shoal_core::Body::HandOff { .. } if self.net.partitioned() => {
                self.mark("handoff during a partition");
            }
            shoal_core::Body::Register { handing_off, .. } if !handing_off.is_empty() => {
                self.mark("coordinator moved while a handoff was in flight");
            }
            shoal_core::Body::BeginHandOff { .. } => self.mark("handoff begun"),
            _ => {}
        }
        if self.trace_all || !matches!(envelope.message.body, shoal_core::Body::Forward { .. }) {
            self.log(|| {
                format!(
                    "{} -> {} {:?}",
                    envelope.from, envelope.to, envelope.message.body
                )
            });
        }
        let [first, copy] = self.net.send(self.now, link);
        if let Some(flight) = copy {
            self.mark("the network duplicated a message");
            let envelope = envelope.clone();
            self.schedule(
                flight.at,
                Ev::Deliver {
                    link,
                    flight,
                    envelope,
                },
            );
        }
        if let Some(flight) = first {
            self.schedule(
                flight.at,
                Ev::Deliver {
                    link,
                    flight,
                    envelope,
                },
            );
        }
    }

    /// Folds one event (its time, kind and node) into the digest.
    fn mix(&mut self, kind: u64, node: u64) {
        for word in [self.now.as_nanos(), kind, node] {
            // FNV-1a over whole words, then a xor-shift so high bits reach low ones.
            self.digest = (self.digest ^ word).wrapping_mul(0x0100_0000_01b3);
            self.digest ^= self.digest >> 29;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_convert_exactly_as_wide_arithmetic_does() {
        for skew_ppm in [-1000, -7, 0, 3, 999] {
            for offset in [0, 123_456_789, 999_999_999] {
                let clock = Clock { offset, skew_ppm };
                for t in [0, 1, 999_999, 1_000_001, 86_400_000_000_123, 1 << 50] {
                    let wide = i128::from(t);
                    let expected =
                        wide + i128::from(offset) + wide * i128::from(skew_ppm) / 1_000_000;
                    let local = clock.local(Instant(t));
                    assert_eq!(i128::from(local.as_nanos()), expected);
                    // A wakeup for a reading fires when the clock shows it, a nanosecond or
                    // two late at most (the division rounds up).
                    let back = clock.true_time(local);
                    assert!(clock.local(back) >= local, "{skew_ppm} {offset} {t}");
                    assert!(back <= Instant(t + 2), "{skew_ppm} {offset} {t}");
                }
            }
        }
    }
}
