//! The scripted cluster's entity host: it runs entities by recording them (which runs where,
//! what each received), checks the drive contract (one incarnation per entity in the cluster,
//! no delivery to an entity that does not run), and lets a pluggable [`EntityBehaviour`] decide
//! how entities answer messages and stops.

use std::collections::BTreeMap;
use std::time::Duration;

use shoal_core::{
    EntityEffect, EntityId, EntityLedger, EntityType, Input, Instant, MemberId, NodeId, Payload,
    StopReason,
};

/// How a scripted entity answers being told to stop.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum StopAnswer {
    /// It terminates at once (its node is told once the messages due now are delivered).
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
    /// An entity's incarnation (numbered by its start) terminates (after a delay, or when the
    /// script completes stops).
    Terminate(EntityType, EntityId, u64),
}

/// The entities of every scripted node.
pub(crate) struct Host {
    behaviour: Box<dyn EntityBehaviour>,
    /// Running entities: (node, entity), with the number of their start (an incarnation: a
    /// stop asked of one never ends the next).
    alive: BTreeMap<(NodeId, EntityId), u64>,
    /// Every delivery: (node, entity, payload).
    deliveries: Vec<(NodeId, EntityId, Payload)>,
    /// Stops waiting for `complete_stops`.
    held_stops: Vec<(NodeId, EntityType, EntityId, u64)>,
    /// What is due, by (time, sequence).
    due: BTreeMap<(Instant, u64), (NodeId, Due)>,
    seq: u64,
    starts: u64,
    /// Each node's entities as its effects and this host's reports make them: the entity
    /// contract every effect is checked against.
    ledgers: BTreeMap<NodeId, EntityLedger>,
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
            alive: BTreeMap::new(),
            deliveries: Vec::new(),
            held_stops: Vec::new(),
            due: BTreeMap::new(),
            seq: 0,
            starts: 0,
            ledgers: BTreeMap::new(),
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
        if let EntityEffect::Start { entity, .. } = &effect {
            // One activation in the cluster, before the node's own contract.
            if let Some((elsewhere, _)) = self.alive.keys().find(|(m, e)| e == entity && *m != n) {
                return Err(format!(
                    "{entity} started on n{} while alive on n{}",
                    n.0, elsewhere.0
                ));
            }
        }
        let ledger = self.ledgers.entry(n).or_default();
        ledger
            .effect(&effect)
            .map_err(|breach| format!("n{}: {breach}", n.0))?;
        match effect {
            EntityEffect::Start { entity, shard, .. } => {
                self.starts += 1;
                self.alive.insert((n, entity.clone()), self.starts);
                Ok(vec![format!("{now} n{} start {entity} ({shard})", n.0)])
            }
            EntityEffect::Deliver {
                entity_type,
                entity,
                payload,
            } => {
                if !self.alive.contains_key(&(n, entity.clone())) {
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
                // A stop of an entity that does not run (stopped already) changes nothing.
                let Some(&life) = self.alive.get(&(n, entity.clone())) else {
                    return Ok(lines);
                };
                match self.behaviour.on_stop(n, &entity, reason) {
                    StopAnswer::Now => {
                        lines.extend(self.terminate(now, n, entity_type, entity, life));
                    }
                    StopAnswer::After(delay) => {
                        let due = Due::Terminate(entity_type, entity, life);
                        self.schedule(now + delay, n, due);
                    }
                    StopAnswer::WhenCompleted => {
                        self.held_stops.push((n, entity_type, entity, life));
                    }
                    StopAnswer::Ignore => {}
                }
                Ok(lines)
            }
        }
    }

    /// Incarnation `life` of `entity` on `n` terminates at `now`: its node is told (after the
    /// messages due now). An incarnation terminates once (a graceful stop followed by a forced
    /// one still ends one), a later incarnation is not ended by a stop asked of an earlier
    /// one, and nothing terminates on a crashed node: then `None`, else the trace line.
    pub(crate) fn terminate(
        &mut self,
        now: Instant,
        n: NodeId,
        entity_type: EntityType,
        entity: EntityId,
        life: u64,
    ) -> Option<String> {
        let key = (n, entity.clone());
        if self.alive.get(&key) != Some(&life) {
            return None;
        }
        self.alive.remove(&key);
        let line = format!("{now} n{} entity {} stopped", n.0, entity);
        let stopped = Input::EntityStopped {
            entity_type,
            entity,
        };
        self.schedule(now, n, Due::Input(stopped));
        Some(line)
    }

    /// The running incarnation of `entity` on `n` fails at `now`: it terminates without a stop
    /// asked; its node is told. `None` if it does not run there, else the trace line.
    pub(crate) fn fail(
        &mut self,
        now: Instant,
        n: NodeId,
        entity_type: EntityType,
        entity: &str,
    ) -> Option<String> {
        let entity = EntityId::new(entity);
        let life = *self.alive.get(&(n, entity.clone()))?;
        self.terminate(now, n, entity_type, entity, life)
            .map(|line| format!("{line} (failed)"))
    }

    fn schedule(&mut self, at: Instant, n: NodeId, due: Due) {
        self.seq += 1;
        self.due.insert((at, self.seq), (n, due));
    }

    /// Every held stop terminates at `now`; returns the trace lines.
    pub(crate) fn complete_stops(&mut self, now: Instant) -> Vec<String> {
        std::mem::take(&mut self.held_stops)
            .into_iter()
            .filter_map(|(n, ty, entity, life)| self.terminate(now, n, ty, entity, life))
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
        // What its entities were about to do or say dies with them too: a node started again
        // at the address must not hear it.
        self.alive.retain(|(node, _), _| *node != n);
        self.ledgers.remove(&n);
        self.due.retain(|_, (node, _)| *node != n);
        self.held_stops.retain(|(node, ..)| *node != n);
    }

    /// Node `n` is about to hear `input`: a report that an entity stopped ends its life in
    /// the node's ledger. A report the ledger does not expect (a test feeding its own) is the
    /// core's to ignore, not a breach of the node's.
    pub(crate) fn feeding(&mut self, n: NodeId, input: &Input) {
        if let Input::EntityStopped {
            entity_type,
            entity,
        } = input
        {
            let _ = (self.ledgers.entry(n).or_default()).stopped(entity_type, entity);
        }
    }

    /// The running entities: (node, entity).
    pub(crate) fn alive(&self) -> impl Iterator<Item = &(NodeId, EntityId)> + '_ {
        self.alive.keys()
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

#[cfg(test)]
mod tests {
    use shoal_core::{PassivationCause, ShardId};

    use super::*;

    /// Every stop takes 3 s.
    struct Slow;

    impl EntityBehaviour for Slow {
        fn on_stop(&mut self, _: NodeId, _: &EntityId, _: StopReason) -> StopAnswer {
            StopAnswer::After(Duration::from_secs(3))
        }
    }

    fn start(entity: &EntityId) -> EntityEffect {
        EntityEffect::Start {
            entity_type: EntityType::new("counter"),
            entity: entity.clone(),
            shard: ShardId(0),
            epoch: shoal_core::Epoch(0),
            lease_token: None,
        }
    }

    fn stop(entity: &EntityId, reason: StopReason) -> EntityEffect {
        EntityEffect::Stop {
            entity_type: EntityType::new("counter"),
            entity: entity.clone(),
            reason,
        }
    }

    fn at(secs: u64) -> Instant {
        Instant::ZERO + Duration::from_secs(secs)
    }

    /// Carries out what is due by `until`, as the cluster does: terminations end their
    /// incarnation; inputs reach the node's ledger, not a node (there is none here).
    fn run_due(host: &mut Host, until: Instant) {
        while host.next_due().is_some_and(|t| t <= until) {
            let (t, n, due) = host.pop_due().expect("due");
            match due {
                Due::Terminate(ty, entity, life) => {
                    host.terminate(t, n, ty, entity, life);
                }
                Due::Input(input) => host.feeding(n, &input),
            }
        }
    }

    #[test]
    fn a_stop_of_an_earlier_incarnation_never_ends_a_later_one() {
        let (n, e) = (NodeId(1), EntityId::new("e1"));
        let mut host = Host::new();
        host.set_behaviour(Box::new(Slow));
        host.run(at(0), n, start(&e)).expect("starts");
        // A graceful stop, then a forced one a second later: both end incarnation 1.
        host.run(
            at(0),
            n,
            stop(&e, StopReason::Passivation(PassivationCause::Requested)),
        )
        .expect("stops");
        host.run(at(1), n, stop(&e, StopReason::Forced))
            .expect("stops");
        run_due(&mut host, at(3));
        assert_eq!(host.alive().count(), 0, "incarnation 1 ended at 3 s");
        // The node starts the entity again at once (messages raced the stop).
        host.run(at(3), n, start(&e)).expect("starts again");
        run_due(&mut host, at(10));
        assert_eq!(
            host.alive().collect::<Vec<_>>(),
            [&(n, e)],
            "the forced stop of incarnation 1 does not end incarnation 2"
        );
    }

    #[test]
    fn a_crash_takes_what_its_entities_were_about_to_say() {
        let (n, e) = (NodeId(2), EntityId::new("e7"));
        let mut host = Host::new();
        host.set_behaviour(Box::new(StopPolicy::Manual));
        host.run(at(0), n, start(&e)).expect("starts");
        host.run(
            at(0),
            n,
            stop(&e, StopReason::Passivation(PassivationCause::Requested)),
        )
        .expect("stops");
        host.set_behaviour(Box::new(Slow));
        host.run(at(0), NodeId(3), start(&e))
            .expect_err("already runs on n2");
        host.crashed(n);
        assert!(
            host.complete_stops(at(1)).is_empty(),
            "the held stop died with n2"
        );
        assert_eq!(host.next_due(), None);
        host.run(at(1), NodeId(3), start(&e))
            .expect("runs nowhere else now");
    }
}
