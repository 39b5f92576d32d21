//! Passivation, as the checker sees it: which entities asked for it, and, in runs that passivate
//! idle entities, when each running entity was last active (started, handed a message, or asked to start while it ran), so that a node that
//! passivates an entity for idleness is judged on both sides: never before the entity was idle
//! for `passivate_idle_after`, and not much after (the shard looks every half of it, as Akka's
//! does).
//!
//! A node counts as activity what it hands its entities (starts and messages, which the
//! simulator carries out) and a `StartEntity` that finds its entity running (acknowledged in
//! the same call, which the simulator sees): the simulator's last activity is the node's.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use shoal_core::{EntityId, Instant, MemberId, PassivationCause};

/// How long a node's clock may run ahead of true time over one idle period, and more: an
/// idle passivation this much early is still on time.
const EARLY_TOLERANCE: Duration = Duration::from_secs(1);

/// Why a node passivated an entity, as far as the checker can tell.
#[derive(Debug, PartialEq)]
pub(crate) enum Passivated {
    /// The entity asked.
    Asked,
    /// As asked, though the entity did not ask.
    Unasked,
    /// It was idle long enough.
    Idle,
    /// For idleness, though it was active this long before.
    Early(Duration),
    /// For idleness, in a run that does not passivate idle entities (they are remembered).
    Unexpected,
}

/// Passivation asks, and when each running entity was last active in a run whose entities are
/// passivated when idle.
#[derive(Debug)]
pub(crate) struct Idleness {
    /// `passivate_idle_after`; none when the run does not passivate idle entities.
    after: Option<Duration>,
    last_active: BTreeMap<(MemberId, EntityId), Instant>,
    /// Entities that asked their node to passivate them and were not told to stop since. The
    /// ask names no incarnation: one that reaches a paused node after its entity stopped
    /// passivates the next incarnation, idle or not.
    asked: BTreeSet<(MemberId, EntityId)>,
}

impl Idleness {
    /// Entities passivated after `after` without activity, or never for idleness.
    pub(crate) fn new(after: Option<Duration>) -> Self {
        Self {
            after,
            last_active: BTreeMap::new(),
            asked: BTreeSet::new(),
        }
    }

    /// `entity` on `member` was active at `now`.
    pub(crate) fn active(&mut self, now: Instant, member: MemberId, entity: &EntityId) {
        if self.after.is_some() {
            self.last_active.insert((member, entity.clone()), now);
        }
    }

    /// `entity` on `member` was told to stop, or ended: idleness no longer concerns it.
    pub(crate) fn ended(&mut self, member: MemberId, entity: &EntityId) {
        self.last_active.remove(&(member, entity.clone()));
    }

    /// `member`'s process is gone, and its entities with it.
    pub(crate) fn process_gone(&mut self, member: MemberId) {
        self.last_active.retain(|(m, _), _| *m != member);
        self.asked.retain(|(m, _)| *m != member);
    }

    /// `entity` asked `member` to passivate it.
    pub(crate) fn asked_to_passivate(&mut self, member: MemberId, entity: &EntityId) {
        self.asked.insert((member, entity.clone()));
    }

    /// `member` passivates `entity` at `now` for `cause`: on the entity's ask, or for
    /// idleness (on time, or too early, after how long).
    pub(crate) fn passivated(
        &mut self,
        now: Instant,
        member: MemberId,
        entity: &EntityId,
        cause: PassivationCause,
    ) -> Passivated {
        // An idle passivation leaves an ask alone: still on its way to the node, it may
        // passivate the next incarnation.
        if cause == PassivationCause::Requested {
            return if self.asked.remove(&(member, entity.clone())) {
                Passivated::Asked
            } else {
                Passivated::Unasked
            };
        }
        let Some(after) = self.after else {
            return Passivated::Unexpected;
        };
        let at = self.last_active.get(&(member, entity.clone()));
        match at.map(|at| now.saturating_duration_since(*at)) {
            Some(idle) if idle + EARLY_TOLERANCE < after => Passivated::Early(idle),
            _ => Passivated::Idle,
        }
    }

    /// The latest an entity idle since `since` must be passivated: after `after`, at the
    /// shard's next look (every half of it), with `grace` for paused processes.
    fn deadline(after: Duration, since: Instant, grace: Duration) -> Instant {
        since + after + after / 2 + grace
    }

    /// Entities still running and not told to stop at `now` whose passivation is overdue,
    /// with when they were last active.
    pub(crate) fn overdue(
        &self,
        now: Instant,
        grace: Duration,
    ) -> impl Iterator<Item = (&(MemberId, EntityId), Instant)> + '_ {
        // Empty in a run without idle passivation: nothing is recorded as active there.
        let after = self.after.unwrap_or_default();
        (self.last_active.iter())
            .filter(move |(_, at)| Self::deadline(after, **at, grace) < now)
            .map(|(key, at)| (key, *at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member() -> MemberId {
        MemberId::new(1, 1)
    }

    #[test]
    fn an_idle_passivation_is_judged_on_both_sides() {
        let mut idle = Idleness::new(Some(Duration::from_secs(60)));
        let e = EntityId::new("e1");
        idle.active(Instant::from_secs(10), member(), &e);
        idle.active(Instant::from_secs(20), member(), &e);
        idle.asked_to_passivate(member(), &e);
        let at = Instant::from_secs;
        assert_eq!(
            idle.passivated(at(21), member(), &e, PassivationCause::Requested),
            Passivated::Asked
        );
        let early = idle.passivated(at(70), member(), &e, PassivationCause::Idle);
        assert_eq!(
            early,
            Passivated::Early(Duration::from_secs(50)),
            "since the last activity"
        );
        assert_eq!(
            idle.passivated(at(80), member(), &e, PassivationCause::Idle),
            Passivated::Idle
        );
        let grace = Duration::from_secs(2);
        assert_eq!(idle.overdue(Instant::from_secs(112), grace).count(), 0);
        let overdue: Vec<_> = idle.overdue(Instant::from_secs(113), grace).collect();
        assert_eq!(
            overdue,
            vec![(&(member(), e.clone()), Instant::from_secs(20))]
        );
        idle.ended(member(), &e);
        assert_eq!(idle.overdue(Instant::from_secs(500), grace).count(), 0);
    }
}
