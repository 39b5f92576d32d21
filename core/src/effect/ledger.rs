//! The rules a host keeps with its entities, written once as a checker every host can run:
//! the simulator and the scripted cluster on every effect, the fuzz target as assertions, the
//! tokio runtime in debug builds.
//!
//! Seen from the node: an entity lives from its `Start` until the host reports
//! `Input::EntityStopped`; it is *stopping* once the node asked it to stop. The node
//! - starts an entity only when no earlier incarnation lives (one start per incarnation);
//! - delivers only to a living entity it has not asked to stop (no `Deliver` after `Stop`);
//! - stops only a living entity (a forced stop may follow a graceful one).
//!
//! The host reports each started incarnation stopped once.

use std::collections::BTreeMap;

use thiserror::Error;

use super::EntityEffect;
use crate::id::{EntityId, EntityType};

/// Where one entity is in its life, as far as its node knows.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
enum Life {
    Running,
    Stopping,
}

/// A broken rule of the entity contract.
#[derive(Clone, Debug, Eq, Error, PartialEq)]
pub enum ContractBreach {
    /// `Start` while an earlier incarnation lives.
    #[error("{entity} ({entity_type}) started while an earlier incarnation lives")]
    StartedWhileAlive {
        /// The entity's type.
        entity_type: EntityType,
        /// The entity.
        entity: EntityId,
    },
    /// `Deliver` to an entity that does not live.
    #[error("delivered to {entity} ({entity_type}), which does not run")]
    DeliveredToAbsent {
        /// The entity's type.
        entity_type: EntityType,
        /// The entity.
        entity: EntityId,
    },
    /// `Deliver` to an entity the node asked to stop.
    #[error("delivered to {entity} ({entity_type}) after stopping it")]
    DeliveredAfterStop {
        /// The entity's type.
        entity_type: EntityType,
        /// The entity.
        entity: EntityId,
    },
    /// `Stop` of an entity that does not live.
    #[error("stopped {entity} ({entity_type}), which does not run")]
    StoppedAbsent {
        /// The entity's type.
        entity_type: EntityType,
        /// The entity.
        entity: EntityId,
    },
    /// The host reported an entity stopped that does not live (a host's breach).
    #[error("reported {entity} ({entity_type}) stopped, which does not run")]
    ReportedAbsent {
        /// The entity's type.
        entity_type: EntityType,
        /// The entity.
        entity: EntityId,
    },
}

/// One node's entities as its effects and its host's reports make them: check every
/// [`EntityEffect`] with [`EntityLedger::effect`] as it is carried out, and every
/// `Input::EntityStopped` with [`EntityLedger::stopped`] as it is fed to the node.
#[derive(Clone, Debug, Default)]
pub struct EntityLedger {
    /// By type, then entity: looked up by reference on every effect, without cloning ids.
    lives: BTreeMap<EntityType, BTreeMap<EntityId, Life>>,
}

impl EntityLedger {
    /// Checks one entity effect of the node and records it.
    pub fn effect(&mut self, effect: &EntityEffect) -> Result<(), ContractBreach> {
        match effect {
            EntityEffect::Start {
                entity_type,
                entity,
                ..
            } => {
                if self.life(entity_type, entity).is_some() {
                    return Err(ContractBreach::StartedWhileAlive {
                        entity_type: entity_type.clone(),
                        entity: entity.clone(),
                    });
                }
                (self.lives.entry(entity_type.clone()).or_default())
                    .insert(entity.clone(), Life::Running);
            }
            EntityEffect::Deliver {
                entity_type,
                entity,
                ..
            } => match self.life(entity_type, entity) {
                Some(Life::Running) => {}
                Some(Life::Stopping) => {
                    return Err(ContractBreach::DeliveredAfterStop {
                        entity_type: entity_type.clone(),
                        entity: entity.clone(),
                    });
                }
                None => {
                    return Err(ContractBreach::DeliveredToAbsent {
                        entity_type: entity_type.clone(),
                        entity: entity.clone(),
                    });
                }
            },
            EntityEffect::Stop {
                entity_type,
                entity,
                ..
            } => match (self.lives.get_mut(entity_type)).and_then(|of| of.get_mut(entity)) {
                Some(life) => *life = Life::Stopping,
                None => {
                    return Err(ContractBreach::StoppedAbsent {
                        entity_type: entity_type.clone(),
                        entity: entity.clone(),
                    });
                }
            },
        }
        Ok(())
    }

    /// Records the host's report that the entity terminated (`Input::EntityStopped`).
    pub fn stopped(
        &mut self,
        entity_type: &EntityType,
        entity: &EntityId,
    ) -> Result<(), ContractBreach> {
        match (self.lives.get_mut(entity_type)).and_then(|of| of.remove(entity)) {
            Some(_) => Ok(()),
            None => Err(ContractBreach::ReportedAbsent {
                entity_type: entity_type.clone(),
                entity: entity.clone(),
            }),
        }
    }

    /// Whether the entity lives and has not been asked to stop.
    pub fn is_running(&self, entity_type: &EntityType, entity: &EntityId) -> bool {
        self.life(entity_type, entity) == Some(Life::Running)
    }

    /// Whether the entity lives (running or stopping).
    pub fn is_alive(&self, entity_type: &EntityType, entity: &EntityId) -> bool {
        self.life(entity_type, entity).is_some()
    }

    /// How many entities of `entity_type` run and were not asked to stop: those an
    /// active-entity limit bounds.
    pub fn running(&self, entity_type: &EntityType) -> usize {
        let lives = self
            .lives
            .get(entity_type)
            .into_iter()
            .flat_map(|t| t.values());
        lives.filter(|life| **life == Life::Running).count()
    }

    fn life(&self, entity_type: &EntityType, entity: &EntityId) -> Option<Life> {
        self.lives.get(entity_type)?.get(entity).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::ShardId;
    use crate::message::Payload;
    use crate::reason::StopReason;

    fn ty() -> EntityType {
        EntityType::new("counter")
    }

    fn start(id: &str) -> EntityEffect {
        EntityEffect::Start {
            entity_type: ty(),
            entity: EntityId::new(id),
            shard: ShardId(0),
            epoch: crate::id::Epoch(0),
            lease_token: None,
        }
    }

    fn deliver(id: &str) -> EntityEffect {
        EntityEffect::Deliver {
            entity_type: ty(),
            entity: EntityId::new(id),
            payload: Payload(vec![1]),
        }
    }

    fn stop(id: &str, reason: StopReason) -> EntityEffect {
        EntityEffect::Stop {
            entity_type: ty(),
            entity: EntityId::new(id),
            reason,
        }
    }

    #[test]
    fn a_life_starts_receives_stops_and_is_reported_once() {
        let mut ledger = EntityLedger::default();
        let a = EntityId::new("a");
        assert_eq!(ledger.effect(&start("a")), Ok(()));
        assert_eq!(ledger.effect(&deliver("a")), Ok(()));
        assert!(ledger.is_running(&ty(), &a));
        assert_eq!(
            ledger.effect(&stop(
                "a",
                StopReason::Passivation(crate::reason::PassivationCause::Idle)
            )),
            Ok(())
        );
        assert!(!ledger.is_running(&ty(), &a) && ledger.is_alive(&ty(), &a));
        assert_eq!(
            ledger.effect(&stop("a", StopReason::Forced)),
            Ok(()),
            "forced after graceful"
        );
        assert_eq!(ledger.stopped(&ty(), &a), Ok(()));
        assert!(!ledger.is_alive(&ty(), &a));
        assert_eq!(
            ledger.effect(&start("a")),
            Ok(()),
            "a new incarnation once reported"
        );
    }

    #[test]
    fn each_rule_names_its_breach() {
        let mut ledger = EntityLedger::default();
        let breach = |e: &str| (ty(), EntityId::new(e));
        assert_eq!(
            ledger.effect(&deliver("a")),
            Err(ContractBreach::DeliveredToAbsent {
                entity_type: breach("a").0,
                entity: breach("a").1
            })
        );
        assert_eq!(
            ledger.effect(&stop("a", StopReason::HandOff)),
            Err(ContractBreach::StoppedAbsent {
                entity_type: breach("a").0,
                entity: breach("a").1
            })
        );
        ledger.effect(&start("a")).unwrap();
        assert_eq!(
            ledger.effect(&start("a")),
            Err(ContractBreach::StartedWhileAlive {
                entity_type: breach("a").0,
                entity: breach("a").1
            })
        );
        ledger.effect(&stop("a", StopReason::HandOff)).unwrap();
        assert_eq!(
            ledger.effect(&deliver("a")),
            Err(ContractBreach::DeliveredAfterStop {
                entity_type: breach("a").0,
                entity: breach("a").1
            })
        );
        assert_eq!(
            ledger.effect(&start("a")),
            Err(ContractBreach::StartedWhileAlive {
                entity_type: breach("a").0,
                entity: breach("a").1
            }),
            "no new incarnation before the old one is reported stopped"
        );
        assert_eq!(
            ledger.stopped(&ty(), &EntityId::new("b")),
            Err(ContractBreach::ReportedAbsent {
                entity_type: breach("b").0,
                entity: breach("b").1
            })
        );
    }
}
