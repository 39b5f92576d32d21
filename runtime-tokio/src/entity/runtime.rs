//! The host's side of its entities: which incarnation of each runs, its mailbox and how to
//! abort it. Executes the core's entity effects without ever blocking: a full mailbox is
//! reported back to the core (`Input::MailboxFull`), which makes it a dead letter.

use std::collections::HashMap;
use std::sync::Arc;

use shoal_core::{EntityEffect, EntityId, EntityType, Input, Payload, StopReason};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tokio::task::AbortHandle;

use super::{EntityLink, EntitySignal, Factory};

/// One running incarnation.
struct Running {
    generation: u64,
    /// `None` once a graceful stop closed it.
    mailbox: Option<mpsc::Sender<Payload>>,
    task: AbortHandle,
}

/// The entities this node runs.
pub(crate) struct EntityRuntime {
    factories: HashMap<EntityType, Arc<dyn Factory>>,
    mailbox_capacity: usize,
    running: HashMap<(EntityType, EntityId), Running>,
    next_generation: u64,
    signals: mpsc::UnboundedSender<EntitySignal>,
}

impl EntityRuntime {
    /// Runs entities made by `factories`, each with a mailbox of `mailbox_capacity`; their
    /// tasks report on `signals`.
    pub(crate) fn new(
        factories: HashMap<EntityType, Arc<dyn Factory>>,
        mailbox_capacity: usize,
        signals: mpsc::UnboundedSender<EntitySignal>,
    ) -> Self {
        Self {
            factories,
            mailbox_capacity,
            running: HashMap::new(),
            next_generation: 0,
            signals,
        }
    }

    /// How many entity tasks run.
    pub(crate) fn len(&self) -> usize {
        self.running.len()
    }

    /// Executes one of the core's entity effects; what the core must hear back (a full
    /// mailbox) goes to `feedback`.
    pub(crate) fn handle_effect(&mut self, effect: EntityEffect, feedback: &mut Vec<Input>) {
        match effect {
            EntityEffect::Start {
                entity_type,
                entity,
                ..
            } => self.start(entity_type, entity, feedback),
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

    fn start(&mut self, entity_type: EntityType, entity: EntityId, feedback: &mut Vec<Input>) {
        let Some(factory) = self.factories.get(&entity_type) else {
            // The core starts only types it hosts, and every hosted type has a factory.
            tracing::error!(%entity_type, %entity, "start of an entity type without a factory");
            feedback.push(Input::EntityStopped {
                entity_type,
                entity,
            });
            return;
        };
        let key = (entity_type, entity);
        if let Some(old) = self.running.remove(&key) {
            tracing::error!(entity_type = %key.0, entity = %key.1, "started while running; aborting the old task");
            old.task.abort();
        }
        self.next_generation += 1;
        let (sender, mailbox) = mpsc::channel(self.mailbox_capacity);
        let link = EntityLink {
            entity_type: key.0.clone(),
            entity: key.1.clone(),
            generation: self.next_generation,
            signals: self.signals.clone(),
        };
        let task = factory.spawn(mailbox, link).abort_handle();
        metrics::counter!("shoal_entities_started_total").increment(1);
        self.running.insert(
            key,
            Running {
                generation: self.next_generation,
                mailbox: Some(sender),
                task,
            },
        );
    }

    fn deliver(
        &mut self,
        entity_type: EntityType,
        entity: EntityId,
        payload: Payload,
        feedback: &mut Vec<Input>,
    ) {
        let mailbox = self
            .running
            .get(&(entity_type.clone(), entity.clone()))
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
        metrics::counter!("shoal_mailbox_full_total").increment(1);
        feedback.push(Input::MailboxFull {
            entity_type,
            entity,
            payload,
        });
    }

    fn stop(&mut self, entity_type: &EntityType, entity: &EntityId, reason: StopReason) {
        let Some(running) = self.running.get_mut(&(entity_type.clone(), entity.clone())) else {
            return;
        };
        match reason {
            // Closing the mailbox lets the task finish what is queued, then run its stop hook.
            StopReason::Passivation | StopReason::HandOff => running.mailbox = None,
            StopReason::Forced => running.task.abort(),
        }
    }

    /// The task of `generation` ended: the core hears `EntityStopped` if it was the running
    /// incarnation (a replaced one's report is stale).
    pub(crate) fn handle_stopped(
        &mut self,
        entity_type: EntityType,
        entity: EntityId,
        generation: u64,
    ) -> Option<Input> {
        let key = (entity_type, entity);
        if !self.is_current(&key, generation) {
            return None;
        }
        self.running.remove(&key);
        let (entity_type, entity) = key;
        Some(Input::EntityStopped {
            entity_type,
            entity,
        })
    }

    /// The entity of `generation` asked to passivate.
    pub(crate) fn handle_passivate(
        &mut self,
        entity_type: EntityType,
        entity: EntityId,
        generation: u64,
    ) -> Option<Input> {
        let key = (entity_type, entity);
        self.is_current(&key, generation).then(|| {
            let (entity_type, entity) = key;
            Input::Passivate {
                entity_type,
                entity,
            }
        })
    }

    fn is_current(&self, key: &(EntityType, EntityId), generation: u64) -> bool {
        self.running
            .get(key)
            .is_some_and(|running| running.generation == generation)
    }

    /// Aborts every entity (the node is stopping).
    pub(crate) fn abort_all(&mut self) {
        for running in self.running.values() {
            running.task.abort();
        }
    }
}
