//! The allocation gate (the README's protocol decision 1): a coordinator that has no store learns where
//! shards live from the regions' registrations, so it allocates a shard nobody reported only
//! once every member that hosts the type has registered, no member was removed so recently
//! that it may still run shards, and enough regions registered. While it waits it says so: an
//! event when what it waits for changes, a warning every retry interval, and its state on
//! request.

use crate::coordinator::Coordinator;
use crate::effect::{Effects, Event};
use crate::explain::Decision;
use crate::id::ShardId;
use crate::members::{Member, MemberStatus, MembershipView};
use crate::message::{AllocationGate, Body, CoordinatorState};
use crate::time::Instant;

impl Coordinator {
    /// What the gate waits for now. Joining members count: the leader may have moved one Up
    /// in views this one has not caught up with, and an earlier coordinator may have allocated
    /// shards to it there (simulator seed 10919: a coordinator that took over allocated a
    /// shard a member it still saw Joining was running).
    pub(super) fn gate(&self, view: &MembershipView) -> AllocationGate {
        let unregistered = view
            .members()
            .iter()
            .filter(|m| self.awaits_registration(m))
            .map(|m| m.id)
            .collect();
        AllocationGate {
            open: self.gate_open,
            unregistered,
            recently_removed: self.recent_removals.keys().copied().collect(),
            registered: count(self.regions.len()),
            needed: count(self.min_registered_regions),
            store_pending: !self.store_ready(),
            lease_pending: self.lease.as_ref().is_some_and(|l| !l.is_held()),
        }
    }

    /// The coordinator's state, for operators.
    pub(super) fn state(&self, view: &MembershipView) -> CoordinatorState {
        CoordinatorState {
            coordinator: self.me,
            gate: self.gate(view),
            allocated: count(self.shards.len()),
            handing_off: self.handoffs.keys().copied().collect(),
            waiting: self.waiting.keys().copied().collect(),
        }
    }

    /// Opens the gate if nothing holds it any more; otherwise asks the members that have not
    /// registered to do so (every retry interval) and reports what allocation waits for.
    pub(super) fn try_open_gate(&mut self, now: Instant, view: &MembershipView, out: &mut Effects) {
        if self.gate_open {
            return;
        }
        // Asked on every view change while the gate is closed (a thousand of them while a
        // large cluster forms): decided without building the gate's lists, which are built
        // only to ask for registrations or to report.
        // With remembering on, the store's list of shards comes first: it names shards to
        // start, and the epochs to allocate above.
        let ready = self.recent_removals.is_empty()
            && count(self.regions.len()) >= count(self.min_registered_regions)
            && self.store_ready()
            && self.lease_allows(now)
            && !view.members().iter().any(|m| self.awaits_registration(m));
        #[cfg(feature = "fault-injection")]
        let ready = ready || self.settings.broken_coordinator_gate;
        if ready {
            self.gate_open = true;
            self.reported_gate = None;
            self.next_register_request = None;
            self.next_rebalance = now + self.settings.rebalance_interval;
            for region in self.shutting_down.clone() {
                self.hand_off_region(now, region, out);
            }
            self.serve_waiting(now, view, out);
            return;
        }
        let joining = |m: &&Member| m.status == MemberStatus::Joining;
        if view
            .members()
            .iter()
            .filter(joining)
            .any(|m| self.awaits_registration(m))
        {
            crate::probe::hit("coordinator: the gate waits for a Joining member");
        }
        let ask = self.next_register_request.is_some_and(|at| at <= now);
        if !ask && !self.has_waiting_requests() {
            return; // nothing to ask for, nothing to report
        }
        let gate = self.gate(view);
        if ask {
            self.next_register_request = Some(now + self.settings.retry_interval);
            // A Joining member's registration is refused until it is Up here: its region
            // retries by itself, and is asked once it is Up.
            for &member in &gate.unregistered {
                if view
                    .status(member)
                    .is_some_and(MemberStatus::may_host_shards)
                {
                    out.send(member, &self.entity_type, Body::RegisterRequest);
                }
            }
            if self.has_waiting_requests() {
                tracing::warn!(
                    entity_type = %self.entity_type,
                    shards = self.waiting.len(),
                    unregistered = ?gate.unregistered,
                    recently_removed = ?gate.recently_removed,
                    registered = gate.registered,
                    needed = gate.needed,
                    "shard allocation waits: every member that hosts the type must register \
                     (has its region been started on all of them?), recently removed members \
                     must be past the removal margin",
                );
            }
        }
        self.report_gate(now, &gate, out);
    }

    /// Tells the application what allocation waits for, when requests wait and that changed.
    pub(super) fn report_gate(&mut self, now: Instant, gate: &AllocationGate, out: &mut Effects) {
        if self.gate_open
            || !self.has_waiting_requests()
            || self.reported_gate.as_ref() == Some(gate)
        {
            return;
        }
        self.reported_gate = Some(gate.clone());
        let waiting: Vec<ShardId> = self.waiting.keys().copied().collect();
        (self.decisions).record(now, Decision::gate_waited(&waiting, gate.clone()));
        out.event(Event::AllocationWaiting {
            entity_type: self.entity_type.clone(),
            gate: gate.clone(),
            shards: self.waiting.keys().copied().collect(),
        });
    }

    /// Whether the gate waits for `member` to register: it hosts the type, may run shards and
    /// has not registered.
    fn awaits_registration(&self, member: &Member) -> bool {
        member.hosts_type(&self.entity_type, self.role.as_deref())
            && may_have_shards(member.status)
            && !self.is_registered(member.id)
    }

    /// Whether requests for shards wait on the gate.
    fn has_waiting_requests(&self) -> bool {
        !self.waiting.is_empty()
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Whether a member in `status` may run shards as far as any member knows: Up, Leaving or
/// Exiting here, Joining here but perhaps Up in a view that is ahead, or Down and not yet
/// removed (its process may still run).
fn may_have_shards(status: MemberStatus) -> bool {
    status.may_host_shards() || matches!(status, MemberStatus::Joining | MemberStatus::Down)
}
