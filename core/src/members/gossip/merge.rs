//! Merging two gossips: a member's later status wins, reachability and removals combine, and
//! what a received state did to ours (the same, newer, older, or a merge of both).

use super::*;

/// Whether a merge's members and removed set equal each side's.
#[derive(Clone, Copy, Debug)]
struct Likeness {
    ours: bool,
    theirs: bool,
}

/// What receiving a gossip did to the local state.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub(crate) enum Received {
    /// The same state: only the seen sets were combined.
    Same,
    /// The sender's state was newer and is now ours.
    Newer,
    /// The sender's state was older: it should get ours.
    Older,
    /// Both had something the other lacked: ours is the merge, seen only by us.
    Merged,
}

impl GossipMember {
    /// One member as both states know it: the later status, the earliest up number (0: not
    /// up yet), ready to exit if either says so.
    fn merge(&self, other: &Self) -> Self {
        let up_number = match (self.up_number, other.up_number) {
            (0, n) | (n, 0) => n,
            (a, b) => a.min(b),
        };
        Self {
            status: rank(self.status).max(rank(other.status)).1,
            up_number,
            ready_to_exit: self.ready_to_exit || other.ready_to_exit,
            encoding: EncodingDigest::default(),
            ..self.clone()
        }
    }
}

impl Gossip {
    /// The state without the seen set: what two gossips compare on.
    #[cfg(test)]
    pub(super) fn same_state(&self, other: &Self) -> bool {
        // Both digests known (a gossip cloned in-process carries its cache): they decide, as
        // they do in every digest exchange between members.
        if let (Some(ours), Some(theirs)) = (self.digest.state, other.digest.state) {
            return ours == theirs;
        }
        self.members == other.members
            && self.removed == other.removed
            && self.reachability == other.reachability
    }

    /// The merge of both states (seen set empty), and whether its members and removed set
    /// equal ours and theirs. Where the merge equals one side's members or removed set, it
    /// shares that side's (so the comparisons that follow are by pointer).
    fn merge(&self, other: &Self) -> (Self, Likeness) {
        let (removed, mut like) = if other.removed.is_subset(&self.removed) {
            let same = self.removed.is_subset(&other.removed);
            (
                Arc::clone(&self.removed),
                Likeness {
                    ours: true,
                    theirs: same,
                },
            )
        } else if self.removed.is_subset(&other.removed) {
            (
                Arc::clone(&other.removed),
                Likeness {
                    ours: false,
                    theirs: true,
                },
            )
        } else {
            let union = self.removed.union(&other.removed).copied().collect();
            (
                Arc::new(union),
                Likeness {
                    ours: false,
                    theirs: false,
                },
            )
        };
        // One shared map (in-process copies of a state) equals itself: nothing to join, unless
        // the other side removed one of its members.
        let shared = Arc::ptr_eq(&self.members, &other.members)
            && removed.iter().all(|id| !self.members.contains_key(id));
        if !shared {
            // First only whether the merge equals one side (a received state is nearly always
            // newer or older than ours, and equal members compare by pointer): the merged map
            // is built only when it is neither (a few in a thousand merges).
            // Shared members need no look unless one may have been removed.
            let skip_shared = removed.is_empty();
            join(&self.members, &other.members, skip_shared, |id, a, b| {
                if removed.contains(&id) {
                    like.ours &= a.is_none();
                    like.theirs &= b.is_none();
                } else {
                    match (a, b) {
                        (Some(a), Some(b)) if a == b => {}
                        (Some(a), Some(b)) => {
                            let m = a.merge(b);
                            like.ours &= m == **a;
                            like.theirs &= m == **b;
                        }
                        (Some(_), None) => like.theirs = false,
                        (None, _) => like.ours = false,
                    }
                }
                like.ours || like.theirs
            });
        }
        let members = if like.ours {
            Arc::clone(&self.members)
        } else if like.theirs {
            Arc::clone(&other.members)
        } else {
            let mut merged = Vec::with_capacity(self.members.len().max(other.members.len()));
            join(&self.members, &other.members, false, |id, a, b| {
                let member = match (a, b) {
                    _ if removed.contains(&id) => return true,
                    (Some(a), Some(b)) if a == b => Arc::clone(a),
                    (Some(a), Some(b)) => Arc::new(a.merge(b)),
                    (Some(m), None) | (None, Some(m)) => Arc::clone(m),
                    (None, None) => return true,
                };
                merged.push((id, member));
                true
            });
            Arc::new(merged.into_iter().collect())
        };
        let mut g = Self {
            members,
            removed,
            reachability: self.reachability.merge(&other.reachability),
            seen: Seen::default(),
            digest: DigestCache::default(),
        };
        g.prune();
        (g, like)
    }

    /// Drops what refers to members that are gone; whether the state changed (the seen set is
    /// not part of it).
    pub(super) fn prune(&mut self) -> bool {
        let members = &self.members;
        let changed = self
            .reachability
            .retain_members(|id| members.contains_key(id));
        self.seen.retain(|id| members.contains_key(id));
        changed
    }

    /// Takes in `remote`, received by `me`.
    pub(crate) fn receive(&mut self, me: MemberId, remote: Self) -> Received {
        // Known digests decide at once; otherwise the merge tells (comparing whole member
        // maps first would cost as much as the merge, which a different state needs anyway).
        let known = match (self.digest.state, remote.digest.state) {
            (Some(ours), Some(theirs)) => Some(ours == theirs),
            _ => None,
        };
        if known == Some(true) {
            return self.adopt_seen(me, &remote);
        }
        let (merged, like) = self.merge(&remote);
        let theirs = like.theirs && merged.reachability == remote.reachability;
        let ours = like.ours && merged.reachability == self.reachability;
        let (outcome, mut next) = match (ours, theirs) {
            (true, true) => return self.adopt_seen(me, &remote),
            (_, true) => (Received::Newer, remote),
            (true, false) => (Received::Older, std::mem::take(self)),
            (false, false) => (Received::Merged, merged),
        };
        if outcome == Received::Merged {
            next.seen.clear();
        }
        next.seen.insert(me);
        let pruned = next.prune();
        // A newer state adopted as it came keeps the digest it came with (a gossip cloned
        // in-process carries it), and an older one ours: the state is the same.
        if outcome == Received::Merged || pruned {
            next.digest = DigestCache::default();
        } else {
            // The stamp, if any, is ours for an older state (kept: the state is the same) and
            // the sender's for a newer one (its counter, not ours).
            if outcome == Received::Newer {
                next.digest.stamp = None;
            }
            if cfg!(debug_assertions) {
                // Worked out again (the cached view is checked whenever it is read).
                if let Some(kept) = next.digest.state.take() {
                    assert_eq!(next.digest(), kept, "a kept digest is the state's");
                }
            }
        }
        *self = next;
        outcome
    }

    /// `remote` holds this same state: only the seen sets combine.
    fn adopt_seen(&mut self, me: MemberId, remote: &Self) -> Received {
        self.take_in_seen(&remote.seen);
        self.see_if_member(me);
        Received::Same
    }

    /// Records the members of `seen` that are members of this state (both sorted: one walk
    /// of each).
    pub(super) fn take_in_seen(&mut self, seen: &Seen) {
        let members = &self.members;
        self.seen.union_with(seen, members.contains_in_order());
    }
}

/// A merge join of two member maps (both sorted by id): `each` gets every id with its member
/// on each side, in id order, until it answers `false`; with `skip_shared`, not the members
/// both sides share (the same allocation: nearly all of them, between states a few changes
/// apart), which cost a pointer comparison each.
fn join<'a>(
    ours: &'a MemberMap,
    theirs: &'a MemberMap,
    skip_shared: bool,
    mut each: impl FnMut(MemberId, Option<&'a Arc<GossipMember>>, Option<&'a Arc<GossipMember>>) -> bool,
) {
    let (ours, theirs) = (ours.entries(), theirs.entries());
    let (mut i, mut j) = (0, 0);
    while i < ours.len() || j < theirs.len() {
        let (id, a, b) = match (ours.get(i), theirs.get(j)) {
            (Some((x, a)), Some((y, b))) if skip_shared && x == y && Arc::ptr_eq(a, b) => {
                (i, j) = (i + 1, j + 1);
                continue;
            }
            (Some((x, a)), Some((y, b))) if x == y => {
                (i, j) = (i + 1, j + 1);
                (*x, Some(a), Some(b))
            }
            (Some((x, a)), Some((y, _))) if x < y => {
                i += 1;
                (*x, Some(a), None)
            }
            (Some((x, a)), None) => {
                i += 1;
                (*x, Some(a), None)
            }
            (_, Some((y, b))) => {
                j += 1;
                (*y, None, Some(b))
            }
            (None, None) => break,
        };
        if !each(id, a, b) {
            return;
        }
    }
}
