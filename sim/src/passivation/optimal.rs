//! Belady's MIN, the offline optimal: on a miss with every slot taken, evict the resident
//! entity whose next access lies farthest ahead (or never comes). No policy that sees only the
//! past hits more often, so it is the yardstick the policies are measured against.

use std::collections::BTreeSet;

use super::trace::Trace;

/// How many accesses of `trace` find their entity resident under the optimal eviction with
/// `limit` slots (at least one). Like the policies, the accessed entity always becomes
/// resident, and a first access is a miss. O(n log n) in the trace's length.
pub fn optimal_hits(trace: &Trace, limit: usize) -> usize {
    let limit = limit.max(1);
    let accesses = trace.accesses();
    let never = accesses.len();
    // next_use[i]: the position of the next access of the entity accessed at i, or `never`.
    let mut next_use = vec![never; accesses.len()];
    let mut upcoming = vec![never; trace.distinct()];
    for (i, &entity) in accesses.iter().enumerate().rev() {
        next_use[i] = upcoming[entity];
        upcoming[entity] = i;
    }
    // Residents keyed by their next use: a resident accessed at i is keyed (i, entity), so a
    // hit is found and removed exactly; the last key is the farthest. Entities never used
    // again share `never` and are told apart by their index.
    let mut residents: BTreeSet<(usize, usize)> = BTreeSet::new();
    let mut hits = 0;
    for (i, &entity) in accesses.iter().enumerate() {
        if residents.remove(&(i, entity)) {
            hits += 1;
        } else if residents.len() >= limit {
            residents.pop_last();
        }
        residents.insert((next_use[i], entity));
    }
    hits
}
