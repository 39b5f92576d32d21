//! The checks at the end of a run, from the nodes' journals and what the client saw:
//! single activation across processes, per-sender order without duplicates, no acknowledged
//! increment lost (except on counters whose state died with the killed process), and every
//! counter answering after the faults.

use std::collections::{BTreeMap, BTreeSet};

use crate::journal::Fact;

/// What the verification found.
#[derive(Debug, Default)]
pub(crate) struct Verdict {
    /// Counters whose activations overlapped in time.
    pub(crate) double_activations: Vec<u32>,
    /// `(entity, sender)` pairs delivered out of order or twice.
    pub(crate) order_violations: Vec<(u32, u32, u64)>,
    /// Acknowledged increments missing from the journals (counter, sender, seq).
    pub(crate) lost: Vec<(u32, u32, u64)>,
    /// Counters that lived on the killed process and restarted without their state.
    pub(crate) restarted: usize,
    /// Counters that did not answer at the end.
    pub(crate) silent: Vec<u32>,
    /// Counters whose final total is below their acknowledged increments (state not lost).
    pub(crate) short: Vec<(u32, u64, u64)>,
    /// Deliveries and activations read.
    pub(crate) deliveries: usize,
    pub(crate) activations: usize,
}

impl Verdict {
    /// Whether every property held.
    pub(crate) fn passed(&self) -> bool {
        self.double_activations.is_empty()
            && self.order_violations.is_empty()
            && self.lost.is_empty()
            && self.silent.is_empty()
            && self.short.is_empty()
    }
}

/// The inputs of the checks.
pub(crate) struct Evidence<'a> {
    pub(crate) facts: &'a [Fact],
    /// `(entity, sender, seq)` of every acknowledged increment.
    pub(crate) acknowledged: &'a [(u32, u32, u64)],
    /// The killed node and when (journal clock), if any.
    pub(crate) killed: Option<(u32, u64)>,
    /// When the run ended (journal clock): activations still open end here.
    pub(crate) ended: u64,
    /// The final totals.
    pub(crate) totals: &'a [Option<u64>],
}

/// Runs every check.
pub(crate) fn verify(evidence: &Evidence<'_>) -> Verdict {
    let mut verdict = Verdict::default();
    let mut intervals: BTreeMap<u32, Vec<(u64, u64, u32)>> = BTreeMap::new();
    let mut open: BTreeMap<(u32, u32), u64> = BTreeMap::new();
    let mut delivered: BTreeSet<(u32, u32, u64)> = BTreeSet::new();
    let mut last_seq: BTreeMap<(u32, u32), u64> = BTreeMap::new();
    for fact in evidence.facts {
        match *fact {
            Fact::Started { entity, node, at } => {
                verdict.activations += 1;
                if let Some(start) = open.insert((entity, node), at) {
                    // A start without a stop on the same node: a restart after a panic.
                    intervals.entry(entity).or_default().push((start, at, node));
                }
            }
            Fact::Stopped { entity, node, at } => {
                let start = open.remove(&(entity, node)).unwrap_or(at);
                intervals.entry(entity).or_default().push((start, at, node));
            }
            Fact::Delivered {
                entity,
                sender,
                seq,
                ..
            } => {
                verdict.deliveries += 1;
                let last = last_seq.entry((entity, sender)).or_default();
                if seq <= *last || !delivered.insert((entity, sender, seq)) {
                    verdict.order_violations.push((entity, sender, seq));
                }
                *last = (*last).max(seq);
            }
        }
    }
    let mut on_killed = BTreeSet::new();
    for ((entity, node), start) in open {
        let end = match evidence.killed {
            Some((killed, at)) if killed == node => {
                on_killed.insert(entity);
                at
            }
            _ => evidence.ended,
        };
        intervals
            .entry(entity)
            .or_default()
            .push((start, end, node));
    }
    for (entity, mut spans) in intervals {
        spans.sort_unstable();
        if spans.windows(2).any(|w| w[1].0 < w[0].1) {
            verdict.double_activations.push(entity);
        }
    }
    verdict.restarted = on_killed.len();
    let mut acknowledged: BTreeMap<u32, u64> = BTreeMap::new();
    for &(entity, sender, seq) in evidence.acknowledged {
        *acknowledged.entry(entity).or_default() += 1;
        if !delivered.contains(&(entity, sender, seq)) {
            verdict.lost.push((entity, sender, seq));
        }
    }
    for (entity, total) in evidence.totals.iter().enumerate() {
        let entity = entity as u32;
        match total {
            None => verdict.silent.push(entity),
            Some(total) if !on_killed.contains(&entity) => {
                let acked = acknowledged.get(&entity).copied().unwrap_or(0);
                if *total < acked {
                    verdict.short.push((entity, *total, acked));
                }
            }
            Some(_) => {}
        }
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(entity: u32, node: u32, at: u64) -> Fact {
        Fact::Started { entity, node, at }
    }
    fn stop(entity: u32, node: u32, at: u64) -> Fact {
        Fact::Stopped { entity, node, at }
    }
    fn deliver(entity: u32, sender: u32, seq: u64) -> Fact {
        Fact::Delivered {
            entity,
            node: 0,
            sender,
            seq,
        }
    }

    fn check(facts: &[Fact], acknowledged: &[(u32, u32, u64)], totals: &[Option<u64>]) -> Verdict {
        verify(&Evidence {
            facts,
            acknowledged,
            killed: Some((9, 50)),
            ended: 1_000,
            totals,
        })
    }

    #[test]
    fn a_clean_handoff_passes_and_each_violation_is_caught() {
        let clean = [
            start(0, 1, 10),
            deliver(0, 0, 1),
            stop(0, 1, 20),
            start(0, 2, 21),
            deliver(0, 0, 2),
        ];
        let verdict = check(&clean, &[(0, 0, 1), (0, 0, 2)], &[Some(2)]);
        assert!(verdict.passed(), "{verdict:?}");

        let overlap = [start(0, 1, 10), start(0, 2, 15), stop(0, 1, 20)];
        assert_eq!(check(&overlap, &[], &[Some(0)]).double_activations, vec![0]);

        let reordered = [start(0, 1, 10), deliver(0, 0, 2), deliver(0, 0, 1)];
        assert_eq!(check(&reordered, &[], &[Some(2)]).order_violations.len(), 1);

        let lost = [start(0, 1, 10), deliver(0, 0, 1)];
        assert_eq!(
            check(&lost, &[(0, 0, 1), (0, 0, 2)], &[Some(1)]).lost,
            vec![(0, 0, 2)]
        );

        assert_eq!(check(&[], &[], &[None]).silent, vec![0]);
    }

    #[test]
    fn counters_of_the_killed_node_may_restart_empty() {
        let facts = [
            start(0, 9, 10),
            deliver(0, 0, 1),
            start(0, 2, 60),
            deliver(0, 0, 2),
        ];
        let verdict = check(&facts, &[(0, 0, 1), (0, 0, 2)], &[Some(1)]);
        assert!(verdict.passed(), "{verdict:?}");
        assert_eq!(verdict.restarted, 1);
    }
}
