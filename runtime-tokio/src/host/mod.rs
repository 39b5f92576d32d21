//! The host: the one task that owns the node's [`Driver`] by value (no lock around protocol
//! state). Everything else talks to it through channels: envelopes from the transport
//! (control lane first), signals from entity tasks, remember-store completions, commands from
//! handles. After every driver
//! call it feeds back what the `io::TokioIo` collected (refusals of full queues, answers for
//! other members), turns membership changes into events, and sleeps until the core's next
//! timer or the next request deadline.
//!
//! The loop is deterministic: each round takes what is ready in the fixed order of
//! `sources::SOURCES` (control lane, due timers, entity signals, store completions, commands,
//! data lane), at most `ROUND` from each queue so none waits behind another, and never relies
//! on a random choice between ready branches. On a simulated network and clock (turmoil) one
//! seed therefore gives one run.

pub(crate) mod command;
pub(crate) mod io;
pub mod requests;
mod sources;

use std::time::Duration;

use shoal_core::{Address, Command, Driver, Envelope, Input, Instant, earliest};
use tokio::sync::{mpsc, oneshot};

use crate::clock::Clock;
use crate::entity::letter::{AskRef, Letter};
use crate::entity::{EntitySignal, SignalKind};
use crate::event::{MemberTracker, NodeEvent, log_member_event};
use command::{HostCommand, NodeStats};
use io::TokioIo;

/// How often the core's counters are exported to the `metrics` facade.
const METRICS_EVERY: Duration = Duration::from_secs(1);

/// Most items taken from one queue in a round.
const ROUND: usize = 64;

/// What a round found.
enum Round {
    /// Nothing was ready: wait.
    Idle,
    /// Work was done; more may be ready.
    Busy,
    /// The node was aborted.
    Stop,
}

/// The host task's state.
pub(crate) struct Host {
    pub(crate) driver: Driver,
    pub(crate) io: TokioIo,
    pub(crate) clock: Clock,
    pub(crate) commands: mpsc::Receiver<HostCommand>,
    pub(crate) control_in: mpsc::Receiver<Box<Envelope>>,
    pub(crate) data_in: mpsc::Receiver<Box<Envelope>>,
    pub(crate) signals: mpsc::UnboundedReceiver<EntitySignal>,
    /// Completions of remember-store requests (see `io::StoreLink`).
    pub(crate) store_done: mpsc::UnboundedReceiver<Input>,
    pub(crate) members: MemberTracker,
    pub(crate) leave_waiters: Vec<oneshot::Sender<()>>,
    /// Seed addresses: their transport tasks are kept while joining.
    pub(crate) seeds: Vec<Address>,
    /// A safety net for commands (the core answers every command itself).
    pub(crate) command_timeout: Duration,
}

impl Host {
    /// Runs until this member leaves the cluster or is aborted.
    pub(crate) async fn run(mut self) {
        let mut next_export = self.clock.now() + METRICS_EVERY;
        self.after_call();
        while !self.io.left {
            let now = self.clock.now();
            if now >= next_export {
                self.export_metrics();
                next_export = now + METRICS_EVERY;
            }
            match self.handle_ready(now) {
                Round::Stop => break,
                Round::Busy => {
                    // Let the transport and entity tasks run before the next round.
                    tokio::task::yield_now().await;
                    continue;
                }
                Round::Idle => {}
            }
            let wake = self
                .next_deadline()
                .map_or(next_export, |at| at.min(next_export));
            // Whatever woke the loop is handled now; the next round takes anything else ready.
            if !self.wait(wake).await {
                break;
            }
        }
        self.io.transport.close().await;
        self.stop();
    }

    /// The core's next timer or the next request deadline, whichever comes first.
    fn next_deadline(&self) -> Option<Instant> {
        earliest(self.driver.next_wakeup(), self.io.next_deadline())
    }

    fn input(&mut self, input: Input) {
        self.driver
            .handle_input(self.clock.now(), input, &mut self.io);
        self.after_call();
    }

    fn wakeup(&mut self) {
        let now = self.clock.now();
        self.driver.handle_wakeup(now, &mut self.io);
        self.io.expire(now);
        self.after_call();
    }

    /// Feeds back what the last call's effects produced, until nothing is left.
    fn after_call(&mut self) {
        while !self.io.feedback.is_empty() {
            let now = self.clock.now();
            for input in std::mem::take(&mut self.io.feedback) {
                self.driver.handle_input(now, input, &mut self.io);
            }
        }
        if std::mem::take(&mut self.io.membership_changed) {
            let view = self.driver.node().view();
            for event in self.members.changes(view) {
                log_member_event(&event, view);
                let _ = self.io.events.send(event);
            }
            let seeds = &self.seeds;
            let known = |address: &Address| {
                seeds.contains(address)
                    || view
                        .members()
                        .iter()
                        .any(|m| m.address.as_ref() == Some(address))
            };
            self.io.transport.retain(known);
        }
    }

    fn handle_signal(&mut self, signal: EntitySignal) {
        let EntitySignal {
            entity_type,
            entity,
            generation,
            kind,
        } = signal;
        let input = match kind {
            SignalKind::Answer { ask, answer } => {
                self.io.answer(ask.asker, ask.id, answer);
                self.after_call();
                return;
            }
            SignalKind::Lifecycle(step) => {
                self.io
                    .entities
                    .handle_lifecycle(entity_type, entity, generation, step)
            }
        };
        if let Some(input) = input {
            self.input(input);
        }
    }

    /// Handles one command; `false` stops the node.
    fn handle_command(&mut self, command: HostCommand) -> bool {
        let now = self.clock.now();
        match command {
            HostCommand::Tell {
                entity_type,
                entity,
                payload,
            } => {
                self.input(Input::Tell {
                    entity_type,
                    entity,
                    payload,
                });
            }
            HostCommand::Ask {
                entity_type,
                entity,
                message,
                timeout,
                answer,
            } => {
                let id = self.io.asks.insert(now + timeout, answer);
                let ask = Some(AskRef {
                    asker: self.io.me,
                    id: id.0,
                });
                let payload = Letter { ask, message }.to_payload();
                self.input(Input::Tell {
                    entity_type,
                    entity,
                    payload,
                });
            }
            HostCommand::Command { command, answer } => {
                let request = self.io.commands.insert(now + self.command_timeout, answer);
                self.input(Input::Command { request, command });
            }
            HostCommand::Leave { done } => {
                self.leave_waiters.push(done);
                tracing::info!(me = %self.io.me, "leaving the cluster");
                let (answer, _) = oneshot::channel();
                let request = self.io.commands.insert(now + self.command_timeout, answer);
                self.input(Input::Command {
                    request,
                    command: Command::Leave,
                });
            }
            HostCommand::Abort => return false,
            HostCommand::Stats { answer } => {
                let _ = answer.send(NodeStats {
                    transport: self.io.transport.stats(),
                    core: self.driver.node().metrics().clone(),
                    routes: self.driver.node().route_counts(),
                    entities: self.io.entities.len(),
                    pending_asks: self.io.asks.len(),
                    late_replies: self.io.asks.late_replies(),
                });
            }
        }
        true
    }

    fn export_metrics(&self) {
        let m = self.driver.node().metrics();
        let routes = self.driver.node().route_counts();
        for (name, value) in [
            ("shoal_messages_delivered_total", routes.delivered),
            ("shoal_messages_forwarded_total", routes.forwarded),
            ("shoal_messages_buffered_total", routes.buffered),
            ("shoal_core_misaddressed_total", m.misaddressed),
            ("shoal_core_duplicates_total", m.duplicates),
            (
                "shoal_core_from_older_incarnation_total",
                m.from_older_incarnation,
            ),
            (
                "shoal_core_unknown_entity_type_total",
                m.unknown_entity_type,
            ),
            ("shoal_core_fenced_total", m.fenced),
            ("shoal_core_rejected_total", m.rejected),
            ("shoal_core_busy_loops_total", self.driver.busy_loops()),
        ] {
            metrics::counter!(name).absolute(value);
        }
        metrics::gauge!("shoal_entities").set(self.io.entities.len() as f64);
        metrics::gauge!("shoal_asks_pending").set(self.io.asks.len() as f64);
    }

    fn stop(mut self) {
        self.io.entities.abort_all();
        self.io.transport.shutdown();
        for waiter in self.leave_waiters.drain(..) {
            let _ = waiter.send(());
        }
        let _ = self.io.events.send(NodeEvent::Stopped);
        tracing::info!(me = %self.io.me, "node stopped");
    }
}
