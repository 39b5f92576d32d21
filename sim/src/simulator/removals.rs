//! A Down member is removed, and its shards leave it, within a bound once the survivors agree
//! it is Down. Membership moves a Down member out only at convergence, which counts what every
//! member observes: were a Down member's own observations counted (it sees the survivors
//! unreachable), the survivors would never converge, the member never be removed and its
//! shards never move. Once a second, the simulator looks at the view of a running member: each
//! Down member that every running member sees Down (or removed) must be gone from that view
//! within [`REMOVAL_BOUND`], and from the coordinator's table within `down_removal_margin` and
//! the bound after that, whenever the truth allowed it over that time: connectivity unchanged,
//! and every other member of the view running, unpaused and reached.

use std::collections::BTreeMap;
use std::time::Duration;

use shoal_core::{EntityType, Instant, MemberId, MemberStatus};

use crate::check::Property;
use crate::options::MembershipMode;

use super::{Simulator, TYPE};

/// Removing a Down member the survivors agree on takes failure detection (it must be
/// unreachable), a few gossip rounds to converge, and the leader's action: well under this.
const REMOVAL_BOUND: Duration = Duration::from_secs(30);

/// How often the removals are looked at.
const EVERY: Duration = Duration::from_secs(1);

/// Down members on their way out.
#[derive(Debug, Default)]
pub(super) struct Removals {
    next: Instant,
    /// Down members every running member sees Down, since when.
    agreed: BTreeMap<MemberId, Instant>,
    /// Members removed, since when: their shards must leave them.
    removed: BTreeMap<MemberId, Instant>,
}

impl Simulator {
    /// Looks at the removals if it is time to (after every event; a second apart).
    pub(super) fn watch_removals(&mut self) {
        if self.now < self.removals.next {
            return;
        }
        self.removals.next = self.now + EVERY;
        if self.opts.cluster.membership != MembershipMode::Real {
            return;
        }
        let Some(reference) = self.nodes.values().find(|n| self.is_member(n.id)) else {
            return;
        };
        let view = reference.driver.node().view().clone();
        let down: Vec<MemberId> = (view.members().iter())
            .filter(|m| m.status == MemberStatus::Down)
            .map(|m| m.id)
            .collect();
        for d in down {
            if !self.removals.agreed.contains_key(&d) && self.survivors_agree(d) {
                self.removals.agreed.insert(d, self.now);
            }
        }
        if self.removals.agreed.is_empty() && self.removals.removed.is_empty() {
            return;
        }
        let quiet = self.quiet(&view);
        let now = self.now;
        let since_change = self.survival.last_change(now);
        for (d, since) in self.removals.agreed.clone() {
            if view.member(d).is_none() {
                self.mark("a Down member the survivors agreed on was removed");
                self.removals.agreed.remove(&d);
                self.removals.removed.insert(d, now);
            } else if quiet
                && now.saturating_duration_since(since.max(since_change)) > REMOVAL_BOUND
            {
                self.removals.agreed.remove(&d);
                let detail = format!(
                    "{d} still a member {:.1}s after every running member saw it Down",
                    now.saturating_duration_since(since).as_secs_f64()
                );
                self.check.fail(now, Property::Liveness, d, detail);
            }
        }
        let margin = self.settings.down_removal_margin + REMOVAL_BOUND;
        for (d, since) in self.removals.removed.clone() {
            if now.saturating_duration_since(since.max(since_change)) <= margin {
                continue;
            }
            self.removals.removed.remove(&d);
            if !quiet {
                continue;
            }
            self.mark("a removed member's shards were looked for after the removal margin");
            if self.still_allocated_to(d) {
                let detail = format!(
                    "shards still allocated to {d} {:.1}s after it was removed",
                    now.saturating_duration_since(since).as_secs_f64()
                );
                self.check.fail(now, Property::Liveness, d, detail);
            }
        }
    }

    /// Whether every running member other than `d` sees `d` Down or removed.
    fn survivors_agree(&self, d: MemberId) -> bool {
        (self.nodes.values())
            .filter(|n| n.id != d && self.is_member(n.id))
            .all(|n| {
                let view = n.driver.node().view();
                view.status(d).is_none_or(|s| s == MemberStatus::Down)
            })
    }

    /// Whether the truth lets membership converge: every member of `view` that is not Down or
    /// Exiting runs, is not paused, and is reached by every other such member.
    fn quiet(&self, view: &shoal_core::MembershipView) -> bool {
        let live: Vec<MemberId> = (view.members().iter())
            .filter(|m| !matches!(m.status, MemberStatus::Down | MemberStatus::Exiting))
            .map(|m| m.id)
            .collect();
        let running = |id: &MemberId| {
            (self.nodes.get(&id.node)).is_some_and(|n| n.id == *id && !n.is_paused())
        };
        live.iter().all(running)
            && live.iter().all(|a| {
                live.iter()
                    .all(|b| a == b || self.net.connected(a.node, b.node))
            })
    }

    /// Whether a coordinator on a running member still allocates shards to `d`.
    fn still_allocated_to(&self, d: MemberId) -> bool {
        let t = EntityType::new(TYPE);
        (self.nodes.values())
            .filter(|n| self.is_member(n.id))
            .filter_map(|n| n.driver.node().coordinator_allocations(&t))
            .any(|table| table.values().any(|region| *region == d))
    }
}
