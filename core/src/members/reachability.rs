//! Reachability observations, as Akka keeps them: each member's failure detector records which
//! members *it* cannot reach, in its own row that only it writes (with a version it bumps on
//! every change), and gossip spreads the rows. A member is unreachable if any current member
//! observes it so; the observation is undone by the same observer when heartbeats resume.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::id::MemberId;

/// One observer's row.
#[derive(Clone, Debug, Default, Deserialize, Eq, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
struct Row {
    /// Bumped by the observer on every change; the newer row wins a merge.
    version: u64,
    /// The members this observer cannot reach.
    unreachable: BTreeSet<MemberId>,
}

/// Who cannot reach whom.
#[derive(Clone, Debug, Default, Deserialize, Eq, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub(crate) struct Reachability {
    rows: BTreeMap<MemberId, Row>,
}

impl Reachability {
    /// `observer` cannot reach `subject` (or can again, if `reachable`); whether that changed
    /// its row.
    pub(crate) fn observe(
        &mut self,
        observer: MemberId,
        subject: MemberId,
        reachable: bool,
    ) -> bool {
        let row = self.rows.entry(observer).or_default();
        let changed = if reachable {
            row.unreachable.remove(&subject)
        } else {
            row.unreachable.insert(subject)
        };
        if changed {
            // Saturating: a peer's gossip may carry any version for this row.
            row.version = row.version.saturating_add(1);
        }
        changed
    }

    /// Whether `observer` currently observes `subject` unreachable.
    pub(crate) fn observes_unreachable(&self, observer: MemberId, subject: MemberId) -> bool {
        self.rows
            .get(&observer)
            .is_some_and(|row| row.unreachable.contains(&subject))
    }

    /// Each observer with the members it cannot reach, by observer.
    pub(crate) fn rows(&self) -> impl Iterator<Item = (MemberId, &BTreeSet<MemberId>)> {
        self.rows.iter().map(|(o, row)| (*o, &row.unreachable))
    }

    /// The rows of both, each observer's newer one.
    pub(crate) fn merge(&self, other: &Self) -> Self {
        let mut rows = self.rows.clone();
        for (observer, theirs) in &other.rows {
            match rows.get(observer) {
                Some(ours) if ours.version >= theirs.version => {}
                _ => {
                    rows.insert(*observer, theirs.clone());
                }
            }
        }
        Self { rows }
    }

    /// Forgets rows of observers, and observations of subjects, that are not in `members`;
    /// whether it forgot anything.
    pub(crate) fn retain_members(&mut self, is_member: impl Fn(&MemberId) -> bool) -> bool {
        let rows = self.rows.len();
        self.rows.retain(|observer, _| is_member(observer));
        let mut dropped = self.rows.len() != rows;
        for row in self.rows.values_mut() {
            let subjects = row.unreachable.len();
            row.unreachable.retain(|subject| is_member(subject));
            dropped |= row.unreachable.len() != subjects;
        }
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(n: u64) -> MemberId {
        MemberId::new(n, 1)
    }

    #[test]
    fn observations_merge_by_observer_version_and_can_be_undone() {
        let mut a = Reachability::default();
        assert!(a.observe(m(1), m(3), false));
        assert!(!a.observe(m(1), m(3), false), "no change, no new version");
        let mut b = a.clone();
        assert!(b.observe(m(1), m(3), true), "reachable again");
        assert!(b.observe(m(2), m(3), false));
        let merged = a.merge(&b);
        assert_eq!(merged, b.merge(&a), "merge is symmetric");
        assert!(
            !merged.observes_unreachable(m(1), m(3)),
            "the newer row of m1 wins"
        );
        assert!(merged.observes_unreachable(m(2), m(3)));
        let rows: Vec<(MemberId, Vec<MemberId>)> = merged
            .rows()
            .map(|(o, s)| (o, s.iter().copied().collect()))
            .collect();
        assert_eq!(rows, [(m(1), vec![]), (m(2), vec![m(3)])]);
    }

    #[test]
    fn rows_and_subjects_of_non_members_are_forgotten() {
        let mut r = Reachability::default();
        r.observe(m(1), m(3), false);
        r.observe(m(2), m(1), false);
        r.retain_members(|id| [m(1), m(3)].contains(id));
        assert!(r.observes_unreachable(m(1), m(3)));
        r.retain_members(|id| *id == m(1));
        assert!(!r.observes_unreachable(m(1), m(3)));
    }
}
