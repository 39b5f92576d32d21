//! What hosts, checkers and tests may read of a node: its id and view, counters, the
//! coordinator's table and desired locations, a region's shards and buffers, its due timers by
//! name, and its internal invariants.

use std::collections::BTreeMap;

use super::{Metrics, Node};
use crate::coordinator::Coordinator;
use crate::id::{EntityType, MemberId, NodeId, ShardId};
use crate::members::MembershipView;
use crate::region::RouteCounts;
use crate::time::{Instant, NamedDeadline};

impl Node {
    /// The names of the timers due at `now` (`"region counter: shard timer"`), for the log
    /// line of a busy loop: a timer that stays due after firing is a bug in its role.
    pub fn due_timers(&self, now: Instant) -> Vec<String> {
        let mut names = Vec::new();
        let mut add = |role: &dyn std::fmt::Display, deadlines: &[NamedDeadline]| {
            for (timer, at) in deadlines {
                if at.is_some_and(|at| at <= now) {
                    names.push(format!("{role}: {timer}"));
                }
            }
        };
        if let Some(m) = &self.membership {
            add(&"membership", &m.deadlines());
        }
        let margin = self.config.settings.down_removal_margin;
        let removal = self.removals.values().map(|at| *at + margin).min();
        add(&"node", &[("removal margin", removal)]);
        for t in self.types.values() {
            let name = &t.config.name;
            add(&format_args!("region {name}"), &t.region.deadlines());
            if let Some(c) = &t.coordinator {
                add(&format_args!("coordinator {name}"), &c.deadlines());
            }
        }
        names
    }

    /// This member's id.
    pub fn member_id(&self) -> MemberId {
        self.me
    }

    /// Checks the node's internal invariants, which hold after every drain whatever the
    /// inputs were: each coordinator's allocation table against its per-region shard lists
    /// (no shard in two lists, none allocated but unlisted, acknowledgements and handoffs only
    /// for allocated shards), and each region's buffer budget and shard timers against what it
    /// buffers and hosts. The simulator checks them after every driver call; debug builds
    /// after every drain.
    ///
    /// # Errors
    /// The first invariant found broken, described.
    pub fn check_invariants(&self) -> Result<(), String> {
        for roles in self.types.values() {
            roles.region.check_invariants()?;
            if let Some(coordinator) = &roles.coordinator {
                coordinator.check_invariants()?;
            }
        }
        Ok(())
    }

    /// Counters of dropped peer input.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// How this node's regions routed messages, summed over entity types.
    pub fn route_counts(&self) -> RouteCounts {
        let mut sum = RouteCounts::default();
        for roles in self.types.values() {
            let routes = &roles.region.routes;
            sum.delivered += routes.delivered;
            sum.forwarded += routes.forwarded;
            sum.buffered += routes.buffered;
        }
        sum
    }

    /// The current membership view.
    pub fn view(&self) -> &MembershipView {
        &self.view
    }

    /// The shard locations the application asked for (`Command::SetShardLocation`), as this
    /// node heard of them; `None` for a type it does not run.
    pub fn desired_shard_locations(
        &self,
        entity_type: &EntityType,
    ) -> Option<&BTreeMap<ShardId, NodeId>> {
        self.types.get(entity_type).map(|t| &t.desired)
    }

    /// The coordinator's allocation table for a type, if this node runs its coordinator.
    pub fn coordinator_allocations(
        &self,
        entity_type: &EntityType,
    ) -> Option<&BTreeMap<ShardId, MemberId>> {
        self.types
            .get(entity_type)?
            .coordinator
            .as_ref()
            .map(Coordinator::allocations)
    }

    /// Where this node's own membership is (joining, a member, removed, downed), when it
    /// manages membership itself.
    pub fn membership_phase(&self) -> Option<crate::membership::Phase> {
        self.membership.as_ref().map(|m| m.phase())
    }

    /// Shards of a type hosted on this node (running or stopping), in order.
    pub fn hosted_shards(&self, entity_type: &EntityType) -> Vec<ShardId> {
        self.types
            .get(entity_type)
            .map(|t| t.region.hosted_shards().collect())
            .unwrap_or_default()
    }

    /// The type's active-entity limit in this node's region, if it has one (the configured
    /// one, or the last `Command::SetActiveEntityLimit`'s).
    pub fn active_entity_limit(&self, entity_type: &EntityType) -> Option<usize> {
        let t = self.types.get(entity_type)?;
        t.region.entity_limit()
    }

    /// Messages of a type buffered on this node (never more than `buffer_size`).
    pub fn buffered(&self, entity_type: &EntityType) -> usize {
        self.types
            .get(entity_type)
            .map_or(0, |t| t.region.buffered())
    }

    /// Whether the type's region has stopped (graceful shutdown done, or member downed).
    pub fn is_region_stopped(&self, entity_type: &EntityType) -> bool {
        self.types
            .get(entity_type)
            .is_some_and(|t| t.region.is_stopped())
    }
}
