//! Whether a run in which no member survived had to end that way. Keep-majority keeps the side
//! holding a majority of the members and downs the rest; when no side holds one (a three-way
//! split, say), or the network changes too often to decide (Akka's down-all-when-unstable),
//! every member downs itself. Such a run makes no progress after healing, and the simulator
//! classifies it rather than failing it. That must not become a hiding place: no member may be
//! downed while a side holding a majority, which it belonged to, could reach itself on a *calm*
//! network (see [`Survival::calm`]); such a downing is a liveness violation, whether or not
//! others survive, so a run counts as "no surviving majority" only if it had to lose it.
//!
//! The truth is the simulator's: which processes run and are not paused, and which links are
//! blocked. The count of members is the downed member's view (all but Joining members, as the
//! core counts them).

use std::time::Duration;

use shoal_core::{Instant, MemberId};

use crate::bounds::STABLE_AFTER;

/// How far back a downing decision looks: a member that has seen someone unreachable for 7/4 of
/// `stable-after` without deciding downs itself as unstable, and failure detection takes a few
/// seconds more to notice a change.
pub(crate) const DECISION_WINDOW: Duration =
    Duration::from_millis(STABLE_AFTER.as_millis() as u64 * 7 / 4 + 6_000);

/// The connectivity history of a run, and the members operators downed.
#[derive(Debug, Default)]
pub(crate) struct Survival {
    /// Each change of connectivity (partitions, heals, crashes, restarts, joins, pauses, clogs
    /// and their ends, broken connections), in time order: when, and whether the cluster was whole
    /// after it (no partition, no process out or paused).
    changes: Vec<(Instant, bool)>,
    /// Members an operator downed.
    operator_downs: std::collections::BTreeSet<MemberId>,
}

impl Survival {
    /// Connectivity changed (or will, at a clog's end) at `at`; `whole`: nothing is
    /// partitioned, out, paused or clogged then.
    pub(crate) fn changed(&mut self, at: Instant, whole: bool) {
        let i = self.changes.partition_point(|(t, _)| *t <= at);
        self.changes.insert(i, (at, whole));
    }

    /// When connectivity last changed (or will, at a clog's end) at or before `now`.
    pub(crate) fn last_change(&self, now: Instant) -> Instant {
        let i = self.changes.partition_point(|(t, _)| *t <= now);
        i.checked_sub(1)
            .map_or(Instant::ZERO, |i| self.changes[i].0)
    }

    /// An operator downed `member` (`Command::Down`): whatever side it was on, that is no
    /// decision of keep-majority's.
    pub(crate) fn downed_by_operator(&mut self, member: MemberId) {
        self.operator_downs.insert(member);
    }

    /// Whether an operator downed `member`.
    pub(crate) fn is_operator_down(&self, member: MemberId) -> bool {
        self.operator_downs.contains(&member)
    }

    /// Whether the network was calm over the decision window before `now`: it did not change
    /// at all, or changed once, from a whole cluster. Then failure detection and keep-majority
    /// have had the time they need, so a side holding a majority keeps it; a network that
    /// changed more often may leave every member unsure, and downing itself is then correct.
    pub(crate) fn calm(&self, now: Instant) -> bool {
        let from = now.saturating_duration_since(Instant::ZERO);
        let from = Instant::ZERO + from.saturating_sub(DECISION_WINDOW);
        let recent = self.changes.iter().rposition(|(at, _)| *at <= from);
        let within = &self.changes[recent.map_or(0, |i| i + 1)..];
        match within {
            [] => true,
            [_] => recent.is_none_or(|i| self.changes[i].1),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> Instant {
        Instant::from_secs(secs)
    }

    #[test]
    fn calm_means_at_most_one_change_from_a_whole_cluster_within_the_window() {
        let mut s = Survival::default();
        assert!(s.calm(at(5)), "nothing ever changed");
        s.changed(at(10), false);
        assert!(s.calm(at(12)), "one partition of a whole cluster");
        s.changed(at(14), true);
        assert!(
            !s.calm(at(15)),
            "a partition and its heal within the window"
        );
        assert!(
            s.calm(at(40)),
            "long after: nothing changed within the window"
        );
        s.changed(at(41), false);
        assert!(s.calm(at(42)), "a partition long after the heal");
        s.changed(at(43), false);
        assert!(!s.calm(at(44)), "the partition moved");
        assert!(
            !s.calm(at(60)),
            "one change within the window, from a partitioned cluster"
        );
        assert!(s.calm(at(70)), "no change within the window");
    }
}
