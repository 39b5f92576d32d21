//! A region that cannot reach its coordinator says so, as Akka's does ("Trying to register to
//! coordinator at [...], but no acknowledgement. Total [...] buffered messages."): while it
//! holds messages and its registrations, or its requests for shard homes, have gone unanswered
//! [`WARN_AFTER`] times, every retry interval it emits [`Event::CoordinatorUnanswered`] naming
//! the member it waits for. Without it an application whose views name a coordinator that does
//! not run the type (a host whose views do not say which types members run) sees only its
//! queries time out.

use crate::effect::{Effects, Event};
use crate::region::{Lifecycle, Region};

/// Unanswered attempts before a region warns (Akka warns from its fifth retry on).
pub(crate) const WARN_AFTER: u32 = 5;

impl Region {
    /// At a retry tick that asked the coordinator for `asked` shard homes: counts the rounds
    /// unanswered, and warns while messages wait on them.
    pub(super) fn watch_coordinator(&mut self, asked: u32, out: &mut Effects) {
        let reg = &mut self.registration;
        // Rounds with nobody to register with go unanswered too.
        let rounds = reg.registered || reg.coordinator.is_none();
        if (reg.registered && asked > 0) || reg.coordinator.is_none() {
            reg.home_rounds = reg.home_rounds.saturating_add(1);
        } else if reg.registered {
            reg.home_rounds = 0;
        }
        let attempts = if rounds {
            reg.home_rounds
        } else {
            reg.attempts
        };
        let buffered = self.budget.used();
        if attempts < WARN_AFTER || buffered == 0 || self.lifecycle == Lifecycle::Terminated {
            return;
        }
        let (coordinator, registered) = (reg.coordinator, reg.registered);
        let buffered = u32::try_from(buffered).unwrap_or(u32::MAX);
        tracing::warn!(
            entity_type = %self.entity_type,
            coordinator = ?coordinator,
            registered,
            attempts,
            buffered,
            "the coordinator does not answer: registrations (or shard-home requests, once \
             registered) unacknowledged; messages stay buffered"
        );
        out.event(Event::CoordinatorUnanswered {
            entity_type: self.entity_type.clone(),
            coordinator,
            registered,
            attempts,
            buffered,
        });
    }
}
