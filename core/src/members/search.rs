//! Finding a member in a list sorted by id. A node looks a member up in its gossip state for
//! nearly every heartbeat it answers or hears answered, and a binary search of a thousand
//! members reads ten cache lines, most of them cold at that size (each node keeps its own
//! copy of the state). Node ids spread evenly over their range (the runtime hashes addresses,
//! the simulator numbers its nodes), so a member's place is close to its id's share of the
//! range: the search reads the few entries around that guess first, and falls back to a
//! binary search of one side only when the guess misses. A caller that searched the same
//! list before can pass the place it found ([`search_from`]).

use crate::id::MemberId;

/// Entries read around the guess (a few cache lines of the lists searched).
const WINDOW: usize = 8;

/// What `items.binary_search_by(|t| key(t).cmp(id))` says, for `items` sorted by `key`
/// without repeats (the answer is unique, so any correct search gives it).
pub(crate) fn search<T>(
    items: &[T],
    id: &MemberId,
    key: impl Fn(&T) -> &MemberId,
) -> Result<usize, usize> {
    let within = |lo: usize, hi: usize| {
        items[lo..hi]
            .binary_search_by(|t| key(t).cmp(id))
            .map(|i| i + lo)
            .map_err(|i| i + lo)
    };
    let n = items.len();
    if n < 2 * WINDOW {
        return within(0, n);
    }
    let (first, last) = (key(&items[0]).node.0, key(&items[n - 1]).node.0);
    let node = id.node.0;
    if node <= first || node >= last {
        return within(0, n);
    }
    // Below n - 1: node - first < last - first.
    let share = u128::from(node - first) * (n as u128 - 1) / u128::from(last - first);
    let guess = usize::try_from(share).expect("a place in the list");
    let lo = guess.saturating_sub(WINDOW / 2).min(n - WINDOW);
    let hi = lo + WINDOW;
    if id < key(&items[lo]) {
        within(0, lo)
    } else if id > key(&items[hi - 1]) {
        within(hi, n)
    } else {
        within(lo, hi)
    }
}

/// What [`search`] says, checking `place` first (where `id` was, or belonged, in an earlier
/// version of `items`): a list that has not changed since, as a settled cluster's seen set
/// round after round, is answered from one entry or two. The answer is unique, so a place
/// that fits is it.
pub(crate) fn search_from<T>(
    items: &[T],
    id: &MemberId,
    place: usize,
    key: impl Fn(&T) -> &MemberId,
) -> Result<usize, usize> {
    if items.get(place).map(&key) == Some(id) {
        return Ok(place);
    }
    let after_the_one_before = place == 0 || items.get(place - 1).is_some_and(|t| key(t) < id);
    let before_the_one_at = items.get(place).is_none_or(|t| key(t) > id);
    if place <= items.len() && after_the_one_before && before_the_one_at {
        return Err(place);
    }
    search(items, id, key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn finds_what_a_binary_search_finds_for_dense_and_spread_ids() {
        let mut rng = Rng::new(5);
        for round in 0..400 {
            let n = rng.below(300);
            // Dense ids with gaps (the simulator's), or ids spread over the whole range (the
            // runtime's hashes); some addresses with two incarnations.
            let spread = round % 2 == 1;
            let mut ids = Vec::new();
            for i in 0..n {
                if rng.below(4) == 0 {
                    continue;
                }
                let node = if spread { rng.below(u64::MAX) } else { i };
                ids.push(MemberId::new(node, 1));
                if rng.below(8) == 0 {
                    ids.push(MemberId::new(node, 2));
                }
            }
            ids.sort_unstable();
            ids.dedup();
            let mut asked: Vec<MemberId> = ids.clone();
            asked.extend((0..50).map(|_| {
                let node = if spread {
                    rng.below(u64::MAX)
                } else {
                    rng.below(n + 2)
                };
                MemberId::new(node, 1 + rng.below(3))
            }));
            for id in asked {
                assert_eq!(
                    search(&ids, &id, |m| m),
                    ids.binary_search(&id),
                    "{id:?} among {} ids (spread: {spread})",
                    ids.len()
                );
            }
        }
    }

    #[test]
    fn a_search_from_any_place_says_what_a_binary_search_says() {
        let mut rng = Rng::new(11);
        for _ in 0..2_000 {
            let n = rng.below(12);
            let seen: Vec<MemberId> = (0..n)
                .filter(|_| rng.below(2) == 0)
                .map(|node| MemberId::new(node, 1))
                .collect();
            let id = MemberId::new(rng.below(n + 1), 1 + rng.below(2));
            let place = rng.below(n + 3) as usize;
            assert_eq!(
                search_from(&seen, &id, place, |m| m),
                seen.binary_search(&id),
                "{id:?} from {place} in {seen:?}"
            );
        }
    }
}
