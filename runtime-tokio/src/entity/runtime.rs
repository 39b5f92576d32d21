//! The host's side of its entities: which incarnation of each runs, its mailbox, its direct
//! route (see `route`) and how to abort it. Executes the core's entity effects without ever
//! blocking: a full mailbox is reported back to the core (`Input::MailboxFull`), which makes it
//! a dead letter. Every effect passes the core's route gate first, which closes a route on a
//! start or stop and opens one when a letter of this node's handles was handed over.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;

use shoal_core::direct::{RouteChange, RouteGate};
use shoal_core::lease::FencingToken;
use shoal_core::{EntityEffect, EntityId, EntityType, Epoch, Input, Payload, ShardId, StopReason};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use super::mailbox::{Mail, MailSender, mailbox};
use super::route::{Queued, Route, Routes};
use super::{EntityLink, EntitySignal, Factory, Lifecycle};
use crate::metric_names;
use crate::store::Journal;

/// One running incarnation.
struct Running {
    generation: u64,
    /// The epoch its start carried.
    epoch: Epoch,
    /// `None` once a graceful stop closed it.
    mailbox: Option<MailSender>,
    /// Its direct route, while open.
    route: Option<Arc<Route>>,
    task: AbortHandle,
}

/// The entities this node runs.
pub(crate) struct EntityRuntime {
    factories: HashMap<EntityType, Arc<dyn Factory>>,
    mailbox_capacity: usize,
    /// Per type, so that a delivery looks its entity up without cloning ids.
    running: HashMap<EntityType, HashMap<EntityId, Running>>,
    next_generation: u64,
    signals: mpsc::UnboundedSender<EntitySignal>,
    routes: Arc<Routes>,
    /// The node's state store, handed to every entity (persistent types write through it).
    journal: Option<Journal>,
    /// Decides when direct routes open and close.
    gate: RouteGate,
    /// The handles' letter being fed to the core, if one is.
    judging: Option<Queued>,
    /// Debug builds check the core's effects and this host's reports against the entity
    /// contract, as the simulator does on every run.
    #[cfg(debug_assertions)]
    ledger: shoal_core::EntityLedger,
}

impl EntityRuntime {
    /// Runs entities made by `factories`, each with a mailbox of `mailbox_capacity`, writing
    /// state through `journal`; their tasks report on `signals`, and count what they answer
    /// too late on the node's `routes`.
    pub(crate) fn new(
        factories: HashMap<EntityType, Arc<dyn Factory>>,
        mailbox_capacity: usize,
        journal: Option<Journal>,
        (signals, routes): (mpsc::UnboundedSender<EntitySignal>, Arc<Routes>),
    ) -> Self {
        Self {
            factories,
            mailbox_capacity,
            running: HashMap::new(),
            next_generation: 0,
            signals,
            routes,
            journal,
            gate: RouteGate::default(),
            judging: None,
            #[cfg(debug_assertions)]
            ledger: shoal_core::EntityLedger::default(),
        }
    }

    /// How many entity tasks run.
    pub(crate) fn len(&self) -> usize {
        self.running.values().map(HashMap::len).sum()
    }

    fn running_mut(&mut self, entity_type: &EntityType, entity: &EntityId) -> Option<&mut Running> {
        self.running.get_mut(entity_type)?.get_mut(entity)
    }

    /// Executes one of the core's entity effects; what the core must hear back (a full
    /// mailbox) goes to `feedback`.
    pub(crate) fn handle_effect(&mut self, effect: EntityEffect, feedback: &mut Vec<Input>) {
        #[cfg(debug_assertions)]
        if let Err(breach) = self.ledger.effect(&effect) {
            tracing::error!(%breach, "the core broke the entity contract");
        }
        if let Some(change) = self.gate.handle_effect(&effect) {
            self.change_route(change);
        }
        match effect {
            EntityEffect::Start {
                entity_type,
                entity,
                shard,
                epoch,
                lease_token,
            } => self.start(entity_type, entity, (shard, epoch, lease_token), feedback),
            EntityEffect::Deliver {
                entity_type,
                entity,
                payload,
            } => self.deliver(entity_type, entity, payload, feedback),
            EntityEffect::Stop {
                entity_type,
                entity,
                reason,
            } => self.stop(&entity_type, &entity, reason),
        }
    }

    fn start(
        &mut self,
        entity_type: EntityType,
        entity: EntityId,
        (shard, epoch, lease_token): (ShardId, Epoch, Option<FencingToken>),
        feedback: &mut Vec<Input>,
    ) {
        let Some(factory) = self.factories.get(&entity_type) else {
            // The core starts only types it hosts, and every hosted type has a factory.
            tracing::error!(%entity_type, %entity, "start of an entity type without a factory");
            self.reporting_stopped(&entity_type, &entity);
            feedback.push(Input::EntityStopped {
                entity_type,
                entity,
            });
            return;
        };
        self.next_generation += 1;
        let (sender, mailbox) = mailbox(self.mailbox_capacity);
        let link = EntityLink {
            entity_type: entity_type.clone(),
            entity: entity.clone(),
            shard,
            epoch,
            lease_token,
            generation: self.next_generation,
            journal: self.journal.clone(),
            mailbox_capacity: self.mailbox_capacity,
            signals: self.signals.clone(),
            routes: Arc::clone(&self.routes),
        };
        // Everything the entity logs carries where it runs.
        let span =
            tracing::info_span!("entity", region = %entity_type, shard = shard.0, id = %entity);
        let task = factory.spawn(mailbox, link, span).abort_handle();
        metrics::counter!(metric_names::ENTITIES_STARTED_TOTAL).increment(1);
        let running = Running {
            generation: self.next_generation,
            epoch,
            mailbox: Some(sender),
            route: None,
            task,
        };
        match self
            .running
            .entry(entity_type.clone())
            .or_default()
            .entry(entity)
        {
            Entry::Vacant(vacant) => {
                vacant.insert(running);
            }
            Entry::Occupied(mut occupied) => {
                tracing::error!(%entity_type, entity = %occupied.key(), "started while running; aborting the old task");
                occupied.insert(running).task.abort();
            }
        }
    }

    fn deliver(
        &mut self,
        entity_type: EntityType,
        entity: EntityId,
        payload: Payload,
        feedback: &mut Vec<Input>,
    ) {
        let mailbox = self
            .running_mut(&entity_type, &entity)
            .and_then(|running| running.mailbox.as_ref());
        let payload = match mailbox {
            Some(mailbox) => match mailbox.try_send(Mail::Letter(payload)) {
                Ok(()) => return,
                Err(error) => match error.into_inner() {
                    Mail::Letter(payload) => payload,
                    // The host sends letters only.
                    Mail::Direct(_) => return,
                },
            },
            None => {
                // The core delivers only to entities it started and has not stopped.
                tracing::error!(%entity_type, %entity, "delivery to an entity that is not running");
                payload
            }
        };
        metrics::counter!(metric_names::MAILBOX_FULL_TOTAL).increment(1);
        feedback.push(Input::MailboxFull {
            entity_type,
            entity,
            payload,
        });
    }

    fn stop(&mut self, entity_type: &EntityType, entity: &EntityId, reason: StopReason) {
        let Some(running) = self.running_mut(entity_type, entity) else {
            return;
        };
        if let StopReason::Passivation(cause) = reason {
            let counter = metric_names::PASSIVATIONS_TOTAL;
            metrics::counter!(counter, "reason" => cause.as_str()).increment(1);
        }
        match reason {
            // Closing the mailbox lets the task finish what is queued, then run its stop hook.
            StopReason::Passivation(_) | StopReason::HandOff => running.mailbox = None,
            StopReason::Forced => running.task.abort(),
        }
    }

    /// A step reported by the task of `generation`: what the core must hear, if it is the
    /// running incarnation (a replaced one's report is stale).
    pub(crate) fn handle_lifecycle(
        &mut self,
        entity_type: EntityType,
        entity: EntityId,
        generation: u64,
        step: Lifecycle,
    ) -> Option<Input> {
        let of_type = self.running.get_mut(&entity_type)?;
        if of_type.get(&entity)?.generation != generation {
            return None;
        }
        Some(match step {
            Lifecycle::Stopped => {
                if let Some(route) = of_type.remove(&entity).and_then(|r| r.route) {
                    // It ended on its own (no stop closed the route).
                    route.close();
                }
                self.reporting_stopped(&entity_type, &entity);
                Input::EntityStopped {
                    entity_type,
                    entity,
                }
            }
            Lifecycle::Passivate => Input::Passivate {
                entity_type,
                entity,
            },
            Lifecycle::WriteFenced(current) => {
                let epoch = of_type.get(&entity)?.epoch;
                Input::WriteFenced {
                    entity_type,
                    entity,
                    epoch,
                    current,
                }
            }
        })
    }

    /// The host is about to feed the core a letter of its handles, `queued` on its route.
    pub(crate) fn begin_letter(&mut self, queued: Queued) {
        let route = queued.route();
        self.gate.begin_letter(route.entity_type(), route.entity());
        self.judging = Some(queued);
    }

    /// The core's call with the letter is done: its route is opened or closed, then the
    /// letter stops counting as queued (in that order, so no handle sends directly while the
    /// route's fate is open).
    pub(crate) fn end_letter(&mut self) {
        if let Some(change) = self.gate.end_letter() {
            self.change_route(change);
        }
        // Dropping it lowers the count.
        self.judging = None;
    }

    fn change_route(&mut self, change: RouteChange) {
        match change {
            RouteChange::Open(entity_type, entity) => {
                let Some(route) = self.judging.as_ref().map(|q| Arc::clone(q.route())) else {
                    return;
                };
                let running = self.running_mut(&entity_type, &entity);
                if let Some(running) = running.filter(|r| r.route.is_none()) {
                    if let Some(mailbox) = &running.mailbox {
                        route.open(mailbox.clone());
                        running.route = Some(route);
                    }
                }
            }
            RouteChange::Close(entity_type, entity) => {
                let running = self.running_mut(&entity_type, &entity);
                if let Some(route) = running.and_then(|r| r.route.take()) {
                    route.close();
                }
            }
        }
    }

    /// The core is about to hear that this incarnation terminated.
    fn reporting_stopped(&mut self, entity_type: &EntityType, entity: &EntityId) {
        #[cfg(debug_assertions)]
        if let Err(breach) = self.ledger.stopped(entity_type, entity) {
            tracing::error!(%breach, "this host broke the entity contract");
        }
        #[cfg(not(debug_assertions))]
        let _ = (entity_type, entity);
    }

    /// Aborts every entity (the node is stopping).
    pub(crate) fn abort_all(&mut self) {
        for running in self.running.values().flat_map(HashMap::values) {
            running.task.abort();
        }
    }
}
