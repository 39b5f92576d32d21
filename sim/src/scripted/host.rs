//! The scripted cluster's entity host: it runs entities by recording them (which runs where,
//! what each received), checks the drive contract (one incarnation per entity in the cluster,
//! no delivery to an entity that does not run), and lets a pluggable [`EntityBehaviour`] decide
//! how entities answer messages and stops.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use shoal_core::{
    EntityEffect, EntityId, EntityType, Input, Instant, MemberId, NodeId, Payload, StopReason,
};

/// How a scripted entity answers being told to stop.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum StopAnswer {
    /// It terminates at once (reported to its node right after the call).
    Now,
    /// It terminates after this long.
    After(Duration),
    /// It terminates when the script calls [`Cluster::complete_stops`](super::Cluster::complete_stops).
    WhenCompleted,
    /// It ignores the stop and runs on.
    Ignore,
}

/// Something a scripted entity does in reaction to a message.
#[derive(Clone, Debug, Eq, PartialEq)]
pub enum Reaction {
    /// Sends an application message to a member (as an entity answering an ask does).
    Send {
        /// The member it goes to.
        to: MemberId,
        /// What it says.
        payload: Payload,
    },
    /// Tells another entity of the same type, through its own node.
    Tell {
        /// The entity told.
        entity: EntityId,
        /// What it says.
        payload: Payload,
    },
    /// Asks its node to passivate it.
    Passivate,
}

/// How scripted entities behave. Every method has a default: entities that do nothing and stop
/// at once.
pub trait EntityBehaviour {
    /// `entity` received `payload` on `node`; what it does in reaction.
    fn on_message(&mut self, node: NodeId, entity: &EntityId, payload: &Payload) -> Vec<Reaction> {
        let _ = (node, entity, payload);
        Vec::new()
    }

    /// `entity` on `node` is told to stop for `reason`; how it answers.
    fn on_stop(&mut self, node: NodeId, entity: &EntityId, reason: StopReason) -> StopAnswer {
        let _ = (node, entity, reason);
        StopAnswer::Now
    }
}

/// Ready-made behaviours for stops: entities that do nothing else.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum StopPolicy {
    /// Terminate at once.
    Immediate,
    /// Terminate when the script calls [`Cluster::complete_stops`](super::Cluster::complete_stops).
    Manual,
    /// Ignore graceful stops; obey only forced ones.
    IgnoreGraceful,
}

impl EntityBehaviour for StopPolicy {
    fn on_stop(&mut self, _: NodeId, _: &EntityId, reason: StopReason) -> StopAnswer {
        match (self, reason) {
            (Self::Immediate, _) | (Self::IgnoreGraceful, StopReason::Forced) => StopAnswer::Now,
            (Self::IgnoreGraceful, _) => StopAnswer::Ignore,
            (Self::Manual, _) => StopAnswer::WhenCompleted,
        }
    }
}

/// Something the host does later, on a node.
#[derive(Debug)]
pub(crate) enum Due {
    /// Tell the node (after the messages due at the same time).
    Input(Input),
    /// An entity terminates (after a delay, or when the script completes stops).
    Terminate(EntityType, EntityId),
}

/// The entities of every scripted node.
pub(crate) struct Host {
    behaviour: Box<dyn EntityBehaviour>,
    /// Running entities: (node, entity).
    alive: BTreeSet<(NodeId, EntityId)>,
    /// Every delivery: (node, entity, payload).
    deliveries: Vec<(NodeId, EntityId, Payload)>,
    /// Stops waiting for `complete_stops`.
    held_stops: Vec<(NodeId, EntityType, EntityId)>,
    /// What is due, by (time, sequence).
    due: BTreeMap<(Instant, u64), (NodeId, Due)>,
    seq: u64,
    starts: u64,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("alive", &self.alive)
            .field("deliveries", &self.deliveries.len())
            .field("due", &self.due.len())
            .finish_non_exhaustive()
    }
}

impl Host {
    /// A host whose entities stop at once and do nothing else.
    pub(crate) fn new() -> Self {
        Self {
            behaviour: Box::new(StopPolicy::Immediate),
            alive: BTreeSet::new(),
            deliveries: Vec::new(),
            held_stops: Vec::new(),
            due: BTreeMap::new(),
            seq: 0,
            starts: 0,
        }
    }

    /// Entities behave as `behaviour` says from now on.
    pub(crate) fn set_behaviour(&mut self, behaviour: Box<dyn EntityBehaviour>) {
        self.behaviour = behaviour;
    }

    /// Carries out `effect` of `node` at `now`; returns its trace lines, or the broken drive
    /// contract.
    pub(crate) fn run(
        &mut self,
        now: Instant,
        n: NodeId,
        effect: EntityEffect,
    ) -> Result<Vec<String>, String> {
        match effect {
            EntityEffect::Start { entity, shard, .. } => {
                if let Some((elsewhere, _)) =
                    self.alive.iter().find(|(m, e)| *e == entity && *m != n)
                {
                    return Err(format!(
                        "{entity} started on n{} while alive on n{}",
                        n.0, elsewhere.0
                    ));
                }
                if !self.alive.insert((n, entity.clone())) {
                    return Err(format!("{entity} started twice on n{}", n.0));
                }
                self.starts += 1;
                Ok(vec![format!("{now} n{} start {entity} ({shard})", n.0)])
            }
            EntityEffect::Deliver {
                entity_type,
                entity,
                payload,
            } => {
                if !self.alive.contains(&(n, entity.clone())) {
                    return Err(format!(
                        "delivery to {entity}, which does not run on n{}",
                        n.0
                    ));
                }
                let text = String::from_utf8_lossy(&payload.0).into_owned();
                for reaction in self.behaviour.on_message(n, &entity, &payload) {
                    let input = match reaction {
                        Reaction::Send { to, payload } => Input::SendApp { to, payload },
                        Reaction::Tell { entity, payload } => Input::Tell {
                            entity_type: entity_type.clone(),
                            entity,
                            payload,
                        },
                        Reaction::Passivate => Input::Passivate {
                            entity_type: entity_type.clone(),
                            entity: entity.clone(),
                        },
                    };
                    self.schedule(now, n, Due::Input(input));
                }
                self.deliveries.push((n, entity.clone(), payload));
                Ok(vec![format!("{now} n{} deliver {entity} {text:?}", n.0)])
            }
            EntityEffect::Stop {
                entity_type,
                entity,
                reason,
            } => {
                let mut lines = vec![format!("{now} n{} stop {entity} {reason:?}", n.0)];
                match self.behaviour.on_stop(n, &entity, reason) {
                    StopAnswer::Now => lines.extend(self.terminate(now, n, entity_type, entity)),
                    StopAnswer::After(delay) => {
                        self.schedule(now + delay, n, Due::Terminate(entity_type, entity));
                    }
                    StopAnswer::WhenCompleted => self.held_stops.push((n, entity_type, entity)),
                    StopAnswer::Ignore => {}
                }
                Ok(lines)
            }
        }
    }

    /// `entity` on `n` terminates at `now`: its node is told (after the messages due now).
    /// An incarnation terminates once (a graceful stop followed by a forced one still ends
    /// one), and not at all if its node crashed: then `None`, else the trace line.
    pub(crate) fn terminate(
        &mut self,
        now: Instant,
        n: NodeId,
        entity_type: EntityType,
        entity: EntityId,
    ) -> Option<String> {
        if !self.alive.remove(&(n, entity.clone())) {
            return None;
        }
        let line = format!("{now} n{} entity {} stopped", n.0, entity);
        let stopped = Input::EntityStopped {
            entity_type,
            entity,
        };
        self.schedule(now, n, Due::Input(stopped));
        Some(line)
    }

    fn schedule(&mut self, at: Instant, n: NodeId, due: Due) {
        self.seq += 1;
        self.due.insert((at, self.seq), (n, due));
    }

    /// Every held stop terminates at `now`; returns the trace lines.
    pub(crate) fn complete_stops(&mut self, now: Instant) -> Vec<String> {
        std::mem::take(&mut self.held_stops)
            .into_iter()
            .filter_map(|(n, entity_type, entity)| self.terminate(now, n, entity_type, entity))
            .collect()
    }

    /// When the next thing is due.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.due.keys().next().map(|(at, _)| *at)
    }

    /// Takes the next thing due: when, on which node, and what.
    pub(crate) fn pop_due(&mut self) -> Option<(Instant, NodeId, Due)> {
        let ((at, _), (n, due)) = self.due.pop_first()?;
        Some((at, n, due))
    }

    /// Node `n` crashed: its entities are gone.
    pub(crate) fn crashed(&mut self, n: NodeId) {
        self.alive.retain(|(node, _)| *node != n);
    }

    /// The running entities: (node, entity).
    pub(crate) fn alive(&self) -> &BTreeSet<(NodeId, EntityId)> {
        &self.alive
    }

    /// How many entity incarnations started so far.
    pub(crate) fn starts(&self) -> u64 {
        self.starts
    }

    /// Every delivery so far: (node, entity, payload).
    pub(crate) fn deliveries(&self) -> &[(NodeId, EntityId, Payload)] {
        &self.deliveries
    }
}
