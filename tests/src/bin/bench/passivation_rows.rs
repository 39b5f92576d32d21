//! The passivation policies' figures: the cost of telling a policy of one access, against a
//! plain hash-map touch in the same run, and each built-in trace's hit rates against Belady's
//! optimal (the passivation simulator's table, `sim passivation`).

use std::collections::HashMap;
use std::hint::black_box;
use std::time::Instant as WallClock;

use shoal_core::EntityId;
use shoal_core::passivation::{ActiveEntities, ReplacementPolicy};
use sim::passivation::{Synthetic, Trace, compare};

use crate::table::{Row, Target};

/// The limit of the cost rows: one region's share at Akka's default of 100,000 per region over
/// ten shards.
const COST_LIMIT: usize = 10_000;
/// The limit of the hit-rate rows (the simulator's default).
const TABLE_LIMIT: usize = 1_000;

/// Nanoseconds per access of `policy` under `limit` over `trace` (ids prepared beforehand).
fn policy_cost(trace: &Trace, ids: &[EntityId], policy: ReplacementPolicy, limit: usize) -> f64 {
    let mut active = ActiveEntities::new(policy, limit);
    let mut victims = 0;
    let start = WallClock::now();
    for &entity in trace.accesses() {
        victims += active.handle_access(black_box(&ids[entity])).len();
    }
    let ns = start.elapsed().as_nanos() as f64 / trace.len() as f64;
    black_box(victims);
    ns
}

/// Nanoseconds per access of the least a tracker must do: count the access in a hash map of
/// ids.
fn hash_map_touch(trace: &Trace, ids: &[EntityId]) -> f64 {
    let mut counts: HashMap<EntityId, u64> = HashMap::new();
    let start = WallClock::now();
    for &entity in trace.accesses() {
        let id = black_box(&ids[entity]);
        match counts.get_mut(id) {
            Some(count) => *count += 1,
            None => {
                counts.insert(id.clone(), 1);
            }
        }
    }
    let ns = start.elapsed().as_nanos() as f64 / trace.len() as f64;
    black_box(counts.len());
    ns
}

/// Every passivation row.
pub(crate) fn rows(quick: bool) -> Vec<Row> {
    let mut rows = Vec::new();
    // Skewed accesses over ten times the limit (a hundred per entity of it): every policy
    // passivates on about a quarter of them.
    let limit = if quick { TABLE_LIMIT } else { COST_LIMIT };
    let trace = Synthetic::Zipf.trace(limit, 1);
    let ids: Vec<EntityId> = (0..trace.distinct()).map(|i| trace.id(i).clone()).collect();
    for (name, policy) in ReplacementPolicy::ALL {
        let (mut cost, mut baseline) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..crate::ROUNDS {
            cost = cost.min(policy_cost(&trace, &ids, policy, limit));
            baseline = baseline.min(hash_map_touch(&trace, &ids));
        }
        rows.push(Row::ratio(
            &format!("passivation: {name}, one access (limit {limit}, zipf)"),
            format!("{cost:.0} ns"),
            format!("hash-map touch {baseline:.0} ns"),
            cost / baseline,
            Target::None,
        ));
    }
    let traces: Vec<Trace> = Synthetic::ALL
        .into_iter()
        .map(|t| t.trace(TABLE_LIMIT, 1))
        .collect();
    let comparison = compare(&traces, TABLE_LIMIT);
    for result in &comparison.traces {
        let w_tinylfu = result.policy_rate("w-tinylfu").unwrap_or(0.0);
        let optimal = result.optimal_rate();
        let (best, best_rate) = (result.policies.iter())
            .map(|(name, hits)| (*name, result.rate(*hits)))
            .fold(("", 0.0), |a, b| if b.1 > a.1 { b } else { a });
        let target = if result.trace == Synthetic::Zipf.name() {
            Target::AtLeast(0.9)
        } else {
            Target::None
        };
        rows.push(Row::ratio(
            &format!(
                "passivation: w-tinylfu's hit rate on {} (limit {TABLE_LIMIT}; best: {best} {:.1} %)",
                result.trace,
                best_rate * 100.0
            ),
            format!("{:.1} %", w_tinylfu * 100.0),
            format!("optimal {:.1} %", optimal * 100.0),
            w_tinylfu / optimal.max(f64::MIN_POSITIVE),
            target,
        ));
    }
    rows
}
