//! Convergence and the leader's moves: who leads, and what it may do once every member that
//! must has seen the state.

use super::*;

impl Gossip {
    /// Whether every Up or Leaving member has seen this state and nobody is unreachable but
    /// Down or Exiting members.
    pub(crate) fn converged(&self) -> bool {
        let unreachable = self.unreachable();
        self.members.values().all(|m| {
            let skip = matches!(m.status, MemberStatus::Down | MemberStatus::Exiting);
            if unreachable.contains(&m.id) {
                return skip;
            }
            !matches!(m.status, MemberStatus::Up | MemberStatus::Leaving)
                || self.seen.contains(&m.id)
        })
    }

    /// The leader as `me` sees it: the first member `me` considers reachable that is Up or
    /// Leaving, else the first reachable member that is not Down. Never a Down member, as in
    /// Akka: one is on its way out (its process may be gone already), and were it chosen when
    /// every Up member had been downed, the members still joining would wait for it forever.
    pub(crate) fn leader(&self, me: MemberId) -> Option<MemberId> {
        let unreachable = self.unreachable();
        let mut first = None;
        // Asked after every change: stops at the first Up member rather than listing all.
        for m in self.members.values().filter(|m| {
            m.status != MemberStatus::Down && (m.id == me || !unreachable.contains(&m.id))
        }) {
            if matches!(m.status, MemberStatus::Up | MemberStatus::Leaving) {
                return Some(m.id);
            }
            first.get_or_insert(m.id);
        }
        first
    }

    /// The leader's moves at convergence: Joining → Up (once `min_members` are known, and
    /// `min_per_role` of each role), Leaving and ready → Exiting, Exiting members that saw it
    /// and unreachable Down or Exiting members → Removed. If anything changed, the Exiting
    /// members it removed.
    pub(crate) fn leader_actions(
        &mut self,
        me: MemberId,
        min_members: usize,
        min_per_role: &BTreeMap<String, usize>,
    ) -> Option<Vec<MemberId>> {
        if self.leader(me) != Some(me) || !self.converged() {
            return None;
        }
        let unreachable = self.unreachable();
        let mut next_up = self
            .members
            .values()
            .map(|m| m.up_number)
            .max()
            .unwrap_or(0);
        let with_role = |role: &String| {
            let members = self.members.values();
            members.filter(|m| m.roles.contains(role)).count()
        };
        let roles_enough = min_per_role
            .iter()
            .all(|(role, min)| with_role(role) >= *min);
        if !roles_enough {
            crate::probe::hit("membership: joining members wait for enough members of a role");
        }
        let enough = self.members.len() >= min_members && roles_enough;
        // What the leader moves, worked out first: the state is shared, and copied only if
        // something changes.
        let (mut up, mut exiting) = (Vec::new(), Vec::new());
        // Removed members, and among them those that exited (they must be told: nobody
        // gossips to removed members).
        let (mut removed, mut exited) = (Vec::new(), Vec::new());
        for m in self.members.values() {
            match m.status {
                MemberStatus::Joining if enough => up.push(m.id),
                MemberStatus::Leaving if m.ready_to_exit => exiting.push(m.id),
                MemberStatus::Exiting
                    if self.seen.contains(&m.id) || unreachable.contains(&m.id) =>
                {
                    removed.push(m.id);
                    exited.push(m.id);
                }
                MemberStatus::Down if unreachable.contains(&m.id) => removed.push(m.id),
                _ => {}
            }
        }
        let mut changed = !up.is_empty() || !exiting.is_empty();
        if changed || !removed.is_empty() {
            let members = Arc::make_mut(&mut self.members);
            for id in &up {
                if let Some(m) = members.get_mut(id).map(GossipMember::edit) {
                    // Saturating: a peer's gossip may carry any up-number.
                    next_up = next_up.saturating_add(1);
                    m.status = MemberStatus::Up;
                    m.up_number = next_up;
                }
            }
            for id in &exiting {
                if let Some(m) = members.get_mut(id).map(GossipMember::edit) {
                    m.status = MemberStatus::Exiting;
                }
            }
            for id in &removed {
                members.remove(id);
            }
            Arc::make_mut(&mut self.removed).extend(removed.iter().copied());
        }
        changed |= !removed.is_empty();
        if !changed {
            return None;
        }
        self.prune();
        self.changed(me);
        Some(exited)
    }
}
