//! Planning a run's fault schedule from its options: each enabled fault kind recurs at random
//! intervals around its mean, an operator's commands, and faults timed against the
//! membership's decisions, all drawn from the seed.

use std::collections::BTreeSet;
use std::time::Duration;

use shoal_core::NodeId;

use crate::bounds::STABLE_AFTER;
use crate::options::{Family, Options};
use crate::rng::{SimRng, Stream};
use crate::schedule::{Act, Action, MAX_PAUSE, Schedule};

impl Schedule {
    /// The schedule `options` describe: each enabled fault kind recurs at random intervals
    /// around its mean, with random targets, all drawn from the seed.
    pub fn plan(o: &Options) -> Self {
        let mut r = SimRng::of(o.seed, Stream::Schedule);
        // Whole milliseconds, so that a schedule reads back exactly as it prints.
        let ms = |r: &mut SimRng, lo: Duration, hi: Duration| {
            Duration::from_millis(r.duration(lo, hi).as_millis() as u64)
        };
        let f = &o.faults;
        let kinds: [(Option<Duration>, Kind); 9] = [
            (f.crash_every, Kind::Crash),
            (f.partition_every, Kind::Partition),
            (f.break_every, Kind::Break),
            (f.leave_every, Kind::Leave),
            (f.join_every, Kind::Join),
            (f.crash_oldest_every, Kind::CrashOldest),
            (f.clog_every, Kind::Clog),
            (f.pause_every, Kind::Pause),
            (f.full_restart_every, Kind::FullRestart),
        ];
        let mut times = Vec::new();
        for (every, kind) in kinds {
            let Some(every) = every else { continue };
            let mut at = Duration::ZERO;
            loop {
                at += ms(&mut r, every / 2, every * 3 / 2);
                if at >= o.duration {
                    break;
                }
                times.push((at, kind));
            }
        }
        times.sort();
        // Targets are drawn in time order, among the addresses that exist by then.
        let mut known = o.cluster.nodes;
        let mut shards = o.cluster.shards;
        let mut actions = Vec::with_capacity(times.len());
        for (at, kind) in times {
            let node = |r: &mut SimRng| NodeId(r.range(1, known));
            let secs = Duration::from_secs;
            let act = match kind {
                Kind::Crash => Act::Crash {
                    node: node(&mut r),
                    restart_after: ms(&mut r, secs(10), secs(40)),
                },
                Kind::CrashOldest => Act::CrashOldest {
                    restart_after: ms(&mut r, secs(10), secs(40)),
                },
                Kind::Partition if o.family == Family::EqualHalves => Act::Partition {
                    side: half_of(&mut r, known),
                    one_way: false,
                    heal_after: ms(&mut r, secs(5), secs(40)),
                },
                Kind::Partition => {
                    // A random non-empty proper subset of the addresses known by then.
                    let mut side: BTreeSet<NodeId> =
                        (1..=known).filter(|_| r.chance(0.5)).map(NodeId).collect();
                    let pick = node(&mut r);
                    if side.is_empty() {
                        side.insert(pick);
                    } else if side.len() as u64 == known {
                        side.remove(&pick);
                    }
                    Act::Partition {
                        side,
                        one_way: r.chance(0.3),
                        heal_after: ms(&mut r, secs(5), secs(60)),
                    }
                }
                Kind::Break => Act::Break {
                    a: node(&mut r),
                    b: node(&mut r),
                },
                Kind::Leave => Act::Leave {
                    node: node(&mut r),
                    by: None,
                },
                Kind::Join => {
                    known = (known + 1).min(o.cluster.max_nodes);
                    Act::Join
                }
                Kind::Clog => Act::Clog {
                    node: node(&mut r),
                    peer: r.chance(0.5).then(|| node(&mut r)),
                    lasts: ms(&mut r, Duration::from_millis(50), secs(3)),
                },
                Kind::Pause => Act::Pause {
                    node: node(&mut r),
                    lasts: ms(&mut r, Duration::from_millis(50), MAX_PAUSE),
                },
                Kind::FullRestart => {
                    // Fewer shards or more, never the same count: a third to three times.
                    let lower = r.chance(0.5) && shards > 1;
                    shards = if lower {
                        r.range(u64::from(shards / 3).max(1), u64::from(shards - 1)) as u32
                    } else {
                        r.range(u64::from(shards + 1), u64::from(shards * 3)) as u32
                    };
                    Act::FullRestart {
                        shards,
                        restart_after: ms(&mut r, secs(1), secs(20)),
                    }
                }
            };
            actions.push(Action { at, act });
        }
        plan_operators(o, &mut actions);
        plan_edges(o, &mut actions);
        crate::reach::plan_reach(o, &mut actions);
        plan_store_outages(o, &mut actions);
        Self(actions)
    }
}

/// Half of the addresses `1..=known` (rounded down), drawn without replacement.
fn half_of(r: &mut SimRng, known: u64) -> BTreeSet<NodeId> {
    let mut left: Vec<NodeId> = (1..=known).map(NodeId).collect();
    let mut side = BTreeSet::new();
    while side.len() < left.len() {
        let at = r.below(left.len() as u64) as usize;
        side.insert(left.swap_remove(at));
    }
    side
}

/// An operator's commands: some leaves are asked for by another member, and members are
/// downed now and then. Drawn from a stream of their own, so that the schedule planned above
/// stays what it was for every seed.
fn plan_operators(o: &Options, actions: &mut Vec<Action>) {
    let mut r = SimRng::of(o.seed, Stream::Operators);
    let addresses = |at: Duration, actions: &[Action]| {
        let joins = actions
            .iter()
            .filter(|a| a.at <= at && a.act == Act::Join)
            .count() as u64;
        (o.cluster.nodes + joins).min(o.cluster.max_nodes)
    };
    let mut downs = Vec::new();
    if let Some(every) = o.faults.down_every {
        let mut at = Duration::ZERO;
        loop {
            at += Duration::from_millis(r.duration(every / 2, every * 3 / 2).as_millis() as u64);
            if at >= o.duration {
                break;
            }
            let known = addresses(at, actions);
            let node = NodeId(r.range(1, known));
            let by = NodeId(r.range(1, known));
            downs.push(Action {
                at,
                act: Act::Down { node, by },
            });
        }
    }
    for i in 0..actions.len() {
        let known = addresses(actions[i].at, actions);
        if let Act::Leave { by, .. } = &mut actions[i].act {
            *by = r.chance(0.3).then(|| NodeId(r.range(1, known)));
        }
    }
    actions.extend(downs);
    actions.sort_by_key(|a| a.at);
}

/// After most partitions into halves, while downing decides (failure detection and
/// `stable_after` on), the member holding a lease pauses: the downing lease's holder decides
/// then, and a shard lease's holder must not serve past its validity when it resumes.
fn plan_holder_pauses(o: &Options, actions: &mut Vec<Action>) {
    let mut r = SimRng::of(o.seed, Stream::Edges);
    let mut pauses = Vec::new();
    for action in actions.iter() {
        let Act::Partition { .. } = action.act else {
            continue;
        };
        let after = STABLE_AFTER + Duration::from_millis(r.range(0, 6_000));
        let lasts = Duration::from_millis(r.range(500, MAX_PAUSE.as_millis() as u64));
        if r.chance(0.7) && action.at + after < o.duration {
            pauses.push(Action {
                at: action.at + after,
                act: Act::PauseHolder { lasts },
            });
        }
    }
    actions.extend(pauses);
    actions.sort_by_key(|a| a.at);
}

/// Faults timed against the membership's decisions, which random times rarely hit: after a
/// partition, around when downing decides (failure detection plus `stable_after`), the
/// partition moves or a member goes quiet (pause, clog); right after a leave, while the member
/// is Leaving or Exiting, a partition. Drawn from a stream of their own, in the families with
/// partitions.
fn plan_edges(o: &Options, actions: &mut Vec<Action>) {
    if o.family == Family::EqualHalves {
        plan_holder_pauses(o, actions);
        return;
    }
    if !matches!(
        o.family,
        Family::Swarm | Family::Partitions | Family::FlappingLinks
    ) {
        return;
    }
    let mut r = SimRng::of(o.seed, Stream::Edges);
    let ms = |r: &mut SimRng, lo: Duration, hi: Duration| {
        Duration::from_millis(r.duration(lo, hi).as_millis() as u64)
    };
    let secs = Duration::from_secs;
    let decision = STABLE_AFTER;
    let mut edges = Vec::new();
    for action in actions.iter() {
        let known = o.cluster.nodes.max(2);
        let node = |r: &mut SimRng| NodeId(r.range(1, known));
        let side = |r: &mut SimRng| -> BTreeSet<NodeId> {
            let mut side: BTreeSet<NodeId> =
                (1..=known).filter(|_| r.chance(0.5)).map(NodeId).collect();
            let pick = NodeId(r.range(1, known));
            if side.is_empty() {
                side.insert(pick);
            } else if side.len() as u64 == known {
                side.remove(&pick);
            }
            side
        };
        match action.act {
            Act::Partition { .. } if r.chance(0.5) => {
                // From the earliest decision on: a member going quiet just before downing
                // decides is the case `in_doubt` postpones for.
                let at = action.at + decision + ms(&mut r, Duration::ZERO, secs(7));
                if at >= o.duration {
                    continue;
                }
                let act = match r.below(3) {
                    0 => {
                        edges.push(Action { at, act: Act::Heal });
                        Act::Partition {
                            side: side(&mut r),
                            one_way: r.chance(0.3),
                            heal_after: ms(&mut r, secs(5), secs(30)),
                        }
                    }
                    1 => Act::Pause {
                        node: node(&mut r),
                        lasts: ms(&mut r, Duration::from_millis(500), MAX_PAUSE),
                    },
                    _ => Act::Clog {
                        node: node(&mut r),
                        peer: None,
                        lasts: ms(&mut r, Duration::from_millis(500), secs(3)),
                    },
                };
                edges.push(Action { at, act });
            }
            Act::Leave { .. } if r.chance(0.4) => {
                let at = action.at + ms(&mut r, Duration::from_millis(300), secs(6));
                if at < o.duration {
                    let act = Act::Partition {
                        side: side(&mut r),
                        one_way: r.chance(0.3),
                        heal_after: ms(&mut r, secs(5), secs(40)),
                    };
                    edges.push(Action { at, act });
                }
            }
            _ => {}
        }
    }
    actions.extend(edges);
    actions.sort_by_key(|a| a.at);
}

/// Store outages timed against coordinator moves, which outages at random times rarely
/// overlap: one that begins shortly before a leave (or the oldest member's crash) and outlasts
/// the move fails the loads of shards allocated just before it, so the new coordinator may read
/// the store's epochs before those loads land, and allocate below them; the store then fences
/// the new instance. Remembering runs only, drawn from a stream of their own.
fn plan_store_outages(o: &Options, actions: &mut Vec<Action>) {
    if !o.remember.as_ref().is_some_and(|m| m.outages_around_moves) {
        return;
    }
    let mut r = SimRng::of(o.seed, Stream::Outages);
    let ms = |r: &mut SimRng, lo: Duration, hi: Duration| {
        Duration::from_millis(r.duration(lo, hi).as_millis() as u64)
    };
    let secs = Duration::from_secs;
    let mut outages = Vec::new();
    for action in actions.iter() {
        let moves = matches!(action.act, Act::Leave { .. } | Act::CrashOldest { .. });
        if !moves || !r.chance(0.5) {
            continue;
        }
        let at = action
            .at
            .saturating_sub(ms(&mut r, Duration::ZERO, secs(4)));
        let lasts = (action.at - at) + ms(&mut r, secs(3), secs(12));
        let lasts = lasts.min(o.duration.saturating_sub(at));
        outages.push(Action {
            at,
            act: Act::StoreOutage { lasts },
        });
    }
    actions.extend(outages);
    actions.sort_by_key(|a| a.at);
}

#[derive(Clone, Copy, Debug, Eq, Ord, PartialEq, PartialOrd)]
enum Kind {
    Crash,
    CrashOldest,
    Partition,
    Break,
    Leave,
    Join,
    Clog,
    Pause,
    FullRestart,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_plans_a_schedule_that_reads_back_the_same() {
        for (seed, family) in Family::ALL.into_iter().enumerate() {
            let options = Options::for_family(seed as u64 + 100, family);
            let schedule = Schedule::plan(&options);
            let text = schedule.to_string();
            assert_eq!(text.parse::<Schedule>(), Ok(schedule), "{text}");
        }
    }

    #[test]
    fn equal_halves_split_the_members_in_two_and_pause_a_holder_while_downing_decides() {
        for seed in 0..20 {
            let options = Options::for_family(seed, Family::EqualHalves);
            let nodes = options.cluster.nodes;
            assert!(nodes == 4 || nodes == 6, "{nodes} members");
            let schedule = Schedule::plan(&options);
            let partitions: Vec<&Action> = (schedule.0.iter())
                .filter(|a| matches!(a.act, Act::Partition { .. }))
                .collect();
            assert!(!partitions.is_empty(), "seed {seed}: {schedule}");
            for action in &partitions {
                let Act::Partition { side, one_way, .. } = &action.act else {
                    unreachable!()
                };
                assert_eq!(side.len() as u64 * 2, nodes, "seed {seed}: {schedule}");
                assert!(!one_way);
            }
            for pause in schedule
                .0
                .iter()
                .filter(|a| matches!(a.act, Act::PauseHolder { .. }))
            {
                let decides = partitions.iter().rev().find(|p| p.at < pause.at);
                let since = pause.at - decides.expect("after a partition").at;
                assert!(since >= STABLE_AFTER, "seed {seed}: {schedule}");
            }
        }
    }
}
