//! The host: the one task that owns the node's [`Driver`] by value (no lock around protocol
//! state). Everything else talks to it through channels: envelopes from the transport
//! (control lane first), signals from entities, remember-store completions, commands from
//! handles. After every driver call it handles what the `io::TokioIo` collected: the core's
//! events (replies complete the request tables, member events are logged, all go to the event
//! stream) and refusals of full queues and answers for other members, fed back to the core.
//! Then it sleeps until the core's next timer or the next request deadline.
//!
//! The loop is deterministic: each round takes what is ready in the fixed order of
//! `sources::SOURCES` (control lane, due timers, entity signals, store completions, commands,
//! data lane), at most `ROUND` from each queue so none waits behind another, and never relies
//! on a random choice between ready branches. On a simulated network and clock (turmoil) one
//! seed therefore gives one run. The local fast path (`crate::entity::route`) adds no source:
//! handles' direct deliveries bypass the host, and the routes they touched are drained at the
//! start of each round (and before the item a wait returns) into one `Input::Accessed` per
//! type, in the order their first access was queued; that queue never wakes the host.

pub(crate) mod command;
pub(crate) mod delivery;
mod events;
pub(crate) mod io;
pub(crate) mod requests;
mod sources;

use std::sync::Arc;
use std::time::Duration;

use shoal_core::direct::{AccessLog, LinkLetter};
use shoal_core::{
    Address, Command, Driver, Envelope, Input, Instant, MemberId, NodeId, Payload, Phase, Reply,
    SeedNode, earliest,
};
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::clock::Clock;
use crate::entity::letter::{AskRef, Letter};
use crate::entity::route::{Queued, Route, Routes};
use crate::entity::{EntitySignal, SignalKind};
use crate::error::QueryError;
use crate::event::NodeEvent;
use crate::metric_names;
use crate::transport::Arrival;
pub(crate) use command::HostCommand;
use command::NodeStats;
use io::TokioIo;
use requests::Requests;

pub(crate) use crate::entity::mailbox::AskAnswer;
/// Waits for a command's reply.
pub(crate) type CommandAnswer = oneshot::Sender<Result<Reply, QueryError>>;

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
    pub(crate) me: MemberId,
    pub(crate) driver: Driver,
    pub(crate) io: TokioIo,
    pub(crate) clock: Clock,
    pub(crate) commands: mpsc::Receiver<HostCommand>,
    pub(crate) control_in: mpsc::Receiver<Box<Envelope>>,
    pub(crate) data_in: mpsc::Receiver<Arrival>,
    pub(crate) signals: mpsc::UnboundedReceiver<EntitySignal>,
    /// Completions of remember-store requests (see `crate::store::StoreLink`).
    pub(crate) store_done: mpsc::UnboundedReceiver<Input>,
    /// Asks of this node's handles waiting for their reply.
    pub(crate) asks: Requests<AskAnswer>,
    /// Commands of this node's handles waiting for the core's reply.
    pub(crate) requests: Requests<CommandAnswer>,
    pub(crate) events: broadcast::Sender<NodeEvent>,
    /// This member is out of the cluster (`Event::LeftCluster`).
    pub(crate) left: bool,
    pub(crate) leave_waiters: Vec<oneshot::Sender<()>>,
    /// Seed addresses: their transport tasks are kept while joining.
    pub(crate) seeds: Vec<Address>,
    /// A safety net for commands (the core answers every command itself).
    pub(crate) command_timeout: Duration,
    /// The node's reliable producers, which entities' confirmations go to.
    pub(crate) producers: delivery::Producers,
    /// The node's direct routes (for their count of deliveries).
    pub(crate) routes: Arc<Routes>,
    /// Routes handles delivered on since the last report of accesses.
    pub(crate) accessed: mpsc::UnboundedReceiver<Arc<Route>>,
    /// The accesses being reported.
    pub(crate) access_log: AccessLog,
}

impl Host {
    /// Runs until this member leaves the cluster or is aborted.
    pub(crate) async fn run(mut self) {
        let mut next_export = self.clock.now() + METRICS_EVERY;
        self.after_call();
        while !self.left {
            let now = self.clock.now();
            if now >= next_export {
                self.export_metrics();
                next_export = now + METRICS_EVERY;
            }
            match self.handle_ready(now) {
                Round::Stop => break,
                Round::Busy => {
                    // Let the transport and the entities' drivers run before the next round.
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
        let requests = earliest(self.asks.next_deadline(), self.requests.next_deadline());
        earliest(self.driver.next_wakeup(), requests)
    }

    fn input(&mut self, input: Input) {
        self.driver
            .handle_input(self.clock.now(), input, &mut self.io);
        self.after_call();
    }

    fn wakeup(&mut self) {
        let now = self.clock.now();
        self.driver.handle_wakeup(now, &mut self.io);
        // Answers the wake-up produced complete their requests before deadlines fail them.
        self.after_call();
        self.expire_requests(now);
    }

    /// Handles what the last call's effects left (events, refused sends, answers for other
    /// members), feeding inputs back until nothing is left.
    fn after_call(&mut self) {
        while !self.io.feedback.is_empty() {
            for event in std::mem::take(&mut self.io.feedback.events) {
                self.handle_event(event);
            }
            let now = self.clock.now();
            for input in std::mem::take(&mut self.io.feedback.inputs) {
                self.driver.handle_input(now, input, &mut self.io);
            }
        }
    }

    /// Feeds the core a letter of this node's handles, `queued` on its entity's route: the
    /// route gate opens the route if the core hands it over in this call, and closes it
    /// otherwise.
    fn letter(&mut self, queued: Queued, payload: Payload) {
        let route = queued.route();
        let input = Input::Tell {
            entity_type: route.entity_type().clone(),
            entity: route.entity().clone(),
            payload,
        };
        self.io.entities.begin_letter(queued);
        self.judge_letter(input);
        self.after_call();
    }

    /// Feeds the core a letter the route gate was told of (`begin_letter`, `begin_link_letter`),
    /// then lets the gate open or close its sender's route before anything else runs.
    fn judge_letter(&mut self, input: Input) {
        self.driver
            .handle_input(self.clock.now(), input, &mut self.io);
        self.io.entities.end_letter();
    }

    /// Feeds the core what a connection's reader brought: a letter through the route gate (it
    /// opens or closes the reader's route, before the envelope stops counting as waiting), or
    /// the report of the numbers it consumed on direct routes.
    fn arrival(&mut self, arrival: Arrival) {
        let (envelope, judging) = match arrival {
            Arrival::Consumed { from, seq } => {
                return self.input(Input::LinkConsumed { from, seq });
            }
            Arrival::Envelope(envelope, judging) => (envelope, judging),
        };
        let Some(letter) = LinkLetter::of(&envelope) else {
            return self.input(Input::Receive(envelope));
        };
        self.io.entities.begin_link_letter(judging.link(), &letter);
        self.judge_letter(Input::Receive(envelope));
        // Only now may the reader go direct again: the route changed for this letter.
        drop(judging);
        self.after_call();
    }

    /// Reports what handles delivered on direct routes since the last report, so the core's
    /// idle timeouts and active-entity limits count it (at the start of every round, before
    /// the timers).
    fn report_accesses(&mut self) {
        while let Ok(route) = self.accessed.try_recv() {
            route.reported();
            self.access_log.note(route.entity_type(), route.entity());
        }
        if self.access_log.is_empty() {
            return;
        }
        for input in self.access_log.take_inputs() {
            self.input(input);
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
                self.answer(ask.asker, ask.id, answer);
                self.after_call();
                return;
            }
            SignalKind::Confirm {
                to,
                producer,
                confirm,
            } => {
                self.confirm((to, producer), entity, confirm);
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
            HostCommand::Tell { queued, payload } => self.letter(queued, payload),
            HostCommand::Ask {
                queued,
                message,
                timeout,
                answer,
            } => {
                let id = self.asks.insert(now + timeout, answer);
                let ask = Some(AskRef {
                    asker: self.me,
                    id: id.0,
                });
                let payload = Letter {
                    ask,
                    message,
                    delivery: None,
                }
                .to_payload();
                self.letter(queued, payload);
            }
            HostCommand::Command { command, answer } => {
                let request = self.requests.insert(now + self.command_timeout, answer);
                self.input(Input::Command { request, command });
            }
            HostCommand::Leave { done } => {
                self.leave_waiters.push(done);
                tracing::info!(me = %self.me, "leaving the cluster");
                let (answer, _) = oneshot::channel();
                let request = self.requests.insert(now + self.command_timeout, answer);
                self.input(Input::Command {
                    request,
                    command: Command::Leave,
                });
            }
            HostCommand::RegisterProducer {
                producer,
                confirms,
                answer,
            } => {
                let me = self.me;
                let _ = answer.send(self.producers.register(producer, confirms).map(|()| me));
            }
            HostCommand::Abort => return false,
            HostCommand::View { answer } => {
                let _ = answer.send(self.driver.node().view().clone());
            }
            HostCommand::Readiness { answer } => {
                let _ = answer.send(self.driver.node().readiness());
            }
            HostCommand::Ping { answer } => {
                let _ = answer.send(());
            }
            HostCommand::Discovered { contacts, answer } => {
                let contacts: Vec<SeedNode> = (contacts.iter())
                    .map(|c| SeedNode::new(NodeId::of_address(c), Address::new(c.as_str())))
                    .collect();
                // Connections to them are kept while the node joins, as to its seeds.
                for contact in &contacts {
                    if !self.seeds.contains(&contact.address) {
                        self.seeds.push(contact.address.clone());
                    }
                }
                self.input(Input::ContactsDiscovered(contacts));
                let joining = self.driver.node().membership_phase() == Some(Phase::Joining);
                let _ = answer.send(joining);
            }
            HostCommand::Stats { answer } => {
                let _ = answer.send(NodeStats {
                    transport: self.io.transport.stats(),
                    core: self.driver.node().metrics().clone(),
                    routes: self.driver.node().route_counts(),
                    entities: self.io.entities.len(),
                    pending_asks: self.asks.len(),
                    direct_deliveries: self.routes.direct_deliveries(),
                    late_replies: self.asks.late_replies() + self.routes.late_replies(),
                });
            }
        }
        true
    }

    fn export_metrics(&self) {
        let m = self.driver.node().metrics();
        let routes = self.driver.node().route_counts();
        for (name, value) in [
            (metric_names::MESSAGES_DELIVERED_TOTAL, routes.delivered),
            (metric_names::MESSAGES_FORWARDED_TOTAL, routes.forwarded),
            (metric_names::MESSAGES_BUFFERED_TOTAL, routes.buffered),
            (metric_names::CORE_MISADDRESSED_TOTAL, m.misaddressed),
            (metric_names::CORE_DUPLICATES_TOTAL, m.duplicates),
            (
                metric_names::CORE_FROM_OLDER_INCARNATION_TOTAL,
                m.from_older_incarnation,
            ),
            (
                metric_names::CORE_UNKNOWN_ENTITY_TYPE_TOTAL,
                m.unknown_entity_type,
            ),
            (metric_names::CORE_FENCED_TOTAL, m.fenced),
            (metric_names::CORE_REJECTED_TOTAL, m.rejected),
            (
                metric_names::CORE_BUSY_LOOPS_TOTAL,
                self.driver.busy_loops(),
            ),
        ] {
            metrics::counter!(name).absolute(value);
        }
        metrics::gauge!(metric_names::ENTITIES).set(self.io.entities.len() as f64);
        metrics::gauge!(metric_names::ASKS_PENDING).set(self.asks.len() as f64);
    }

    fn stop(mut self) {
        self.io.entities.abort_all();
        self.io.transport.shutdown();
        for waiter in self.leave_waiters.drain(..) {
            let _ = waiter.send(());
        }
        self.publish(NodeEvent::Stopped);
        tracing::info!(me = %self.me, "node stopped");
    }
}
