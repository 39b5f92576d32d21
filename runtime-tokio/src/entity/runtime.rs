//! The host's side of its entities: which incarnation of each runs, its mailbox and how to
//! abort it. Executes the core's entity effects without ever blocking: a full mailbox is
//! reported back to the core (`Input::MailboxFull`), which makes it a dead letter.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;

use shoal_core::lease::FencingToken;
use shoal_core::{EntityEffect, EntityId, EntityType, Epoch, Input, Payload, ShardId, StopReason};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tokio::task::AbortHandle;

use super::{EntityLink, EntitySignal, Factory, Lifecycle};
use crate::metric_names;
use crate::store::Journal;

/// One running incarnation.
struct Running {
    generation: u64,
    /// The epoch its start carried.
    epoch: Epoch,
    /// `None` once a graceful stop closed it.
    mailbox: Option<mpsc::Sender<Payload>>,
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
    /// The node's state store, handed to every entity (persistent types write through it).
    journal: Option<Journal>,
    /// Debug builds check the core's effects and this host's reports against the entity
    /// contract, as the simulator does on every run.
    #[cfg(debug_assertions)]
    ledger: shoal_core::EntityLedger,
}

impl EntityRuntime {
    /// Runs entities made by `factories`, each with a mailbox of `mailbox_capacity`, writing
    /// state through `journal`; their tasks report on `signals`.
    pub(crate) fn new(
        factories: HashMap<EntityType, Arc<dyn Factory>>,
        mailbox_capacity: usize,
        journal: Option<Journal>,
        signals: mpsc::UnboundedSender<EntitySignal>,
    ) -> Self {
        Self {
            factories,
            mailbox_capacity,
            running: HashMap::new(),
            next_generation: 0,
            signals,
            journal,
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
        let (sender, mailbox) = mpsc::channel(self.mailbox_capacity);
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
            Some(mailbox) => match mailbox.try_send(payload) {
                Ok(()) => return,
                Err(TrySendError::Full(payload) | TrySendError::Closed(payload)) => payload,
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
                of_type.remove(&entity);
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
