//! The checks at the end of a run, from the nodes' journals, the state store and what the
//! client saw: single activation across processes, per-sender order without duplicates, no
//! acknowledged increment lost, and every counter answering after the faults with the total of
//! its events in the store, which hold every increment that was acknowledged (the counters are
//! event sourced: a move, a crash or a leave loses nothing that was acknowledged).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::journal::Fact;

/// What the verification found.
#[derive(Debug, Default)]
pub(crate) struct Verdict {
    /// Counters whose activations overlapped in time.
    pub(crate) double_activations: Vec<u32>,
    /// `(entity, sender, seq)` delivered out of order or twice.
    pub(crate) order_violations: Vec<(u32, u32, u64)>,
    /// Acknowledged increments missing from the journals (counter, sender, seq).
    pub(crate) lost: Vec<(u32, u32, u64)>,
    /// Acknowledged increments missing from the journals but in the store, of counters a
    /// killed process ran: applied there, its journal line never written (the process died
    /// between the write and the line), and confirmed from the stored mark when sent again.
    pub(crate) journal_died: usize,
    /// Acknowledged increments `(counter, sender, seq)` missing from the counter's events in
    /// the store, which its total counts.
    pub(crate) missing: Vec<(u32, u32, u64)>,
    /// Increments in the store whose ask failed (a timeout, a failed write whose outcome was
    /// unknown): applied all the same. Reliable delivery is what removes these.
    pub(crate) applied_unacknowledged: usize,
    /// Increments `(counter, sender, seq)` the store holds more than once.
    pub(crate) applied_twice: Vec<(u32, u32, u64)>,
    /// Increments sent `(counter, sender, seq)` the store does not hold (with asks, those
    /// that failed and did not happen; with reliable sends, none may be).
    pub(crate) never_applied: Vec<(u32, u32, u64)>,
    /// Whether every increment sent must be applied (reliable sends).
    pub(crate) exactly_once: bool,
    /// Counters that did not answer at the end.
    pub(crate) silent: Vec<u32>,
    /// `(entity, total, stored)`: the final total differs from the number of its events in
    /// the store.
    pub(crate) mismatched: Vec<(u32, u64, u64)>,
    /// Deliveries and activations read.
    pub(crate) deliveries: usize,
    pub(crate) activations: usize,
    /// Dead letters the nodes journaled, by reason.
    pub(crate) dead_letters: BTreeMap<String, u64>,
}

impl Verdict {
    /// Whether every property held.
    pub(crate) fn passed(&self) -> bool {
        self.double_activations.is_empty()
            && self.order_violations.is_empty()
            && self.lost.is_empty()
            && self.missing.is_empty()
            && self.silent.is_empty()
            && self.mismatched.is_empty()
            && self.applied_twice.is_empty()
            && (!self.exactly_once || self.never_applied.is_empty())
    }
}

/// The inputs of the checks.
pub(crate) struct Evidence<'a> {
    /// Every journal's facts, each journal in the order written.
    pub(crate) facts: &'a [Fact],
    /// `(entity, sender, seq)` of every acknowledged increment.
    pub(crate) acknowledged: &'a [(u32, u32, u64)],
    /// `(entity, sender, seq)` of every increment sent.
    pub(crate) issued: &'a [(u32, u32, u64)],
    /// Whether every increment sent must be applied (reliable sends).
    pub(crate) exactly_once: bool,
    /// Nodes killed with SIGKILL and when (journal clock): they journal no exit.
    pub(crate) killed: &'a [(u32, u64)],
    /// When the run ended (journal clock): activations still open end here.
    pub(crate) ended: u64,
    /// The final totals.
    pub(crate) totals: &'a [Option<u64>],
    /// Each counter's events in the store, `(sender, seq)`, read after the run.
    pub(crate) stored: &'a [Vec<(u32, u64)>],
}

/// An incarnation's span: `(start, end, node)`.
type Span = (u64, u64, u32);

/// One activation of a counter on a node, with what it handled in the order it did.
struct Incarnation {
    entity: u32,
    node: u32,
    start: u64,
    /// When it stopped, or its process ended (`None`: running at the end).
    end: Option<u64>,
    /// `(sender, seq)`, in the order handled.
    deliveries: Vec<(u32, u64)>,
}

impl Incarnation {
    fn new(entity: u32, node: u32, start: u64) -> Self {
        Self {
            entity,
            node,
            start,
            end: None,
            deliveries: Vec::new(),
        }
    }
}

/// Runs every check.
pub(crate) fn verify(evidence: &Evidence<'_>) -> Verdict {
    let mut verdict = Verdict::default();
    let mut spans: BTreeMap<u32, Vec<Span>> = BTreeMap::new();
    let mut open: BTreeMap<(u32, u32), u64> = BTreeMap::new();
    let mut incarnations: Vec<Incarnation> = Vec::new();
    // The incarnation running on each node, by `(entity, node)`.
    let mut current: HashMap<(u32, u32), usize> = HashMap::new();
    let mut died: BTreeMap<u32, u64> = evidence.killed.iter().copied().collect();
    for fact in evidence.facts {
        match fact {
            &Fact::Started { entity, node, at } => {
                verdict.activations += 1;
                if let Some(start) = open.insert((entity, node), at) {
                    // A start without a stop on the same node: a restart after a panic.
                    spans.entry(entity).or_default().push((start, at, node));
                }
                current.insert((entity, node), incarnations.len());
                incarnations.push(Incarnation::new(entity, node, at));
            }
            &Fact::Stopped { entity, node, at } => {
                if let Some(&index) = current.get(&(entity, node)) {
                    incarnations[index].end.get_or_insert(at);
                }
                let start = open.remove(&(entity, node)).unwrap_or(at);
                spans.entry(entity).or_default().push((start, at, node));
            }
            &Fact::Delivered {
                entity,
                node,
                sender,
                seq,
            } => {
                verdict.deliveries += 1;
                let index = *current.entry((entity, node)).or_insert_with(|| {
                    // Handled before any start was journaled: a torn journal.
                    incarnations.push(Incarnation::new(entity, node, 0));
                    incarnations.len() - 1
                });
                incarnations[index].deliveries.push((sender, seq));
            }
            &Fact::Exited { node, at } => {
                died.entry(node).or_insert(at);
            }
            Fact::DeadLetter { reason, .. } => {
                *verdict.dead_letters.entry(reason.clone()).or_default() += 1;
            }
        }
    }
    // Incarnations still open when their process ended died with it.
    for incarnation in &mut incarnations {
        if incarnation.end.is_none()
            && open.get(&(incarnation.entity, incarnation.node)) == Some(&incarnation.start)
        {
            incarnation.end = died.get(&incarnation.node).copied();
        }
    }
    for ((entity, node), start) in open {
        let end = died.get(&node).copied().unwrap_or(evidence.ended);
        spans.entry(entity).or_default().push((start, end, node));
    }
    for (&entity, spans) in &mut spans {
        spans.sort_unstable();
        if spans.windows(2).any(|w| w[1].0 < w[0].1) {
            verdict.double_activations.push(entity);
        }
    }
    // Each counter's incarnations in the order they started (one machine, one clock): each
    // sender's increments must arrive in order, once.
    incarnations.sort_by_key(|i| (i.entity, i.start, i.node));
    let mut delivered: HashMap<(u32, u32), Vec<u64>> = HashMap::new();
    for incarnation in &incarnations {
        for &(sender, seq) in &incarnation.deliveries {
            let seqs = delivered.entry((incarnation.entity, sender)).or_default();
            if seqs.last().is_some_and(|&l| seq <= l) {
                verdict
                    .order_violations
                    .push((incarnation.entity, sender, seq));
            }
            seqs.push(seq);
        }
    }
    for seqs in delivered.values_mut() {
        seqs.sort_unstable();
    }
    let stored: Vec<BTreeSet<(u32, u64)>> = (evidence.stored.iter())
        .map(|events| events.iter().copied().collect())
        .collect();
    let mut acknowledged: Vec<BTreeSet<(u32, u64)>> = vec![BTreeSet::new(); stored.len()];
    let killed: BTreeSet<u32> = evidence.killed.iter().map(|(node, _)| *node).collect();
    let ran_on_killed: BTreeSet<u32> = (incarnations.iter())
        .filter(|i| killed.contains(&i.node))
        .map(|i| i.entity)
        .collect();
    for &(entity, sender, seq) in evidence.acknowledged {
        let found = delivered
            .get(&(entity, sender))
            .is_some_and(|seqs| seqs.binary_search(&seq).is_ok());
        let in_store = stored
            .get(entity as usize)
            .is_some_and(|events| events.contains(&(sender, seq)));
        match (found, in_store && ran_on_killed.contains(&entity)) {
            (true, _) => {}
            (false, true) => verdict.journal_died += 1,
            (false, false) => verdict.lost.push((entity, sender, seq)),
        }
        if !in_store {
            verdict.missing.push((entity, sender, seq));
        }
        if let Some(acked) = acknowledged.get_mut(entity as usize) {
            acked.insert((sender, seq));
        }
    }
    verdict.applied_unacknowledged = (stored.iter().zip(&acknowledged))
        .map(|(events, acked)| events.difference(acked).count())
        .sum();
    verdict.exactly_once = evidence.exactly_once;
    for (entity, events) in evidence.stored.iter().enumerate() {
        let mut seen = BTreeSet::new();
        for &(sender, seq) in events {
            if !seen.insert((sender, seq)) {
                verdict.applied_twice.push((entity as u32, sender, seq));
            }
        }
    }
    for &(entity, sender, seq) in evidence.issued {
        let in_store = stored
            .get(entity as usize)
            .is_some_and(|events| events.contains(&(sender, seq)));
        if !in_store {
            verdict.never_applied.push((entity, sender, seq));
        }
    }
    for (entity, total) in evidence.totals.iter().enumerate() {
        let entity = entity as u32;
        let in_store = evidence.stored.get(entity as usize).map_or(0, Vec::len) as u64;
        match total {
            None => verdict.silent.push(entity),
            Some(total) if *total != in_store => {
                verdict.mismatched.push((entity, *total, in_store));
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
        deliver_at(entity, 1, sender, seq)
    }
    fn deliver_at(entity: u32, node: u32, sender: u32, seq: u64) -> Fact {
        Fact::Delivered {
            entity,
            node,
            sender,
            seq,
        }
    }

    /// The checks, with each counter's stored events those `acknowledged` (in order), and its
    /// total their number.
    fn check(facts: &[Fact], acknowledged: &[(u32, u32, u64)], totals: &[Option<u64>]) -> Verdict {
        let mut stored = vec![Vec::new(); totals.len()];
        for &(entity, sender, seq) in acknowledged {
            if let Some(events) = stored.get_mut(entity as usize) {
                events.push((sender, seq));
            }
        }
        check_stored(facts, acknowledged, totals, &stored)
    }

    fn check_stored(
        facts: &[Fact],
        acknowledged: &[(u32, u32, u64)],
        totals: &[Option<u64>],
        stored: &[Vec<(u32, u64)>],
    ) -> Verdict {
        verify(&Evidence {
            facts,
            acknowledged,
            issued: acknowledged,
            exactly_once: true,
            killed: &[(9, 50)],
            ended: 1_000,
            totals,
            stored,
        })
    }

    #[test]
    fn a_clean_handoff_passes_and_each_violation_is_caught() {
        let clean = [
            start(0, 1, 10),
            deliver(0, 0, 1),
            stop(0, 1, 20),
            start(0, 2, 21),
            deliver_at(0, 2, 0, 2),
        ];
        // The counter moved: its new incarnation recovered the first increment.
        let verdict = check(&clean, &[(0, 0, 1), (0, 0, 2)], &[Some(2)]);
        assert!(verdict.passed(), "{verdict:?}");
        assert_eq!(
            check(&clean, &[(0, 0, 1), (0, 0, 2)], &[Some(1)]).mismatched,
            vec![(0, 1, 2)],
            "a total that forgot an event"
        );
        // An acknowledged increment the store does not hold is missing from the total.
        let verdict = check_stored(&clean, &[(0, 0, 1), (0, 0, 2)], &[Some(1)], &[vec![(0, 2)]]);
        assert_eq!(verdict.missing, vec![(0, 0, 1)]);
        // One whose ask failed but which was applied all the same is counted, not a failure.
        let verdict = check_stored(&clean, &[(0, 0, 2)], &[Some(2)], &[vec![(0, 1), (0, 2)]]);
        assert!(verdict.passed(), "{verdict:?}");
        assert_eq!(verdict.applied_unacknowledged, 1);

        // An increment stored twice, and one sent that never was, with reliable sends.
        let verdict = check_stored(
            &clean,
            &[(0, 0, 1), (0, 0, 2)],
            &[Some(3)],
            &[vec![(0, 1), (0, 1), (0, 2)]],
        );
        assert_eq!(verdict.applied_twice, vec![(0, 0, 1)]);
        assert!(!verdict.passed());
        let mut never = verify(&Evidence {
            facts: &clean,
            acknowledged: &[(0, 0, 1)],
            issued: &[(0, 0, 1), (0, 0, 2)],
            exactly_once: true,
            killed: &[],
            ended: 1_000,
            totals: &[Some(1)],
            stored: &[vec![(0, 1)]],
        });
        assert_eq!(never.never_applied, vec![(0, 0, 2)]);
        assert!(!never.passed(), "reliable sends must all be applied");
        never.exactly_once = false;
        assert!(never.passed(), "an ask that failed may not have happened");

        // Node 1 was killed after writing (0, 0, 2) and before journaling it; the next
        // incarnation confirmed it from the store's mark. Not lost, counted apart; without
        // the kill, or without the event in the store, it is lost.
        let killed_between = [start(0, 1, 10), deliver(0, 0, 1), start(0, 2, 30)];
        let evidence = |killed: &[(u32, u64)], stored: &[Vec<(u32, u64)>]| {
            verify(&Evidence {
                facts: &killed_between,
                acknowledged: &[(0, 0, 1), (0, 0, 2)],
                issued: &[(0, 0, 1), (0, 0, 2)],
                exactly_once: true,
                killed,
                ended: 1_000,
                totals: &[Some(2)],
                stored,
            })
        };
        let both = [vec![(0, 1), (0, 2)]];
        let died = evidence(&[(1, 20)], &both);
        assert_eq!((died.lost.len(), died.journal_died), (0, 1));
        assert!(died.passed(), "{died:?}");
        assert_eq!(evidence(&[], &both).lost, vec![(0, 0, 2)]);
        assert_eq!(evidence(&[(1, 20)], &[vec![(0, 1)]]).lost, vec![(0, 0, 2)]);

        let overlap = [start(0, 1, 10), start(0, 2, 15), stop(0, 1, 20)];
        assert_eq!(check(&overlap, &[], &[Some(0)]).double_activations, vec![0]);

        let reordered = [start(0, 1, 10), deliver(0, 0, 2), deliver(0, 0, 1)];
        assert_eq!(check(&reordered, &[], &[Some(2)]).order_violations.len(), 1);

        let twice = [start(0, 1, 10), deliver(0, 0, 1), deliver(0, 0, 1)];
        assert_eq!(check(&twice, &[], &[Some(2)]).order_violations.len(), 1);

        let lost = [start(0, 1, 10), deliver(0, 0, 1)];
        assert_eq!(
            check(&lost, &[(0, 0, 1), (0, 0, 2)], &[Some(2)]).lost,
            vec![(0, 0, 2)]
        );

        assert_eq!(check(&[], &[], &[None]).silent, vec![0]);
    }

    #[test]
    fn counters_of_a_killed_or_downed_node_end_with_their_process() {
        let facts = [
            start(0, 9, 10),
            deliver_at(0, 9, 0, 1),
            start(0, 2, 60),
            deliver_at(0, 2, 0, 2),
            // Node 3 was downed: it exits at 40 without stopping counter 1 first.
            start(1, 3, 10),
            Fact::Exited { node: 3, at: 40 },
            start(1, 2, 45),
        ];
        let acked = [(0, 0, 1), (0, 0, 2)];
        let verdict = check(&facts, &acked, &[Some(2), Some(0)]);
        assert!(verdict.passed(), "{verdict:?}");

        // Had node 3 lived on (auto-down: both sides live), counter 1 ran twice at once.
        let split = &facts[..5];
        let both = [split, &[start(1, 2, 45)]].concat();
        assert_eq!(
            check(&both, &acked, &[Some(2), Some(0)]).double_activations,
            vec![1]
        );
    }

    #[test]
    fn order_follows_the_incarnations_in_time_not_the_journal_files() {
        // Node 1's journal is read first, but its incarnation started last.
        let facts = [
            start(0, 1, 30),
            deliver_at(0, 1, 0, 3),
            start(0, 2, 10),
            deliver_at(0, 2, 0, 1),
            deliver_at(0, 2, 0, 2),
            stop(0, 2, 20),
        ];
        let acked = [(0, 0, 1), (0, 0, 2), (0, 0, 3)];
        let verdict = check(&facts, &acked, &[Some(3)]);
        assert!(verdict.passed(), "{verdict:?}");

        // A delivery repeated in a later incarnation is caught, and still counts as delivered.
        let again = [&facts[..], &[start(0, 3, 40), deliver_at(0, 3, 0, 3)]].concat();
        let verdict = check(&again, &acked, &[Some(3)]);
        assert_eq!(verdict.order_violations, vec![(0, 0, 3)]);
        assert!(verdict.lost.is_empty());
    }

    #[test]
    fn dead_letters_are_counted_by_reason() {
        let dead = |reason: &str| Fact::DeadLetter {
            node: 1,
            reason: reason.into(),
        };
        let facts = [
            dead("RegionStopped"),
            dead("RegionStopped"),
            dead("BufferFull"),
        ];
        let verdict = check(&facts, &[], &[]);
        assert_eq!(verdict.dead_letters["RegionStopped"], 2);
        assert_eq!(verdict.dead_letters["BufferFull"], 1);
    }
}
