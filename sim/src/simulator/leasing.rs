//! The simulator's side of shard leases: lease calls go to the simulated lease store and its
//! answers back to the nodes, and every entity start and delivery is checked against the
//! store's grants.

use shoal_core::lease::{LeaseCall, LeaseName};
use shoal_core::{EntityId, Input, MemberId, ShardId};

use crate::check::Property;
use crate::events::Ev;

use super::Simulator;

impl Simulator {
    /// A node's `Effect::Lease`: submitted to the lease store, answered later by `Ev::Lease`.
    pub(crate) fn lease_call(&mut self, member: MemberId, call: LeaseCall) {
        let now = self.now;
        let Some(leasing) = &mut self.leasing else {
            let detail = format!("{member} called a lease store the run has none of: {call:?}");
            return self.check.fail(now, Property::HostContract, member, detail);
        };
        leasing.submit(now, member, call);
        self.arm_lease();
    }

    /// `Ev::Lease`: applies what reached the store and hands out the answers due.
    pub(crate) fn handle_lease_event(&mut self) {
        let now = self.now;
        let Some(answers) = self.leasing.as_mut().and_then(|l| l.poll(now)) else {
            return;
        };
        for (member, call, answer) in answers {
            if matches!(answer, shoal_core::lease::LeaseAnswer::Failed(_)) {
                // What waits for the lease (entity starts, a handoff) waits longer: a fault.
                self.stalls.fault(now);
            }
            self.log(|| crate::trace::TraceEvent::Store {
                member: member.to_string(),
                request: lease_call(&call),
                completion: format!("{answer:?}"),
            });
            self.input_to(member, Input::LeaseAnswered { call, answer });
        }
        self.arm_lease();
    }

    fn arm_lease(&mut self) {
        let now = self.now;
        if let Some(next) = self.leasing.as_mut().and_then(|l| l.arm(now)) {
            self.schedule(next, Ev::Lease);
        }
    }

    /// `member` starts or delivers to `entity`: with shard leases, the store's grant of the
    /// entity's shard's lease to `member` must run now.
    pub(crate) fn check_lease_holder(&mut self, member: MemberId, entity: &EntityId) {
        let Some(leasing) = self.leasing.as_ref().filter(|_| self.opts.lease.is_some()) else {
            return;
        };
        let name = LeaseName::Shard {
            entity_type: self.ty.clone(),
            shard: shoal_core::shard_of(entity, self.shards),
        };
        if let Err(detail) = leasing.check_holder(self.now, member, &name) {
            self.check.fail(self.now, Property::Lease, entity, detail);
        }
    }

    /// `member`'s coordinator allocated `shard`: with a coordinator lease, the store's grant
    /// of the type's coordinator lease to `member` must run now.
    pub(crate) fn check_coordinator_lease(&mut self, member: MemberId, shard: ShardId) {
        let coordinator = self.opts.lease.as_ref().is_some_and(|l| l.coordinator);
        let Some(leasing) = self.leasing.as_ref().filter(|_| coordinator) else {
            return;
        };
        let name = LeaseName::Coordinator {
            entity_type: self.ty.clone(),
        };
        match leasing.check_holder(self.now, member, &name) {
            Ok(()) => self.mark("a coordinator holding its lease allocated a shard"),
            Err(detail) => {
                let detail = format!("allocating {shard}: {detail}");
                self.check.fail(self.now, Property::Lease, member, detail);
            }
        }
    }
}

/// How traces show a lease call: the lease, and what is asked (when an acquire was sent).
fn lease_call(call: &LeaseCall) -> String {
    match call {
        LeaseCall::Acquire { name, sent, .. } => format!("lease {name} acquire sent {sent}"),
        LeaseCall::Release { name, token, .. } => format!("lease {name} release {}", token.0),
    }
}
