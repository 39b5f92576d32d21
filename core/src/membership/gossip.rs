//! The gossiped membership state, Akka-style: members with their lifecycle status, tombstones of
//! removed members, reachability observations, and the set of members that have seen this exact
//! state. Two states merge deterministically (a join of lattices: the later lifecycle status
//! wins, tombstones win, each observer's newer reachability row wins), so no vector clock is
//! needed: "newer" means "the merge changes nothing".
//!
//! Convergence: no member is unreachable unless Down or Exiting, and every Up or Leaving member
//! has seen the state. Only then does the leader (the first reachable Up or Leaving member by
//! address; the first reachable member if there is none) move members along:
//! Joining → Up, Leaving (ready to exit) → Exiting, Exiting / Down → Removed.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::id::{Address, AppVersion, EntityType, MemberId};
use crate::membership::reachability::Reachability;
use crate::membership::seen::Seen;
use crate::membership::view::{Member, MemberStatus, MembershipView};

mod digest;
mod leader;

use digest::DigestCache;
pub use digest::StateDigest;
pub(crate) use digest::StatusMatch;

/// One member as gossiped.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct GossipMember {
    /// Address plus incarnation.
    pub id: MemberId,
    /// Lifecycle status.
    pub status: MemberStatus,
    /// Roles (fixed for an incarnation).
    pub roles: BTreeSet<String>,
    /// Age order, assigned by the leader when the member becomes Up; 0 before.
    pub up_number: u64,
    /// The member's application version (fixed for an incarnation).
    pub app_version: AppVersion,
    /// A Leaving member whose regions have handed off every shard: it may become Exiting.
    pub ready_to_exit: bool,
    /// The entity types it hosts (fixed for an incarnation). Shared: every state and view
    /// that lists the member holds the same set, so copying a view does not copy the set and
    /// equal members compare it by pointer (a merge compares every member of both states).
    pub hosts: Arc<BTreeSet<EntityType>>,
    /// Where to reach it (fixed for an incarnation).
    pub address: Address,
}

impl GossipMember {
    /// A member asking to join, at [`Address::of_node`] until told otherwise with
    /// [`GossipMember::at`].
    pub(crate) fn joining(
        id: MemberId,
        roles: BTreeSet<String>,
        app_version: AppVersion,
        hosts: BTreeSet<EntityType>,
    ) -> Self {
        Self {
            id,
            status: MemberStatus::Joining,
            roles,
            up_number: 0,
            app_version,
            ready_to_exit: false,
            hosts: Arc::new(hosts),
            address: Address::of_node(id.node),
        }
    }

    /// The same member, reached at `address` (builder style).
    pub(crate) fn at(mut self, address: Address) -> Self {
        self.address = address;
        self
    }

    fn merge(&self, other: &Self) -> Self {
        let up_number = match (self.up_number, other.up_number) {
            (0, n) | (n, 0) => n,
            (a, b) => a.min(b),
        };
        Self {
            status: rank(self.status).max(rank(other.status)).1,
            up_number,
            ready_to_exit: self.ready_to_exit || other.ready_to_exit,
            ..self.clone()
        }
    }
}

/// Lifecycle order for merging: a later status always wins.
fn rank(status: MemberStatus) -> (u8, MemberStatus) {
    let n = match status {
        MemberStatus::Joining => 0,
        MemberStatus::Up => 1,
        MemberStatus::Leaving => 2,
        MemberStatus::Exiting => 3,
        MemberStatus::Down => 4,
    };
    (n, status)
}

/// The membership state one node holds and gossips.
#[derive(Clone, Debug, Default, Deserialize, Eq, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Gossip {
    /// Shared, copy on write: a gossip is cloned for every full-state message, and members
    /// that adopt a state share it until it changes (equal shared states compare at once).
    /// Each member is shared too: a state differs from the one it came from in a few
    /// members, so a merge compares the others by pointer without reading them, and a new
    /// map copies pointers, not members.
    members: Arc<BTreeMap<MemberId, Arc<GossipMember>>>,
    /// Removed members: never members again (a restarted node joins as a new incarnation).
    removed: Arc<BTreeSet<MemberId>>,
    reachability: Reachability,
    /// Members that have seen exactly this state.
    seen: Seen,
    /// The state's digest once computed; cleared by every change of the state.
    #[serde(skip)]
    #[cfg_attr(feature = "arbitrary", arbitrary(default))]
    digest: DigestCache,
}

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

impl Gossip {
    /// A gossip holding only `member`, seen by it (a node forming a new cluster).
    pub(crate) fn founding(member: GossipMember) -> Self {
        let me = member.id;
        let mut g = Self::default();
        Arc::make_mut(&mut g.members).insert(me, Arc::new(member));
        g.seen.insert(me);
        g
    }

    /// The members (removed ones excluded), by id.
    pub(crate) fn members(&self) -> impl Iterator<Item = &GossipMember> {
        self.members.values().map(Arc::as_ref)
    }

    /// The member `id`, if it is one.
    pub(crate) fn member(&self, id: MemberId) -> Option<&GossipMember> {
        self.members.get(&id).map(Arc::as_ref)
    }

    /// Whether `id` was removed.
    pub(crate) fn is_removed(&self, id: MemberId) -> bool {
        self.removed.contains(&id)
    }

    /// Members that have seen this state.
    pub(crate) fn seen(&self) -> &Seen {
        &self.seen
    }

    /// Records that `id` has seen this state (tests drive convergence by hand).
    #[cfg(test)]
    pub(crate) fn mark_seen(&mut self, id: MemberId) {
        self.seen.insert(id);
    }

    /// The state without the seen set: what two gossips compare on.
    #[cfg(test)]
    fn same_state(&self, other: &Self) -> bool {
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
        // Members equal on both sides (nearly all, between states a few changes apart) are
        // borrowed, not shared again (no reference count touched unless the merge is kept):
        // only a merged member is new.
        let mut merged: Vec<(MemberId, Cow<'_, Arc<GossipMember>>)> =
            Vec::with_capacity(self.members.len().max(other.members.len()));
        // One shared map (in-process copies of a state) equals itself: nothing to join, unless
        // the other side removed one of its members.
        let shared = Arc::ptr_eq(&self.members, &other.members)
            && removed.iter().all(|id| !self.members.contains_key(id));
        let joined = if shared { 0 } else { usize::MAX };
        let (mut ours, mut theirs) = (
            self.members.iter().take(joined).peekable(),
            other.members.iter().take(joined).peekable(),
        );
        loop {
            // A merge join of the two member maps (both sorted by id).
            let (id, a, b) = match (ours.peek(), theirs.peek()) {
                (None, None) => break,
                (Some((x, _)), Some((y, _))) if x == y => {
                    let (id, a) = ours.next().expect("peeked");
                    (*id, Some(a), theirs.next().map(|(_, b)| b))
                }
                (Some((x, _)), Some((y, _))) if y < x => {
                    let (id, b) = theirs.next().expect("peeked");
                    (*id, None, Some(b))
                }
                (Some(_), _) => {
                    let (id, a) = ours.next().expect("peeked");
                    (*id, Some(a), None)
                }
                (None, Some(_)) => {
                    let (id, b) = theirs.next().expect("peeked");
                    (*id, None, Some(b))
                }
            };
            if removed.contains(&id) {
                like.ours &= a.is_none();
                like.theirs &= b.is_none();
                continue;
            }
            let member = match (a, b) {
                (Some(a), Some(b)) if a == b => Cow::Borrowed(a),
                (Some(a), Some(b)) => {
                    let m = a.merge(b);
                    like.ours &= m == **a;
                    like.theirs &= m == **b;
                    Cow::Owned(Arc::new(m))
                }
                (Some(a), None) => {
                    like.theirs = false;
                    Cow::Borrowed(a)
                }
                (None, Some(b)) => {
                    like.ours = false;
                    Cow::Borrowed(b)
                }
                (None, None) => continue,
            };
            merged.push((id, member));
        }
        let members = if like.ours {
            Arc::clone(&self.members)
        } else if like.theirs {
            Arc::clone(&other.members)
        } else {
            Arc::new(
                merged
                    .into_iter()
                    .map(|(id, m)| (id, m.into_owned()))
                    .collect(),
            )
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
    fn prune(&mut self) -> bool {
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
        } else if cfg!(debug_assertions) {
            // Worked out again (the cached view is checked whenever it is read).
            if let Some(kept) = next.digest.state.take() {
                assert_eq!(next.digest(), kept, "a kept digest is the state's");
            }
        }
        *self = next;
        outcome
    }

    /// `remote` holds this same state: only the seen sets combine.
    fn adopt_seen(&mut self, me: MemberId, remote: &Self) -> Received {
        self.seen.union_with(&remote.seen);
        self.seen.insert(me);
        Received::Same
    }

    /// A local change: the state is new, seen only by `me`.
    fn changed(&mut self, me: MemberId) {
        self.digest = DigestCache::default();
        self.seen.clear();
        self.seen.insert(me);
    }

    /// Adds `member` as Joining (a new incarnation of a member's address marks the old one
    /// Down: it is dead, or it would not have restarted). Whether anything changed.
    pub(crate) fn add_joining(&mut self, me: MemberId, member: GossipMember) -> bool {
        if self.members.contains_key(&member.id) || self.removed.contains(&member.id) {
            return false;
        }
        let older: Vec<MemberId> = self
            .members
            .keys()
            .filter(|m| m.node == member.id.node && m.incarnation < member.id.incarnation)
            .copied()
            .collect();
        for id in older {
            self.set_status(me, id, MemberStatus::Down);
        }
        Arc::make_mut(&mut self.members).insert(member.id, Arc::new(member));
        self.changed(me);
        true
    }

    /// Moves `id` to `status` if that is later in its lifecycle. Whether it changed.
    pub(crate) fn set_status(&mut self, me: MemberId, id: MemberId, status: MemberStatus) -> bool {
        let Some(m) = self.members.get(&id) else {
            return false;
        };
        if rank(status) <= rank(m.status) {
            return false;
        }
        if let Some(m) = Arc::make_mut(&mut self.members).get_mut(&id) {
            Arc::make_mut(m).status = status;
        }
        self.changed(me);
        true
    }

    /// Marks `me` ready to exit (it is Leaving and its regions have stopped).
    pub(crate) fn set_ready_to_exit(&mut self, me: MemberId) -> bool {
        match self.members.get(&me) {
            Some(m) if !m.ready_to_exit => {
                if let Some(m) = Arc::make_mut(&mut self.members).get_mut(&me) {
                    Arc::make_mut(m).ready_to_exit = true;
                }
                self.changed(me);
                true
            }
            _ => false,
        }
    }

    /// Records `me`'s observation of `subject`. Whether it changed.
    pub(crate) fn observe(&mut self, me: MemberId, subject: MemberId, reachable: bool) -> bool {
        let changed = self.members.contains_key(&subject)
            && self.reachability.observe(me, subject, reachable);
        if changed {
            self.changed(me);
        }
        changed
    }

    /// Whether `observer` currently observes `subject` unreachable.
    pub(crate) fn observes_unreachable(&self, observer: MemberId, subject: MemberId) -> bool {
        self.reachability.observes_unreachable(observer, subject)
    }

    /// The current members `observer` itself has marked unreachable.
    pub(crate) fn observed_unreachable_by(&self, observer: MemberId) -> BTreeSet<MemberId> {
        self.reachability
            .rows()
            .filter(|(o, _)| *o == observer)
            .flat_map(|(_, subjects)| subjects.iter().copied())
            .filter(|s| self.members.contains_key(s))
            .collect()
    }

    /// Whether `id`'s observations count: it is a current member and not Down.
    fn is_observer(&self, id: MemberId) -> bool {
        self.members
            .get(&id)
            .is_some_and(|m| m.status != MemberStatus::Down)
    }

    /// Members some current member cannot reach.
    pub(crate) fn unreachable(&self) -> BTreeSet<MemberId> {
        let mut all = BTreeSet::new();
        for (observer, subjects) in self.reachability.rows() {
            if self.is_observer(observer) {
                all.extend(subjects.iter().copied());
            }
        }
        all
    }

    /// The members `me`'s side cannot reach: those `me` observes unreachable, then those
    /// observed unreachable by the other members not (yet) found unreachable, in address
    /// order. Observations from the far side of a partition (about `me`'s side) do not count
    /// once a near-side member has observed their observer unreachable: this is the view a
    /// side decides downing on.
    pub(crate) fn unreachable_from(&self, me: MemberId) -> BTreeSet<MemberId> {
        let complaints = |subjects: &BTreeSet<MemberId>| {
            subjects
                .iter()
                .filter(|s| **s != me && self.members.contains_key(s))
                .copied()
                .collect::<Vec<MemberId>>()
        };
        let rows: Vec<(MemberId, &BTreeSet<MemberId>)> = self.reachability.rows().collect();
        let mut unreachable: BTreeSet<MemberId> = rows
            .iter()
            .filter(|(o, _)| *o == me)
            .flat_map(|(_, subjects)| complaints(subjects))
            .collect();
        for (observer, subjects) in rows {
            if observer != me && self.is_observer(observer) && !unreachable.contains(&observer) {
                unreachable.extend(complaints(subjects));
            }
        }
        unreachable
    }

    /// The view the sharding roles consume, built once per state: a state adopted as it came
    /// (an in-process copy, as in the simulator) brings the view its sender built, so a
    /// thousand members adopting one state build its view once, not a thousand times.
    pub(crate) fn view(&mut self) -> MembershipView {
        if let Some(view) = &self.digest.view {
            debug_assert!(*view == self.build_view(), "a cached view is the state's");
            return view.clone();
        }
        let view = self.build_view();
        self.digest.view = Some(view.clone());
        view
    }

    /// The view of this state, built member by member.
    fn build_view(&self) -> MembershipView {
        let unreachable = self.unreachable();
        MembershipView::new(
            self.members
                .values()
                .map(|m| Member {
                    id: m.id,
                    status: m.status,
                    roles: m.roles.clone(),
                    up_number: m.up_number,
                    app_version: m.app_version,
                    reachable: !unreachable.contains(&m.id),
                    hosts: Some(Arc::clone(&m.hosts)),
                    address: Some(m.address.clone()),
                })
                .collect(),
        )
        .with_removed(self.removed.iter().copied())
    }
}

#[cfg(test)]
#[path = "gossip_tests.rs"]
mod tests;
