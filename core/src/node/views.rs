//! How a new membership view reaches the sharding roles: removals and their margin, the
//! peers' addresses, and where each type's coordinator runs.

use std::collections::BTreeSet;

use super::Node;
use super::member_events::emit_member_changes;
use crate::coordinator::Coordinator;
use crate::effect::Event;
use crate::members::{MemberStatus, MembershipView};
use crate::time::Instant;

impl Node {
    /// A new membership view, the node's own or the host's: members gone are recorded as
    /// removals (for the margin before their shards move), addresses learned, and each
    /// type's coordinator started or stopped here before the roles get the view.
    pub(super) fn handle_membership(&mut self, now: Instant, view: MembershipView) {
        emit_member_changes(&self.view, &view, &mut self.effects);
        // A member removed after Exiting had stopped all its regions (it could not exit
        // before): nothing of it can still run, so its removal needs no margin. Others may
        // have hosted shards a new coordinator has not heard of.
        let mut exited = BTreeSet::new();
        let mut removed = Vec::new();
        // Both views are sorted by id: one indexed walk finds the members gone (every member
        // walks its whole view for each of the thousands of views a large cluster forms with).
        // Members at both ends listed alike in both views are not gone.
        let ends = self.view.unchanged_ends(&view);
        let (front, back) = ends;
        let (old, current) = (self.view.members(), view.members());
        let current = &current[front..current.len() - back];
        let mut k = 0;
        for old in &old[front..old.len() - back] {
            while current.get(k).is_some_and(|m| m.id < old.id) {
                k += 1;
            }
            if current.get(k).is_some_and(|m| m.id == old.id) {
                continue;
            }
            self.known_removed.insert(old.id);
            if old.status == MemberStatus::Exiting {
                exited.insert(old.id);
            } else {
                removed.push(old.id);
            }
        }
        // A removal this node never saw happen (it joined afterwards) may be as recent as now:
        // a coordinator it comes to run must wait the margin out for it too (flapping-links
        // seed 21747: the oldest member ran no entity type, so a member that had joined after
        // another's removal ran the coordinator and allocated that member's shards while it,
        // cut off and not yet aware it was downed, still ran them).
        for &id in view.removed() {
            if self.known_removed.insert(id) {
                crate::probe::hit("node: a removal this node never saw is waited out");
                removed.push(id);
            }
        }
        for id in removed {
            self.removals.insert(id, now);
            for t in self.types.values_mut() {
                if let Some(c) = &mut t.coordinator {
                    c.note_removal(id, now);
                }
            }
        }
        self.peers.learn(&self.view, &view, ends);
        self.view = view;
        for t in self.types.values_mut() {
            let role = t.config.role.as_deref();
            let coordinator = self.view.coordinator_of(&t.config.name, role);
            let should_run = coordinator == Some(self.me);
            match (&mut t.coordinator, should_run) {
                (None, true) => {
                    let recent = self.removals.clone();
                    let settings = &self.config.settings;
                    t.coordinator = Some(Coordinator::new(
                        self.me, &t.config, settings, &t.desired, recent, now,
                    ));
                    self.effects.event(Event::CoordinatorStarted {
                        entity_type: t.config.name.clone(),
                    });
                }
                (Some(c), false) => {
                    if let Some(release) = c.take_lease_release() {
                        self.effects.lease(release);
                    }
                    t.coordinator = None;
                    self.effects.event(Event::CoordinatorStopped {
                        entity_type: t.config.name.clone(),
                    });
                }
                _ => {}
            }
            if let Some(c) = &mut t.coordinator {
                c.handle_membership(now, &self.view, &exited, &mut self.effects);
            }
            t.region.handle_membership(
                now,
                &self.view,
                coordinator,
                &mut self.rng,
                &mut self.effects,
            );
        }
    }
}
