//! The coordinator's timers: removal margins, the gate, `HostShard` resends, handoff
//! deadlines, the rebalance tick, query deadlines, the store's retries and its lease.

use crate::coordinator::Coordinator;
use crate::effect::Effects;
use crate::id::MemberId;
use crate::members::MembershipView;
use crate::time::{Instant, NamedDeadline, soonest};

impl Coordinator {
    /// Fires due timers: removal margins, the gate, `HostShard` resends, handoff deadlines,
    /// the rebalance tick and query deadlines.
    pub(crate) fn handle_timeout(
        &mut self,
        now: Instant,
        view: &MembershipView,
        out: &mut Effects,
    ) {
        self.handle_lease_timeout(now, view, out);
        let expired: Vec<MemberId> = self
            .terminating
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(r, _)| *r)
            .collect();
        for region in expired {
            self.terminating.remove(&region);
            self.remove_region(now, view, region, out);
        }
        self.recent_removals
            .retain(|_, at| now < *at + self.removal_margin);
        self.poll_store(now, out);
        self.try_open_gate(now, view, out);
        self.resend_host_shards(now, out);
        self.expire_handoffs(now, view, out);
        if self.gate_open && self.next_rebalance <= now {
            self.next_rebalance = now + self.settings.rebalance_interval;
            self.rebalance(now, view, out);
        }
        self.expire_stats_queries(now, out);
    }

    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        soonest(&self.deadlines())
    }

    /// Each of the coordinator's timers with its name (for [`Coordinator::poll_timeout`] and
    /// for naming the timer of a busy loop).
    pub(crate) fn deadlines(&self) -> [NamedDeadline; 9] {
        let margin = self.removal_margin;
        [
            ("rebalance", self.gate_open.then_some(self.next_rebalance)),
            (
                "register request",
                self.next_register_request.filter(|_| !self.gate_open),
            ),
            (
                "terminating region",
                self.terminating.values().min().copied(),
            ),
            (
                "unacknowledged allocation",
                // Resent only while the lease (if any) is held.
                (self.unacked.next()).filter(|_| self.lease.as_ref().is_none_or(|l| l.is_held())),
            ),
            ("handoff", self.handoffs.values().map(|h| h.deadline).min()),
            ("stats query", self.stats.values().map(|q| q.deadline).min()),
            ("store timeout", self.store_timeout()),
            (
                "removal margin",
                self.recent_removals.values().map(|at| *at + margin).min(),
            ),
            ("lease", self.lease_timeout()),
        ]
    }
}
