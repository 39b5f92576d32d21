//! `Command::Explain` judged against what happened, as location queries are judged against
//! where entities run. The truth is what the nodes reported as it happened: each allocation
//! (`ShardAllocated`), rebalance round (`Rebalance`), gate wait (`AllocationWaiting`) and dead
//! letter (`DeadLetter`), by member. An answer must hold only decisions that were taken, by
//! the member it names, about the entity asked of; and it must leave out none its logs still
//! hold: every allocation of the entity's shard by the answering coordinator's instance from
//! before the question, and every dead letter of the entity at the asked member from before
//! the answer, unless the log says it was full.

use std::borrow::Cow;
use std::collections::BTreeMap;

use shoal_core::explain::{Decision, Explanation};
use shoal_core::{AllocationGate, DeadLetterReason, EntityId, Event, Instant, MemberId, ShardId};

use crate::check::Property;
use crate::options::ExplainQueries;
use crate::simulator::Simulator;

/// What the nodes reported, for judging explanations (kept only in runs that explain).
#[derive(Debug, Default)]
pub(super) struct Decided {
    /// `(coordinator, shard)` → each allocation's region and time, in order.
    allocations: BTreeMap<(MemberId, ShardId), Vec<(MemberId, Instant)>>,
    /// When each member last started a coordinator: an instance's log starts empty.
    coordinator_started: BTreeMap<MemberId, Instant>,
    /// `(coordinator, shard)` → how many rebalance rounds moved it.
    moves: BTreeMap<(MemberId, ShardId), u32>,
    /// Each coordinator's gate waits, in order.
    gates: BTreeMap<MemberId, Vec<AllocationGate>>,
    /// `(member, entity)` → each dead letter's reason and time, in order.
    dead_letters: BTreeMap<(MemberId, EntityId), Vec<(DeadLetterReason, Instant)>>,
}

impl Decided {
    /// Notes what `member` reported at `now`, if it is a decision an explanation may give.
    pub(super) fn observe(&mut self, now: Instant, member: MemberId, event: &Event) {
        match event {
            Event::ShardAllocated { shard, region, .. } => {
                let at = self.allocations.entry((member, *shard)).or_default();
                at.push((*region, now));
            }
            Event::CoordinatorStarted { .. } => {
                self.coordinator_started.insert(member, now);
            }
            Event::Rebalance { shards, .. } => {
                for shard in shards {
                    *self.moves.entry((member, *shard)).or_default() += 1;
                }
            }
            Event::AllocationWaiting { gate, .. } => {
                self.gates.entry(member).or_default().push(gate.clone());
            }
            Event::DeadLetter { entity, reason, .. } => {
                let letters = self
                    .dead_letters
                    .entry((member, entity.clone()))
                    .or_default();
                letters.push((*reason, now));
            }
            _ => {}
        }
    }

    /// What is wrong with `explanation`, answered by `member` at `now` to a question sent at
    /// `asked`, if anything.
    fn judge(
        &self,
        now: Instant,
        member: MemberId,
        asked: Instant,
        explanation: &Explanation,
    ) -> Result<(), String> {
        let shard = explanation.shard;
        let mut allocated: Vec<MemberId> = Vec::new();
        let mut dead: Vec<DeadLetterReason> = Vec::new();
        for record in &explanation.records {
            let by = record.by;
            if by != member && Some(by) != explanation.coordinator {
                return Err(format!(
                    "{record}: neither the asked member nor its coordinator"
                ));
            }
            let taken = match &record.decision {
                Decision::Allocated {
                    shard: s, region, ..
                } => {
                    allocated.push(*region);
                    *s == shard
                        && (self.allocations.get(&(by, shard)))
                            .is_some_and(|a| a.iter().any(|(r, _)| r == region))
                }
                Decision::Rebalanced { shard: s, .. } => {
                    *s == shard && self.moves.contains_key(&(by, shard))
                }
                Decision::GateWaited { shards, gate, .. } => {
                    shards.contains(&shard)
                        && (self.gates.get(&by)).is_some_and(|g| g.contains(gate))
                }
                Decision::DeadLettered { entity, reason, .. } => {
                    dead.push(*reason);
                    *entity == explanation.entity
                        && by == member
                        && (self.dead_letters.get(&(by, entity.clone())))
                            .is_some_and(|d| d.iter().any(|(r, _)| r == reason))
                }
                other => return Err(format!("an unknown decision {other:?}")),
            };
            if !taken {
                return Err(format!("{record}: not what happened"));
            }
        }
        let full = |m: MemberId| explanation.forgotten_before.iter().any(|(f, _)| *f == m);
        if let Some(c) = explanation.coordinator.filter(|c| !full(*c)) {
            let since = self.coordinator_started.get(&c).copied();
            let expected: Vec<MemberId> = (self.allocations.get(&(c, shard)).into_iter())
                .flatten()
                .filter(|(_, at)| *at < asked && since.is_none_or(|s| s < *at))
                .map(|(region, _)| *region)
                .collect();
            let missing = expected.iter().any(|r| !allocated.contains(r));
            if missing || allocated.len() < expected.len() {
                return Err(format!(
                    "{c} allocated {shard} to [{}] before the question; the answer gives [{}]",
                    names(&expected),
                    names(&allocated)
                ));
            }
        }
        if !full(member) {
            let letters = (self.dead_letters.get(&(member, explanation.entity.clone())))
                .map(|d| d.iter().filter(|(_, at)| *at < now).count())
                .unwrap_or(0);
            if dead.len() < letters {
                return Err(format!(
                    "{member} dead-lettered {letters} letters to {} before the answer; it \
                     gives {}",
                    explanation.entity,
                    dead.len()
                ));
            }
        }
        Ok(())
    }
}

impl Simulator {
    /// Judges `member`'s explanation, answering the question sent at `asked`.
    pub(super) fn check_explanation(
        &mut self,
        member: MemberId,
        asked: Instant,
        explanation: &Explanation,
    ) {
        let Some(decided) = &self.truth else {
            return;
        };
        let mut explanation = Cow::Borrowed(explanation);
        if self.opts.workload.explain == ExplainQueries::DropNewest {
            let newest = (explanation.records.iter().enumerate())
                .min_by_key(|(_, r)| r.ago)
                .map(|(i, _)| i);
            if let Some(i) = newest {
                explanation.to_mut().records.remove(i);
            }
        }
        match decided.judge(self.now, member, asked, &explanation) {
            Ok(()) => self.mark(if explanation.records.is_empty() {
                "an explanation held no decision"
            } else {
                "an explanation's decisions were what happened"
            }),
            Err(detail) => {
                let entity = explanation.entity.clone();
                self.check
                    .fail(self.now, Property::CommandReply, entity, detail);
            }
        }
    }
}

fn names(members: &[MemberId]) -> String {
    let names: Vec<String> = members.iter().map(ToString::to_string).collect();
    names.join(", ")
}
