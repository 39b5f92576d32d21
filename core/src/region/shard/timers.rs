//! A shard's timers: forced stops of entities that ignored their stop, idle passivation, and
//! the remember store's retries.

use std::time::Duration;

use super::{Shard, stop};
use crate::effect::Effects;
use crate::id::EntityId;
use crate::reason::{PassivationCause, StopReason};
use crate::region::BufferBudget;
use crate::time::{Instant, earliest};

impl Shard {
    /// Fires forced stops, idle passivation, and the store's retries and recovery steps that
    /// are due.
    pub(crate) fn handle_timeout(
        &mut self,
        now: Instant,
        budget: &mut BufferBudget,
        out: &mut Effects,
    ) {
        self.handle_lease_timeout(now, budget, out);
        self.handle_remember_timeout(now, budget, out);
        while let Some((at, id)) = self.deadlines.first().cloned().filter(|(at, _)| *at <= now) {
            self.deadlines.remove(&(at, id.clone()));
            if let Some(stopping) = self.entities.get_mut(&id).and_then(|e| e.stopping.as_mut()) {
                stopping.forced = true;
                out.entity(stop(&self.entity_type, &id, StopReason::Forced));
            }
        }
        let (Some(check_at), Some(idle)) = (self.next_idle_check, self.settings.idle_after) else {
            return;
        };
        if check_at > now {
            return;
        }
        self.next_idle_check = Some(now + idle_check_interval(idle));
        if self.handing_off {
            return;
        }
        let idle_ids: Vec<EntityId> = self
            .entities
            .iter()
            .filter(|(_, e)| {
                e.stopping.is_none() && now.saturating_duration_since(e.last_activity) >= idle
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in idle_ids {
            self.handle_passivate(now, &id, PassivationCause::Idle, out);
        }
    }

    /// When [`Shard::handle_timeout`] should run next.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let force = self.deadlines.first().map(|(at, _)| *at);
        let idle = self
            .next_idle_check
            .filter(|_| !self.entities.is_empty() && !self.handing_off);
        let stores = earliest(self.remember_timeout(), self.lease_timeout());
        earliest(earliest(force, idle), stores)
    }
}

/// Akka checks idleness every `timeout / 2`.
pub(super) fn idle_check_interval(idle: Duration) -> Duration {
    (idle / 2).max(Duration::from_millis(1))
}
