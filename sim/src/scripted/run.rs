//! Driving the scripted cluster: inputs and timers through each node's `Driver`, messages and
//! host reports delivered in time order, and the checks after every step.

use std::time::Duration;

use shoal_core::{
    Command, Driver, EntityId, EntityType, Input, Instant, MemberId, NodeId, Payload, RequestId,
};

use super::io::{LogEntry, ScriptIo};
use super::{Cluster, TYPE, entity_in_shard};

/// The most steps `settle` takes, or `run_until` at one instant, before declaring that the
/// cluster does not settle.
const MAX_SETTLE_STEPS: u32 = 100_000;

impl Cluster {
    /// Feeds one input to node `n` and carries out its effects (nothing happens if no node
    /// runs at `n`).
    pub fn input(&mut self, n: u64, input: Input) {
        if self.nodes.contains_key(&NodeId(n)) {
            self.host.feeding(NodeId(n), &input);
        }
        self.call(NodeId(n), |driver, now, io| {
            driver.handle_input(now, input, io)
        });
    }

    /// Runs node `n`'s due timers.
    ///
    /// # Panics
    /// A timer stays due after firing (a busy loop in the core).
    pub(super) fn wake(&mut self, n: NodeId) {
        self.call(n, |driver, now, io| driver.handle_wakeup(now, io));
        if self.nodes.get(&n).is_some_and(|d| d.busy_loops() > 0) {
            self.fail(&format!("busy loop on {n}"));
        }
    }

    /// Feeds `input` to `member` if that incarnation still runs (an answer to a process that
    /// crashed is lost with it).
    fn input_to(&mut self, member: MemberId, input: Input) {
        let running = self.nodes.get(&member.node).map(|d| d.node().member_id());
        if running == Some(member) {
            self.input(member.node.0, input);
        }
    }

    /// One driver call on node `n` (if it runs), its effects carried out as they come, then
    /// the checks.
    fn call(&mut self, n: NodeId, call: impl FnOnce(&mut Driver, Instant, &mut ScriptIo<'_>)) {
        let Some(driver) = self.nodes.get_mut(&n) else {
            return;
        };
        let mut io = ScriptIo {
            node: n,
            member: driver.node().member_id(),
            now: self.now,
            network: &mut self.network,
            host: &mut self.host,
            store: &mut self.store,
            record: &mut self.record,
        };
        call(driver, self.now, &mut io);
        self.after_step();
    }

    /// Resolves the membership log of the step and runs the checks.
    ///
    /// # Panics
    /// A drive contract broke, or a check failed: the message carries the trace.
    fn after_step(&mut self) {
        for entry in std::mem::take(&mut self.record.pending_log) {
            match entry {
                LogEntry::Line(line) => self.membership_log.push(line),
                LogEntry::ViewOf(n) => self.log_view(n),
            }
        }
        if let Some(broken) = self.record.broken.take() {
            self.fail(&broken);
        }
        let mut checks = std::mem::take(&mut self.checks);
        let failed = checks.iter_mut().find_map(|check| check(self).err());
        self.checks = checks;
        if let Some(failed) = failed {
            self.fail(&failed);
        }
    }

    fn fail(&self, what: &str) -> ! {
        panic!(
            "{what} at {}; trace:\n{}",
            self.now,
            self.record.trace.join("\n")
        );
    }

    /// Logs each member whose status (or reachability) node `n` now sees differently.
    fn log_view(&mut self, n: NodeId) {
        let Some(driver) = self.nodes.get(&n) else {
            return;
        };
        let view = driver.node().view();
        let now = self.now;
        let mut known = Vec::new();
        for m in view.members() {
            let unreachable = if m.reachable { "" } else { " (unreachable)" };
            let status = format!("{:?}{unreachable}", m.status);
            known.push(m.id);
            let before = self.seen.insert((n, m.id), status.clone());
            if before.as_ref() != Some(&status) {
                let was = before.unwrap_or_else(|| "-".into());
                self.membership_log
                    .push(format!("{now} {n} sees {}: {was} -> {status}", m.id));
            }
        }
        let gone: Vec<_> = (self.seen.keys())
            .filter(|(o, m)| *o == n && !known.contains(m))
            .map(|(_, m)| *m)
            .collect();
        for m in gone {
            self.seen.remove(&(n, m));
            self.membership_log
                .push(format!("{now} {n} sees {m}: removed"));
        }
    }

    /// Tells `entity` (of [`TYPE`]) `payload`, through node `n`.
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

    /// Sends `command` to node `n`; its answer is [`reply`](Self::reply) of the id returned
    /// (never, if no node runs at `n`).
    pub fn command(&mut self, n: u64, command: Command) -> RequestId {
        let request = RequestId(self.next_request);
        self.next_request += 1;
        self.input(n, Input::Command { request, command });
        request
    }

    /// Asks node `n` to passivate `entity` (of [`TYPE`]), as the entity itself would.
    pub fn passivate(&mut self, n: u64, entity: &str) {
        let input = Input::Passivate {
            entity_type: EntityType::new(TYPE),
            entity: EntityId::new(entity),
        };
        self.input(n, input);
    }

    /// `entity` (of [`TYPE`]) on node `n` stops on its own, as an entity that fails does: its
    /// node hears it stopped without having asked (nothing happens if it does not run there).
    pub fn fail_entity(&mut self, n: u64, entity: &str) {
        let line = self
            .host
            .fail(self.now, NodeId(n), EntityType::new(TYPE), entity);
        self.record.trace.extend(line);
        self.settle();
    }

    /// Delivers the messages, host reports and store answers due by now until none is left,
    /// without advancing time.
    ///
    /// # Panics
    /// It does not settle within 100 000 steps.
    pub fn settle(&mut self) {
        for _ in 0..MAX_SETTLE_STEPS {
            if !self.step(self.now, false) {
                return;
            }
        }
        self.fail("the cluster did not settle");
    }

    /// Delivers in-flight messages one by one (each followed by the host reports due) until
    /// `done` holds; messages still in flight then stay there.
    ///
    /// # Panics
    /// Nothing is left in flight before `done` holds.
    pub fn settle_until(&mut self, mut done: impl FnMut(&Self) -> bool) {
        while !done(self) {
            let Some((at, envelope)) = self.network.pop() else {
                self.fail("nothing left in flight");
            };
            self.now = self.now.max(at);
            if let Some(envelope) = envelope {
                self.input(envelope.to.node.0, Input::Receive(Box::new(envelope)));
            }
            while self.host.next_due().is_some_and(|at| at <= self.now) {
                self.step_host();
            }
        }
    }

    /// Shuts node `n`'s regions down gracefully and delivers messages until it emits
    /// `RegionStopped` (what it still has to say stays in flight).
    pub fn shut_down_until_stopped(&mut self, n: u64) {
        self.command(n, Command::GracefulShutdown { entity_type: None });
        self.settle_until(|c| {
            (c.events().iter())
                .any(|(m, e)| m.0 == n && matches!(e, shoal_core::Event::RegionStopped { .. }))
        });
    }

    /// Every stop held for the script (`StopAnswer::WhenCompleted`) completes now; then the
    /// cluster settles.
    pub fn complete_stops(&mut self) {
        let lines = self.host.complete_stops(self.now);
        self.record.trace.extend(lines);
        self.settle();
    }

    /// Advances virtual time by `d`, delivering what falls due and firing every timer on the
    /// way.
    ///
    /// # Panics
    /// A node ran into a busy loop (a timer that stays due after firing).
    pub fn advance(&mut self, d: Duration) {
        self.run_until(self.now + d);
        for (n, driver) in &self.nodes {
            assert_eq!(driver.busy_loops(), 0, "busy loop on {n}");
        }
    }

    /// Runs until `until` (virtual time since the start), in time order: at one instant,
    /// messages first, then host reports, then store answers, then timers.
    ///
    /// # Panics
    /// Time stops moving: 100 000 steps at one instant (say, entities that answer each other
    /// without end).
    pub fn run_until(&mut self, until: Instant) {
        let (mut at, mut steps) = (self.now, 0);
        while self.step(until, true) {
            if self.now == at {
                steps += 1;
                if steps > MAX_SETTLE_STEPS {
                    self.fail("time stopped moving");
                }
            } else {
                (at, steps) = (self.now, 0);
            }
        }
        self.now = self.now.max(until);
    }

    /// Runs until `secs` seconds since the start.
    pub fn at(&mut self, secs: u64) {
        self.run_until(Instant::ZERO + Duration::from_secs(secs));
    }

    /// Takes the next step due by `until` (timers too if `timers`); whether there was one.
    fn step(&mut self, until: Instant, timers: bool) -> bool {
        let due = |at: Option<Instant>| at.filter(|at| *at <= until);
        let message = due(self.network.next_arrival());
        let report = due(self.host.next_due());
        let store = due(self.store.next_event());
        let timer = if timers {
            (self.nodes.iter())
                .filter_map(|(id, d)| d.next_wakeup().map(|at| (at, *id)))
                .min()
                .filter(|(at, _)| *at <= until)
        } else {
            None
        };
        // The earliest; at one instant (an overdue timer counts as due now: settling leaves
        // timers be), in the order listed.
        let now = self.now;
        let candidates = [
            message.map(|at| (at.max(now), 0)),
            report.map(|at| (at.max(now), 1)),
            store.map(|at| (at.max(now), 2)),
            timer.map(|(at, _)| (at.max(now), 3)),
        ];
        let Some((at, kind)) = candidates.into_iter().flatten().min() else {
            return false;
        };
        self.now = self.now.max(at);
        match kind {
            0 => {
                if let Some((_, Some(envelope))) = self.network.pop() {
                    self.input(envelope.to.node.0, Input::Receive(Box::new(envelope)));
                }
            }
            1 => self.step_host(),
            2 => match self.store.poll(self.now) {
                Ok(answers) => {
                    for (member, input) in answers {
                        self.input_to(member, input);
                    }
                }
                Err(broken) => self.fail(&broken),
            },
            _ => {
                let (_, n) = timer.expect("a timer was due");
                self.wake(n);
            }
        }
        true
    }

    /// Carries out the next thing the host has due.
    fn step_host(&mut self) {
        let Some((_, n, due)) = self.host.pop_due() else {
            return;
        };
        match due {
            super::host::Due::Input(input) => self.input(n.0, input),
            super::host::Due::Terminate(entity_type, entity, life) => {
                let line = self.host.terminate(self.now, n, entity_type, entity, life);
                self.record.trace.extend(line);
            }
        }
    }
}
