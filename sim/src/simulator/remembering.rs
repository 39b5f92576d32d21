//! The simulator's side of remembering entities: store requests go to the simulated store
//! and its answers back to the nodes, and the checks of what the store and remembering owe.

use std::collections::BTreeMap;
use std::time::Duration;

use shoal_core::{EntityId, Input, Instant, MemberId, ShardId, StoreCompletion, StoreRequest};

use crate::check::Property;
use crate::entity_host::Life;
use crate::events::Ev;

use super::Simulator;

impl Simulator {
    /// A node's `Effect::Store`: submitted to the store, answered later by `Ev::Store`.
    pub(crate) fn store_request(&mut self, member: MemberId, request: StoreRequest) {
        let now = self.now;
        let Some(r) = &mut self.remembering else {
            let detail = format!("{member} sent a store request without remembering: {request:?}");
            return self.check.fail(now, Property::HostContract, member, detail);
        };
        r.submit(now, member, request);
        self.arm_store();
    }

    /// `Ev::Store`: applies what reached the store and hands out the answers due.
    pub(crate) fn handle_store_event(&mut self) {
        let now = self.now;
        let Some(r) = &mut self.remembering else {
            return;
        };
        let Some(poll) = r.poll(now) else {
            return;
        };
        for detail in poll.violations {
            self.check.fail(now, Property::Remembering, "store", detail);
        }
        for detail in poll.journal_violations {
            self.check.fail(now, Property::Persistence, "store", detail);
        }
        if poll.landed_late {
            self.mark("a persistent entity's write landed after its caller heard a timeout");
        }
        if poll.late_refused {
            self.mark("a write that timed out landed late and was refused by its sequence");
        }
        for (member, request, completion) in poll.answers {
            self.mark_completion(&request, &completion);
            if let (Some(r), StoreCompletion::Loaded(ids)) = (&mut self.remembering, &completion) {
                r.loaded(member, ids);
            }
            if matches!(completion, StoreCompletion::Failed(_)) {
                // What waits for the store (entity starts, a handoff) waits longer: a fault.
                self.stalls.fault(now);
            }
            self.log(|| crate::trace::TraceEvent::Store {
                member: member.to_string(),
                request: format!("{request:?}"),
                completion: format!("{completion:?}"),
            });
            self.input_to(
                member,
                Input::StoreCompleted {
                    request,
                    completion,
                },
            );
        }
        for (life, call, answer) in poll.state_answers {
            self.state_answered(life, call, answer);
        }
        self.arm_store();
    }

    fn mark_completion(&mut self, request: &StoreRequest, completion: &StoreCompletion) {
        match (request, completion) {
            (StoreRequest::Shards { .. }, StoreCompletion::Shards(shards))
                if !shards.is_empty() =>
            {
                self.mark("a new coordinator read remembered shards from the store");
            }
            (_, StoreCompletion::Fenced(_)) => self.mark("the store fenced an old epoch"),
            (_, StoreCompletion::Failed(_)) => self.mark("a remember-store request failed"),
            (StoreRequest::Load { .. }, StoreCompletion::Loaded(ids)) if !ids.is_empty() => {
                self.mark("a shard loaded remembered entities");
            }
            _ => {}
        }
    }

    /// Schedules `Ev::Store` for the store's next event, unless one comes earlier.
    pub(super) fn arm_store(&mut self) {
        let now = self.now;
        if let Some(next) = self.remembering.as_mut().and_then(|r| r.arm(now)) {
            self.schedule(next, Ev::Store);
        }
    }

    /// `entity` is starting on `member`: remembering must account for the start.
    pub(crate) fn remembered_starting(&mut self, member: MemberId, entity: &EntityId) {
        let Some(r) = &mut self.remembering else {
            return;
        };
        if r.owes_a_forgiven_life(entity) {
            self.mark("a forgiven entity started again by its shard (a lease regained)");
        } else if !r.accounts_for_start(member, entity) {
            let detail = format!(
                "{member} started {entity} with nothing asking for it: it was passivated (or \
                 never ran), and no message, StartEntity or load of the store came for it since"
            );
            self.check
                .fail(self.now, Property::Remembering, entity, detail);
        }
    }

    /// `member` reports its instance of `shard` stopped: nothing it wrote may still be on its
    /// way to the store.
    pub(crate) fn check_writes_settled(&mut self, member: MemberId, shard: ShardId) {
        let Some(r) = &self.remembering else {
            return;
        };
        if let Some(request) = r.write_in_flight(member, shard) {
            let detail =
                format!("{member} stopped {shard} before the store answered its write {request:?}");
            self.check
                .fail(self.now, Property::Remembering, member, detail);
        }
    }

    /// `sender` sends `entity` its message `payload`.
    pub(crate) fn remembered_told(&mut self, entity: &EntityId, payload: &shoal_core::Payload) {
        let Some(r) = &mut self.remembering else {
            return;
        };
        if let Some((sender, seq)) = crate::check::decode(payload) {
            r.told(entity, sender, seq);
        } else if crate::delivering::Reliable::decode(payload).is_some() {
            r.copy_sent(entity);
        }
    }

    /// `payload` was delivered to `entity`.
    pub(crate) fn remembered_delivered(
        &mut self,
        entity: &EntityId,
        payload: &shoal_core::Payload,
    ) {
        let Some(r) = &mut self.remembering else {
            return;
        };
        if let Some((sender, seq)) = crate::check::decode(payload) {
            r.delivered(entity, sender, seq);
        } else if crate::delivering::Reliable::decode(payload).is_some() {
            r.copy_arrived(entity);
        }
    }

    /// An entity started: remembering owes it a life until it is passivated.
    pub(crate) fn remembered_started(&mut self, entity: &EntityId) {
        let dormant = (self.remembering.as_mut()).is_some_and(|r| r.started(entity));
        if dormant {
            self.mark("a remembered entity the limit passivated started again");
        }
    }

    /// The node asked the incarnation `key` to passivate (`dormant`: for the limit).
    pub(crate) fn remembered_passivating(&mut self, key: Life, dormant: bool) {
        if let Some(r) = &mut self.remembering {
            r.passivating(key, dormant);
        }
    }

    /// The incarnation `key` stopped: if it was passivating, the entity is forgotten.
    pub(crate) fn remembered_stopped(&mut self, key: &Life) {
        if let Some(r) = &mut self.remembering {
            r.stopped(key);
        }
    }

    /// The entities remembering owes a life that do not run exactly once on the running
    /// members, with how many times they run.
    fn misremembered(&self) -> Vec<(EntityId, usize)> {
        let Some(r) = &self.remembering else {
            return Vec::new();
        };
        let mut lives: BTreeMap<&EntityId, usize> = r.owed().iter().map(|e| (e, 0)).collect();
        for (member, entity) in self.host.lives() {
            if self.is_running(*member) {
                if let Some(n) = lives.get_mut(entity) {
                    *n += 1;
                }
            }
        }
        lives
            .into_iter()
            .filter(|(_, n)| *n != 1)
            .map(|(e, n)| (e.clone(), n))
            .collect()
    }

    /// How long a shard that starts may take to recover its remembered entities: its load, then
    /// every recovery step (all of the run's entities in one shard, at worst), and a few hops.
    fn recovery_bound(&self) -> Duration {
        let steps = match self.opts.remember.as_ref().map(|r| r.recovery) {
            Some(shoal_core::RecoveryStrategy::Constant { number, every }) => {
                every * (self.opts.workload.entities as usize).div_ceil(number.max(1)) as u32
            }
            _ => Duration::ZERO,
        };
        steps + crate::bounds::store_writes(&self.opts) + crate::bounds::hop(&self.opts) * 3
    }

    /// Once the cluster is quiet after healing (traffic has stopped, rebalancing has
    /// converged): every entity that was started and not passivated runs exactly once on the
    /// running members within the recovery bound, and the store lists exactly those entities.
    /// `probed` were messaged after healing (the liveness probes): they run whether or not
    /// remembering works, so they are left out. Returns the time reached.
    pub(crate) fn await_remembered(&mut self, from: Instant, probed: &[EntityId]) -> Instant {
        if let Some(r) = &mut self.remembering {
            r.forgive(probed);
        }
        let Some(r) = &self.remembering else {
            return from;
        };
        if r.owed().is_empty() && r.disagreements(&self.ty, probed).is_empty() {
            return from;
        }
        let deadline = from + self.recovery_bound();
        let mut at = from;
        let mut wrong = self.misremembered();
        let disagree = |w: &Self| {
            (w.remembering.as_ref()).map_or_else(Vec::new, |r| r.disagreements(&w.ty, probed))
        };
        while (!wrong.is_empty() || !disagree(self).is_empty()) && at < deadline {
            at = (at + Duration::from_millis(500)).min(deadline);
            self.run_until(at);
            wrong = self.misremembered();
        }
        if wrong.is_empty() {
            self.mark("every remembered entity ran again after healing");
        }
        for (entity, detail) in disagree(self) {
            self.check
                .fail(at, Property::Remembering, &entity, detail.to_owned());
        }
        for (entity, n) in wrong {
            let detail = format!(
                "remembered, never passivated, and running {n} times {:.1}s after the cluster \
                 settled",
                at.saturating_duration_since(from).as_secs_f64()
            );
            self.check.fail(at, Property::Remembering, &entity, detail);
        }
        at
    }
}
