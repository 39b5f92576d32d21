//! The host's side of its entities: which incarnation of each runs, its mailbox, its direct
//! route (see `route`) and how to abort it. Executes the core's entity effects without ever
//! blocking: a full mailbox is reported back to the core (`Input::MailboxFull`), which makes it
//! a dead letter. Every effect passes the core's route gate first, which closes a route on a
//! start or stop and opens one when a letter of this node's handles was handed over.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;

use foldhash::fast::RandomState;
use shoal_core::direct::{LinkLetter, RouteChange, RouteGate, Sender};
use shoal_core::lease::FencingToken;
use shoal_core::{EntityEffect, EntityId, EntityType, Epoch, Input, Payload, ShardId, StopReason};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use super::mailbox::{Mail, MailSender, Schedule, mailbox};
use super::route::{Queued, Route, Routes};
use super::{DriverEvent, EntityLink, EntitySignal, Factory, Lifecycle, ShardLink};
use crate::metric_names;
use crate::store::Journal;

/// One running incarnation.
struct Running {
    generation: u64,
    /// Its shard (its driver's), and the epoch its start carried.
    shard: ShardId,
    epoch: Epoch,
    /// `None` once a graceful stop closed it.
    mailbox: Option<MailSender>,
    /// Its direct route, from its first opening to the next start or stop.
    route: Option<Arc<Route>>,
}

/// The driver of one shard's entities on this node (see `driver`).
struct Driver {
    events: mpsc::UnboundedSender<DriverEvent>,
    /// Where its entities' mailboxes schedule their turns.
    turns: Schedule,
    /// What its entities share, for the allocation that started the newest of them.
    link: Arc<ShardLink>,
    /// How many of its entities run: the host lets it go with the last.
    entities: usize,
    task: AbortHandle,
}

/// The entities this node runs.
pub(crate) struct EntityRuntime {
    factories: HashMap<EntityType, Arc<dyn Factory>>,
    mailbox_capacity: usize,
    /// Per type, so that a delivery looks its entity up without cloning ids.
    running: HashMap<EntityType, HashMap<EntityId, Running, RandomState>, RandomState>,
    /// The drivers of the shards whose entities run here.
    drivers: HashMap<(EntityType, ShardId), Driver, RandomState>,
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
            running: HashMap::default(),
            drivers: HashMap::default(),
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

    /// How many entities run.
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
        let Some(factory) = self.factories.get(&entity_type).cloned() else {
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
        let generation = self.next_generation;
        let capacity = self.mailbox_capacity;
        let driver = self.driver(factory, &entity_type, (shard, epoch, lease_token));
        let (sender, mailbox) = mailbox(capacity, generation, driver.turns.clone());
        let link = EntityLink {
            shard: Arc::clone(&driver.link),
            entity: entity.clone(),
            generation,
        };
        // The driver outlives the events the host sends it (it ends after the host dropped
        // its end and its last entity).
        let _ = driver.events.send(DriverEvent::Start(link, mailbox));
        metrics::counter!(metric_names::ENTITIES_STARTED_TOTAL).increment(1);
        let running = Running {
            generation,
            shard,
            epoch,
            mailbox: Some(sender),
            route: None,
        };
        let of_type = self.running.entry(entity_type.clone()).or_default();
        if let Some(old) = of_type.insert(entity.clone(), running) {
            tracing::error!(%entity_type, %entity, "started while running; stopping the old incarnation");
            // Same id, same shard, same driver, which counted the new one too.
            if let Some(driver) = self.drivers.get_mut(&(entity_type, shard)) {
                driver.entities -= 1;
                let _ = driver.events.send(DriverEvent::Stop(old.generation));
            }
        }
    }

    /// The driver of `shard`'s entities, spawned for its first, counting one more; what its
    /// entities share is made again for an allocation with another epoch or lease token.
    fn driver(
        &mut self,
        factory: Arc<dyn Factory>,
        entity_type: &EntityType,
        (shard, epoch, lease_token): (ShardId, Epoch, Option<FencingToken>),
    ) -> &mut Driver {
        let link = || {
            Arc::new(ShardLink {
                entity_type: entity_type.clone(),
                shard,
                epoch,
                lease_token,
                journal: self.journal.clone(),
                mailbox_capacity: self.mailbox_capacity,
                signals: self.signals.clone(),
                routes: Arc::clone(&self.routes),
            })
        };
        let driver = match self.drivers.entry((entity_type.clone(), shard)) {
            Entry::Occupied(occupied) => occupied.into_mut(),
            Entry::Vacant(vacant) => {
                let (events, events_rx) = mpsc::unbounded_channel();
                let (turns, turns_rx) = mpsc::unbounded_channel();
                let task = factory.spawn_driver(events_rx, turns_rx).abort_handle();
                vacant.insert(Driver {
                    events,
                    turns,
                    link: link(),
                    entities: 0,
                    task,
                })
            }
        };
        if (driver.link.epoch, driver.link.lease_token) != (epoch, lease_token) {
            driver.link = link();
        }
        driver.entities += 1;
        driver
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
            // Closing the mailbox lets the entity finish what is queued, then run its stop hook.
            StopReason::Passivation(_) | StopReason::HandOff => running.mailbox = None,
            StopReason::Forced => {
                let (shard, generation) = (running.shard, running.generation);
                if let Some(driver) = self.drivers.get(&(entity_type.clone(), shard)) {
                    let _ = driver.events.send(DriverEvent::Stop(generation));
                }
            }
        }
    }

    /// A step reported by the incarnation of `generation`: what the core must hear, if it is
    /// the running one (a replaced one's report is stale).
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
                let running = of_type.remove(&entity)?;
                if let Some(route) = running.route {
                    // It ended on its own (no stop closed the route).
                    route.close_all();
                }
                self.release_driver(&entity_type, running.shard);
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
        (self.gate).begin_letter(Sender::Local, route.entity_type(), route.entity());
        self.judging = Some(queued);
    }

    /// The host is about to feed the core a letter the reader of connection `link` brought.
    pub(crate) fn begin_link_letter(&mut self, link: u64, letter: &LinkLetter<'_>) {
        (self.gate).begin_letter(Sender::Link(link), letter.entity_type, letter.entity);
    }

    /// The core's call with the letter is done: its sender's route is opened or closed, then
    /// a handles' letter stops counting as queued (in that order, so no handle sends directly
    /// while the route's fate is open; a link's letter is counted by its reader's `Judging`,
    /// which the host drops after this).
    pub(crate) fn end_letter(&mut self) {
        if let Some(change) = self.gate.end_letter() {
            self.change_route(change);
        }
        // Dropping it lowers the count.
        self.judging = None;
    }

    fn change_route(&mut self, change: RouteChange) {
        match change {
            RouteChange::Open(sender, entity_type, entity) => {
                let routes = Arc::clone(&self.routes);
                let Some(running) = self.running_mut(&entity_type, &entity) else {
                    return;
                };
                let Some(mailbox) = &running.mailbox else {
                    return;
                };
                let route = running
                    .route
                    .get_or_insert_with(|| routes.route(&entity_type, &entity));
                route.open(sender, mailbox, running.shard);
            }
            RouteChange::Close(sender, entity_type, entity) => {
                let running = self.running_mut(&entity_type, &entity);
                if let Some(route) = running.and_then(|r| r.route.as_ref()) {
                    route.close(sender);
                }
            }
            RouteChange::CloseAll(entity_type, entity) => {
                let running = self.running_mut(&entity_type, &entity);
                if let Some(route) = running.and_then(|r| r.route.take()) {
                    route.close_all();
                }
            }
        }
    }

    /// One of `shard`'s entities ended: its driver goes with the last (it ends once it has
    /// dropped that entity's record).
    fn release_driver(&mut self, entity_type: &EntityType, shard: ShardId) {
        let key = (entity_type.clone(), shard);
        if let Some(driver) = self.drivers.get_mut(&key) {
            driver.entities = driver.entities.saturating_sub(1);
            if driver.entities == 0 {
                self.drivers.remove(&key);
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
        for driver in self.drivers.values() {
            driver.task.abort();
        }
    }
}
