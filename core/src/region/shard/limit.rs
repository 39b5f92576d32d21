//! The shard's share of its type's active-entity limit: every access of a running entity (a
//! message, a start) goes to the replacement policy, and the entities it names leave through
//! the ordinary passivation path, so their letters are buffered and redelivered, never lost.
//! Entities stopping do not count: they are already leaving. Accesses on the host's direct
//! route arrive in batches (`Input::Accessed`) and count the same.

use super::Shard;
use crate::effect::Effects;
use crate::id::EntityId;
use crate::passivation::ActiveEntities;
use crate::reason::PassivationCause;
use crate::time::Instant;

impl Shard {
    /// The region gave this shard `share` of the type's limit (it divides the limit among
    /// its shards whenever they come and go, or the limit changes): passivates what no
    /// longer fits. Nothing happens for a type without a limit.
    pub(crate) fn set_entity_limit(&mut self, now: Instant, share: usize, out: &mut Effects) {
        let Some(policy) = self.settings.limit_policy else {
            return;
        };
        let victims = match &mut self.active {
            Some(active) if active.limit() == share => return,
            Some(active) => active.set_limit(share),
            None => {
                // Entities started before the share arrived (none, as the region divides the
                // limit before it routes to a new shard) count from now.
                let mut active = ActiveEntities::new(policy, share);
                let running = self.entities.iter().filter(|(_, e)| e.stopping.is_none());
                let victims = running
                    .flat_map(|(id, _)| active.handle_access(id))
                    .collect();
                self.active = Some(active);
                victims
            }
        };
        if !victims.is_empty() {
            crate::probe::hit("shard: a smaller share of the limit passivates entities");
        }
        self.passivate_victims(now, victims, out);
    }

    /// The shard's share of the limit, if the type has one (queries, checks).
    pub(crate) fn entity_limit(&self) -> Option<usize> {
        self.active.as_ref().map(ActiveEntities::limit)
    }

    /// Running entities that are not stopping: those the limit counts.
    pub(crate) fn active_entity_count(&self) -> usize {
        let running = self.entities.values().filter(|e| e.stopping.is_none());
        running.count()
    }

    /// The host handed `id` messages on its direct route: it is active now, for the idle
    /// timeout and the policy alike. Nothing for an entity not running here or stopping (the
    /// report can trail the stop).
    pub(crate) fn handle_accessed(&mut self, now: Instant, id: &EntityId, out: &mut Effects) {
        match self.entities.get_mut(id) {
            Some(e) if e.stopping.is_none() => e.last_activity = now,
            _ => return,
        }
        self.note_access(now, id, out);
    }

    /// `id` was accessed while running, or is about to start: the policy learns of it and
    /// the entities it names to make room are passivated.
    pub(super) fn note_access(&mut self, now: Instant, id: &EntityId, out: &mut Effects) {
        let Some(active) = &mut self.active else {
            return;
        };
        let victims = active.handle_access(id);
        if !victims.is_empty() {
            crate::probe::hit("shard: an entity over the limit is passivated");
        }
        self.passivate_victims(now, victims, out);
    }

    /// `id` no longer counts: it began to stop, or stopped on its own.
    pub(super) fn leave_active(&mut self, id: &EntityId) {
        if let Some(active) = &mut self.active {
            active.handle_stopped(id);
        }
    }

    fn passivate_victims(&mut self, now: Instant, victims: Vec<EntityId>, out: &mut Effects) {
        for victim in victims {
            self.handle_passivate(now, &victim, PassivationCause::Limit, out);
        }
    }
}
