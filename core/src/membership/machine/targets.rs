//! Whom a gossip round goes to: the eligible members (reachable, not Down, not this one),
//! those that have not seen the state preferred. While a large cluster forms the seen set
//! changes between nearly every two rounds, and splitting a thousand eligible members by it
//! for each round was a seventh of a 1,000-node simulation's instructions; a round draws one
//! or five of them.
//! So the split is never built: both halves are read by index, each read a few binary
//! searches in the sorted eligible ids and the sorted seen set.

use crate::id::MemberId;
use crate::members::MemberStatus;
use crate::members::search_from;
use crate::members::{Gossip, StateStamp};
use crate::rng::Rng;

/// The members eligible under the state stamped `state` (worked out again only when the state
/// changes), and the others.
#[derive(Debug)]
pub(super) struct GossipTargets {
    state: StateStamp,
    /// Reachable members other than this one and Down ones, by id.
    eligible: Vec<MemberId>,
    /// The other members (this one, Down and unreachable ones), by id.
    ineligible: Vec<MemberId>,
    /// Where each of `ineligible` was in (or belonged in) the seen set of the last split:
    /// a settled cluster's seen set stays the same round after round, and a binary search of
    /// a thousand members reads ten cold cache lines where checking the last place reads one.
    places: Vec<usize>,
}

impl GossipTargets {
    /// The targets under `gossip`'s state, stamped `state`, reusing `cached` if it was worked
    /// out for it.
    pub(super) fn refresh(
        cached: Option<Self>,
        state: StateStamp,
        gossip: &Gossip,
        me: MemberId,
    ) -> Self {
        if let Some(cached) = cached.filter(|t| t.state == state) {
            return cached;
        }
        // Members and the unreachable are both sorted by id: one walk of each (a lookup per
        // member was a tenth of a thousand-member cluster's work while it formed).
        let unreachable = gossip.unreachable_from(me);
        let mut unreachable = unreachable.iter().peekable();
        let mut eligible = Vec::with_capacity(gossip.member_count());
        let mut ineligible = Vec::new();
        for m in gossip.members() {
            while unreachable.next_if(|u| **u < m.id).is_some() {}
            if m.id != me && m.status != MemberStatus::Down && unreachable.peek() != Some(&&m.id) {
                eligible.push(m.id);
            } else {
                ineligible.push(m.id);
            }
        }
        let places = vec![0; ineligible.len()];
        Self {
            state,
            eligible,
            ineligible,
            places,
        }
    }

    /// The eligible members split by `seen` (sorted; the seen set of the state these targets
    /// were worked out for, which holds members only).
    pub(super) fn split<'a>(&'a mut self, seen: &'a [MemberId]) -> Split<'a> {
        // The seen members that are not eligible, by their place in `seen`: usually this
        // member alone (it has seen its own state).
        let mut skipped = Vec::new();
        for (id, place) in self.ineligible.iter().zip(&mut self.places) {
            let found = search_from(seen, id, *place, |m| m);
            let (Ok(at) | Err(at)) = found;
            *place = at;
            skipped.extend(found.ok());
        }
        let split = Split {
            eligible: &self.eligible,
            seen,
            skipped,
        };
        #[cfg(debug_assertions)]
        split.check_against_a_walk();
        split
    }
}

/// The eligible members split by a seen set, read by index in id order.
pub(super) struct Split<'a> {
    eligible: &'a [MemberId],
    /// The seen set, sorted, members only: the eligible members that have seen are those of
    /// it whose places are not in `skipped`.
    seen: &'a [MemberId],
    /// Places in `seen` of the members that are not eligible, ascending.
    skipped: Vec<usize>,
}

impl Split<'_> {
    /// Eligible members that have not seen the state (preferred).
    pub(super) fn unseen(&self) -> Pool<'_> {
        Pool {
            split: self,
            seen: false,
        }
    }

    /// Eligible members that have.
    pub(super) fn seen(&self) -> Pool<'_> {
        Pool {
            split: self,
            seen: true,
        }
    }

    fn seen_len(&self) -> usize {
        self.seen.len().saturating_sub(self.skipped.len())
    }

    /// How many eligible members up to `id` (included) have seen the state.
    fn seen_up_to(&self, id: MemberId) -> usize {
        let placed = self.seen.partition_point(|s| *s <= id);
        placed - self.skipped.partition_point(|p| *p < placed)
    }

    /// The `i`th eligible member that has seen: the `i`th of `seen` once the skipped places
    /// are stepped over.
    fn seen_at(&self, i: usize) -> MemberId {
        let mut at = i;
        for &p in &self.skipped {
            if p > at {
                break;
            }
            at += 1;
        }
        self.seen[at]
    }

    /// The `i`th eligible member that has not seen: the first eligible member with `i + 1`
    /// unseen ones up to it (their count never falls along the eligible ids).
    fn unseen_at(&self, i: usize) -> MemberId {
        let unseen_up_to = |j: usize| (j + 1).saturating_sub(self.seen_up_to(self.eligible[j]));
        let (mut low, mut high) = (0, self.eligible.len() - 1);
        while low < high {
            let middle = low + (high - low) / 2;
            if unseen_up_to(middle) > i {
                high = middle;
            } else {
                low = middle + 1;
            }
        }
        self.eligible[low]
    }

    /// Debug builds check the reads against the split built by one walk of both lists.
    #[cfg(debug_assertions)]
    fn check_against_a_walk(&self) {
        let (mut unseen, mut seen) = (Vec::new(), Vec::new());
        for id in self.eligible {
            if self.seen.binary_search(id).is_ok() {
                seen.push(*id);
            } else {
                unseen.push(*id);
            }
        }
        for (pool, walked) in [(self.unseen(), unseen), (self.seen(), seen)] {
            assert_eq!(pool.count(), walked.len(), "a pool's size");
            for (i, id) in walked.into_iter().enumerate() {
                assert_eq!(pool.member(i), id, "a pool's member {i}");
            }
        }
    }
}

/// One half of a [`Split`].
pub(super) struct Pool<'a> {
    split: &'a Split<'a>,
    seen: bool,
}

/// Something to draw members from by index.
pub(super) trait Indexed {
    /// How many members it holds.
    fn count(&self) -> usize;
    /// Its `i`th member.
    fn member(&self, i: usize) -> MemberId;
}

impl Indexed for Pool<'_> {
    fn count(&self) -> usize {
        match self.seen {
            true => self.split.seen_len(),
            false => self
                .split
                .eligible
                .len()
                .saturating_sub(self.split.seen_len()),
        }
    }

    fn member(&self, i: usize) -> MemberId {
        match self.seen {
            true => self.split.seen_at(i),
            false => self.split.unseen_at(i),
        }
    }
}

/// The draw's tests compare it with `swap_remove` on plain lists.
#[cfg(test)]
impl Indexed for &[MemberId] {
    fn count(&self) -> usize {
        self.len()
    }
    fn member(&self, i: usize) -> MemberId {
        self[i]
    }
}

/// Up to `count` members drawn at random from the first pool, then (once it is exhausted)
/// from the second, each with its pool's index: each draw takes a uniform index and fills the
/// hole with the pool's last member, as `swap_remove` on copies of the pools would, without
/// copying them (a round of a thousand-member cluster draws one of a thousand).
pub(super) fn draw_targets<P: Indexed>(
    pools: [P; 2],
    count: usize,
    rng: &mut Rng,
) -> Vec<(usize, MemberId)> {
    let mut chosen = Vec::with_capacity(count);
    for (index, pool) in pools.into_iter().enumerate() {
        // Slots overwritten by earlier draws from this pool, latest last.
        let mut moved: Vec<(usize, MemberId)> = Vec::new();
        let mut len = pool.count();
        while chosen.len() < count && len > 0 {
            let at = |i: usize, moved: &[(usize, MemberId)]| {
                moved
                    .iter()
                    .rev()
                    .find(|(j, _)| *j == i)
                    .map_or_else(|| pool.member(i), |(_, m)| *m)
            };
            let i = usize::try_from(rng.below(len as u64)).expect("an index into the pool");
            let picked = at(i, &moved);
            len -= 1;
            // The hole is filled only if another draw may read it.
            if chosen.len() + 1 < count && len > 0 {
                let last = at(len, &moved);
                moved.push((i, last));
            }
            chosen.push((index, picked));
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The original draw: `swap_remove` on copies of the pools.
    fn draw_by_copying(
        pools: [&[MemberId]; 2],
        count: usize,
        rng: &mut Rng,
    ) -> Vec<(usize, MemberId)> {
        let (mut first, mut second) = (pools[0].to_vec(), pools[1].to_vec());
        let mut chosen = Vec::new();
        for _ in 0..count {
            let (index, pool) = if first.is_empty() {
                (1, &mut second)
            } else {
                (0, &mut first)
            };
            if pool.is_empty() {
                break;
            }
            chosen.push((
                index,
                pool.swap_remove(rng.below(pool.len() as u64) as usize),
            ));
        }
        chosen
    }

    #[test]
    fn drawing_targets_matches_swap_remove_on_copies() {
        let ids = |range: std::ops::Range<u64>| -> Vec<MemberId> {
            range.map(|n| MemberId::new(n, 1)).collect()
        };
        for seed in 0..200 {
            let (first, second) = (ids(0..seed % 7), ids(100..100 + seed % 11));
            let count = (seed % 9) as usize;
            let (mut a, mut b) = (Rng::new(seed), Rng::new(seed));
            assert_eq!(
                draw_targets([first.as_slice(), second.as_slice()], count, &mut a),
                draw_by_copying([&first, &second], count, &mut b),
                "seed {seed}"
            );
            assert_eq!(
                a.below(1 << 40),
                b.below(1 << 40),
                "the same draws were taken"
            );
        }
    }

    #[test]
    fn pools_read_by_index_match_the_split_built_by_filtering() {
        let mut rng = Rng::new(7);
        for round in 0..300 {
            // Members 0..n; some ineligible; the seen set any subset of the members.
            let n = rng.below(60);
            let (mut eligible, mut ineligible, mut seen) = (Vec::new(), Vec::new(), Vec::new());
            for node in 0..n {
                let id = MemberId::new(node, 1 + node % 3);
                match rng.below(5) {
                    0 => ineligible.push(id),
                    _ => eligible.push(id),
                }
                if rng.below(100) < round % 100 {
                    seen.push(id);
                }
            }
            let places = (0..ineligible.len()).map(|_| rng.below(n + 2) as usize);
            let mut targets = GossipTargets {
                state: Gossip::default().stamp(&mut 0),
                eligible: eligible.clone(),
                places: places.collect(),
                ineligible,
            };
            let split = targets.split(&seen);
            let (has_seen, not_seen): (Vec<MemberId>, Vec<MemberId>) =
                eligible.iter().partition(|id| seen.contains(id));
            for (pool, expected) in [(split.seen(), has_seen), (split.unseen(), not_seen)] {
                let read: Vec<MemberId> = (0..pool.count()).map(|i| pool.member(i)).collect();
                assert_eq!(read, expected, "round {round}");
            }
        }
    }
}
