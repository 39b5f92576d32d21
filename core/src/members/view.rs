//! The membership view the sharding roles consume. Until the membership state machine lands it
//! is an input: the host (or the simulator's oracle) hands the `Node` a fresh view on change.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::id::{Address, AppVersion, EntityType, MemberId};

/// Akka's member lifecycle: Joining → Up → Leaving → Exiting → Removed, and Down.
/// Removed members are simply absent from a [`MembershipView`].
#[derive(Clone, Copy, Debug, Deserialize, Eq, Hash, Ord, PartialEq, PartialOrd, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum MemberStatus {
    /// Joined but not yet moved Up by the leader; hosts nothing.
    Joining,
    /// A full member: may host shards and run coordinators.
    Up,
    /// Leaving gracefully: its shards are handed off; it hosts no new ones.
    Leaving,
    /// Done leaving; about to be removed.
    Exiting,
    /// Declared dead by the downing strategy; it stops itself if it can still run.
    Down,
}

impl MemberStatus {
    /// Whether a member in this status may still host shards (registered before or now).
    pub fn may_host_shards(self) -> bool {
        matches!(self, Self::Up | Self::Leaving | Self::Exiting)
    }
}

/// One member as seen by this node.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Member {
    /// Address plus incarnation.
    pub id: MemberId,
    /// Lifecycle status.
    pub status: MemberStatus,
    /// Roles; an entity type with a role is hosted only on members having it.
    pub roles: BTreeSet<String>,
    /// Order in which members became Up; lower is older. The oldest runs the coordinators.
    pub up_number: u64,
    /// The member's application version.
    pub app_version: AppVersion,
    /// Whether this node's failure detector (or gossip) currently considers it reachable.
    pub reachable: bool,
    /// The entity types it hosts (runs a hosting region for, not a proxy). `None` when the
    /// host that supplies views does not say: the member is then assumed to host every type
    /// its roles allow. A node that manages membership always says.
    pub hosts: Option<Arc<BTreeSet<EntityType>>>,
    /// Where to reach it. `None` when the host that supplies views routes by member id itself;
    /// a node that manages membership always says.
    pub address: Option<Address>,
}

impl Member {
    /// An Up, reachable member with the given roles, up-number and the default app version.
    pub fn up(id: MemberId, up_number: u64, roles: &[&str]) -> Self {
        Self {
            id,
            status: MemberStatus::Up,
            roles: roles.iter().map(|r| (*r).to_owned()).collect(),
            up_number,
            app_version: AppVersion::default(),
            reachable: true,
            hosts: None,
            address: None,
        }
    }

    /// The same member, saying that it hosts exactly `types` (builder style).
    pub fn hosting<'a>(mut self, types: impl IntoIterator<Item = &'a EntityType>) -> Self {
        self.hosts = Some(Arc::new(types.into_iter().cloned().collect()));
        self
    }

    /// The same member, reached at `address` (builder style).
    pub fn at(mut self, address: Address) -> Self {
        self.address = Some(address);
        self
    }

    /// Whether this member carries `role` (`None` means "every member").
    pub fn has_role(&self, role: Option<&str>) -> bool {
        role.is_none_or(|r| self.roles.contains(r))
    }

    /// Whether this member hosts `entity_type`, whose regions need `role`: it carries the role
    /// and (if it says which types it hosts) lists the type.
    pub fn hosts_type(&self, entity_type: &EntityType, role: Option<&str>) -> bool {
        self.has_role(role) && self.hosts.as_ref().is_none_or(|h| h.contains(entity_type))
    }
}

/// A snapshot of cluster membership, kept sorted by member id.
#[derive(Clone, Debug, Default, Deserialize, Eq, PartialEq, Serialize)]
pub struct MembershipView {
    /// Shared: a view is handed to every role of a node and kept by each, and copying a
    /// large cluster's members for each was much of a node's work while the cluster formed.
    members: Arc<Vec<Member>>,
    /// Members removed from the cluster (tombstones), sorted: a node that joined after a
    /// removal learns of it here.
    #[serde(default)]
    removed: Arc<Vec<MemberId>>,
}

impl MembershipView {
    /// Builds a view; members are sorted by id and later duplicates of an id are dropped.
    pub fn new(mut members: Vec<Member>) -> Self {
        // A gossip state lists its members in id order already: the check spares the stable
        // sort's scratch buffer, which at a thousand members is fresh memory on every view.
        if !members.is_sorted_by_key(|m| m.id) {
            members.sort_by_key(|m| m.id);
        }
        members.dedup_by_key(|m| m.id);
        Self {
            members: Arc::new(members),
            removed: Arc::default(),
        }
    }

    /// The same view, listing `removed` as members removed from the cluster (builder style).
    /// A node that manages membership always lists them; a host supplying views should list
    /// at least those removed within `down_removal_margin`, so that a node that joins after a
    /// removal and comes to run a coordinator waits the margin out.
    pub fn with_removed(mut self, removed: impl IntoIterator<Item = MemberId>) -> Self {
        let mut removed: Vec<MemberId> = removed.into_iter().collect();
        removed.sort();
        removed.dedup();
        self.removed = Arc::new(removed);
        self
    }

    /// The same view with `id` removed (and listed as removed).
    pub(crate) fn without(mut self, id: MemberId) -> Self {
        Arc::make_mut(&mut self.members).retain(|m| m.id != id);
        if let Err(at) = self.removed.binary_search(&id) {
            Arc::make_mut(&mut self.removed).insert(at, id);
        }
        self
    }

    /// How many members at the front and at the back of this view and `next` are the same
    /// ids at the same addresses, cut back to whole node ids (a node's incarnations are listed
    /// together): views that follow each other differ in a few members, and what lies in both
    /// ends needs no walk.
    pub(crate) fn unchanged_ends(&self, next: &Self) -> (usize, usize) {
        let (before, after) = (self.members(), next.members());
        let same = |(a, b): &(&Member, &Member)| a.id == b.id && a.address == b.address;
        let views = [before, after];
        let mut front = before.iter().zip(after).take_while(same).count();
        // A node whose members go on past the front in either view is not skipped.
        while front > 0
            && views.iter().any(|v| {
                v.get(front)
                    .is_some_and(|m| m.id.node == v[front - 1].id.node)
            })
        {
            front -= 1;
        }
        let shorter = before.len().min(after.len());
        let pairs = before.iter().rev().zip(after.iter().rev());
        let mut back = pairs.take(shorter - front).take_while(same).count();
        while back > 0
            && views.iter().any(|v| {
                let at = v.len() - back;
                at > 0 && v[at - 1].id.node == v[at].id.node
            })
        {
            back -= 1;
        }
        (front, back)
    }

    /// Members removed from the cluster (tombstones), sorted.
    pub fn removed(&self) -> &[MemberId] {
        &self.removed
    }

    /// All members, sorted by id.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// The leader as `me` sees it, by the gossip's rule: the first member in id order that is
    /// Up or Leaving and reachable (or `me`), else the first such member that is not Down.
    pub fn leader(&self, me: MemberId) -> Option<MemberId> {
        let candidates = self
            .members
            .iter()
            .filter(|m| m.status != MemberStatus::Down && (m.id == me || m.reachable));
        let mut first = None;
        for m in candidates {
            if matches!(m.status, MemberStatus::Up | MemberStatus::Leaving) {
                return Some(m.id);
            }
            first.get_or_insert(m.id);
        }
        first
    }

    /// The member with this exact id (address and incarnation), if present.
    pub fn member(&self, id: MemberId) -> Option<&Member> {
        crate::members::search(&self.members, &id, |m| &m.id)
            .ok()
            .map(|i| &self.members[i])
    }

    /// Whether a later incarnation of `id`'s node is a member: `id` was succeeded.
    pub fn succeeded(&self, id: MemberId) -> bool {
        // Sorted by id (node, then incarnation): a successor comes right after `id`'s place.
        let after = self.members.partition_point(|m| m.id <= id);
        self.members
            .get(after)
            .is_some_and(|m| m.id.node == id.node)
    }

    /// The status of `id`, or `None` if it is not (or no longer) a member.
    pub fn status(&self, id: MemberId) -> Option<MemberStatus> {
        self.member(id).map(|m| m.status)
    }

    /// The oldest Up member carrying `role`. Ties on up-number (which a correct membership
    /// never produces) fall back to address order.
    pub fn oldest_up(&self, role: Option<&str>) -> Option<MemberId> {
        self.oldest_up_where(|m| m.has_role(role))
    }

    /// Where the coordinator of `entity_type` (whose regions need `role`) runs: on the oldest
    /// Up member that hosts the type. A member that does not run the type (a node built for
    /// another purpose, or one not yet updated in a rolling deployment) never does.
    pub fn coordinator_of(&self, entity_type: &EntityType, role: Option<&str>) -> Option<MemberId> {
        self.oldest_up_where(|m| m.hosts_type(entity_type, role))
    }

    fn oldest_up_where(&self, mut accept: impl FnMut(&Member) -> bool) -> Option<MemberId> {
        // Asked for every view change by every node: `accept` (a role and a set lookup) is
        // asked only of a member older than the oldest accepted so far, which after the first
        // few members is almost none of them.
        let mut oldest: Option<&Member> = None;
        for m in self.members.iter() {
            let older = oldest.is_none_or(|o| (m.up_number, m.id) < (o.up_number, o.id));
            if m.status == MemberStatus::Up && older && accept(m) {
                oldest = Some(m);
            }
        }
        oldest.map(|m| m.id)
    }

    /// Whether any member is unreachable from this node.
    pub fn any_unreachable(&self) -> bool {
        self.members.iter().any(|m| !m.reachable)
    }

    /// Whether any member is still joining.
    pub fn any_joining(&self) -> bool {
        self.members
            .iter()
            .any(|m| m.status == MemberStatus::Joining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    /// The plain definition: the smallest (up-number, id) among accepted Up members.
    fn oldest_by_filtering(
        view: &MembershipView,
        t: &EntityType,
        role: Option<&str>,
    ) -> Option<MemberId> {
        view.members()
            .iter()
            .filter(|m| m.status == MemberStatus::Up && m.hosts_type(t, role))
            .min_by_key(|m| (m.up_number, m.id))
            .map(|m| m.id)
    }

    #[test]
    fn the_coordinator_is_the_oldest_up_member_hosting_the_type() {
        let (a, b) = (EntityType::new("a"), EntityType::new("b"));
        let statuses = [
            MemberStatus::Joining,
            MemberStatus::Up,
            MemberStatus::Up,
            MemberStatus::Leaving,
            MemberStatus::Down,
        ];
        let mut rng = Rng::new(7);
        for _ in 0..300 {
            let count = rng.below(12);
            let members = (0..count)
                .map(|i| {
                    let roles: &[&str] = if rng.below(3) == 0 { &["r"] } else { &[] };
                    // Few up-numbers, so that ties (which address order breaks) occur.
                    let mut m = Member::up(MemberId::new(i, 1 + rng.below(2)), rng.below(4), roles);
                    m.status = statuses[rng.below(5) as usize];
                    match rng.below(3) {
                        0 => m.hosting([&a]),
                        1 => m.hosting([&a, &b]),
                        _ => m,
                    }
                })
                .collect();
            let view = MembershipView::new(members);
            for (t, role) in [(&a, None), (&b, None), (&a, Some("r")), (&b, Some("r"))] {
                assert_eq!(
                    view.coordinator_of(t, role),
                    oldest_by_filtering(&view, t, role)
                );
            }
        }
    }
}
