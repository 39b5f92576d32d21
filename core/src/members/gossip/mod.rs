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

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::reachability::Reachability;
use crate::id::{Address, AppVersion, EntityType, MemberId};
use crate::members::Seen;
use crate::members::{Member, MemberStatus, MembershipView};

mod digest;
mod leader;
mod members;
mod merge;

pub use digest::StateDigest;
pub(crate) use digest::StateStamp;
pub(crate) use digest::StatusMatch;
use digest::{DigestCache, EncodingDigest};
use members::MemberMap;
pub(crate) use merge::Received;

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
    /// The digest of the member's encoding, once worked out (not part of the member).
    #[serde(skip)]
    #[cfg_attr(feature = "arbitrary", arbitrary(default))]
    encoding: EncodingDigest,
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
            encoding: EncodingDigest::default(),
        }
    }

    /// The same member, reached at `address` (builder style).
    pub(crate) fn at(mut self, address: Address) -> Self {
        self.address = address;
        self.encoding = EncodingDigest::default();
        self
    }

    /// The member behind `member`, to change (copied first if it is shared): every change of
    /// a member goes through here, which forgets the digest of its encoding.
    pub(super) fn edit(member: &mut Arc<Self>) -> &mut Self {
        let member = Arc::make_mut(member);
        member.encoding = EncodingDigest::default();
        member
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
    members: Arc<MemberMap>,
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

    /// How many members there are (removed ones excluded).
    pub(crate) fn member_count(&self) -> usize {
        self.members.len()
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

    /// A local change: the state is new, seen only by `me`.
    fn changed(&mut self, me: MemberId) {
        self.digest = DigestCache::default();
        self.seen.clear();
        self.see_if_member(me);
    }

    /// Records that `id` has seen this state, if it is a member: the seen set holds members
    /// only (as Akka's gossip requires), which the choice of gossip targets relies on.
    fn see_if_member(&mut self, id: MemberId) {
        if self.members.contains_key(&id) {
            self.seen.insert(id);
        }
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
            GossipMember::edit(m).status = status;
        }
        self.changed(me);
        true
    }

    /// Marks `me` ready to exit (it is Leaving and its regions have stopped).
    pub(crate) fn set_ready_to_exit(&mut self, me: MemberId) -> bool {
        match self.members.get(&me) {
            Some(m) if !m.ready_to_exit => {
                if let Some(m) = Arc::make_mut(&mut self.members).get_mut(&me) {
                    GossipMember::edit(m).ready_to_exit = true;
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
mod tests;
