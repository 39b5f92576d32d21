//! A member's periodic rounds: gossip (full states to those that have not seen them, digests
//! otherwise) and heartbeats to the monitored members, which update reachability.

use super::*;

impl Membership {
    /// Sends the state to `count` random members, preferring those that have not seen it.
    pub(super) fn gossip_to(&mut self, count: usize, rng: &mut Rng, out: &mut Effects) {
        self.refresh_gossip_targets();
        let targets = self.gossip_targets.as_ref().expect("worked out above");
        let chosen = draw_targets([&targets.unseen, &targets.seen], count, rng);
        for to in chosen {
            // A member that has seen this state gets its digests (Akka's GossipStatus).
            let message = if self.gossip.seen().contains(&to) {
                self.gossip_status(true)
            } else {
                ClusterMessage::Gossip(Box::new(self.gossip.clone()))
            };
            out.send_cluster(to, message);
        }
    }

    /// Works out the reachable members other than this one and Down ones (again only when the
    /// state changed), split into those that have not seen the state and those that have
    /// (again only when the state or the seen set changed).
    fn refresh_gossip_targets(&mut self) {
        let (state, seen_digest) = (self.gossip.digest(), self.gossip.seen_digest());
        if self
            .gossip_targets
            .as_ref()
            .is_none_or(|t| t.state != state)
        {
            // Members and the unreachable are both sorted by id: one walk of each (a lookup
            // per member was a tenth of a thousand-member cluster's work while it formed).
            let unreachable = self.gossip.unreachable_from(self.me);
            let mut unreachable = unreachable.iter().peekable();
            let mut eligible = Vec::with_capacity(self.gossip.member_count());
            for m in self.gossip.members() {
                while unreachable.next_if(|u| **u < m.id).is_some() {}
                if m.id != self.me
                    && m.status != MemberStatus::Down
                    && unreachable.peek() != Some(&&m.id)
                {
                    eligible.push(m.id);
                }
            }
            self.gossip_targets = Some(GossipTargets {
                state,
                eligible,
                split_for: None,
                unseen: Vec::new(),
                seen: Vec::new(),
            });
        }
        let targets = self.gossip_targets.as_mut().expect("worked out above");
        if targets.split_for != Some(seen_digest) {
            // Redone for every round while a cluster forms (the seen set grows between rounds):
            // one indexed walk of both sorted lists.
            let has_seen = self.gossip.seen().as_slice();
            targets.unseen.clear();
            targets.seen.clear();
            let mut k = 0;
            for &id in &targets.eligible {
                while has_seen.get(k).is_some_and(|s| *s < id) {
                    k += 1;
                }
                if has_seen.get(k) == Some(&id) {
                    targets.seen.push(id);
                } else {
                    targets.unseen.push(id);
                }
            }
            targets.split_for = Some(seen_digest);
        }
    }

    /// This member's digests, as a round (`answer`) or a talkback.
    pub(super) fn gossip_status(&mut self, answer: bool) -> ClusterMessage {
        ClusterMessage::GossipStatus {
            state: self.gossip.digest(),
            seen: self.gossip.seen_digest(),
            answer,
        }
    }

    /// Heartbeats to the monitored members (and to those observed unreachable, to notice
    /// their return); updates reachability from the detectors. Down members are monitored too:
    /// they are removed once they are unreachable (stopped), which only a detector can tell.
    pub(super) fn heartbeat(&mut self, now: Instant, rng: &mut Rng, out: &mut Effects) {
        let (state, receivers) = self.heartbeat_receivers();
        let settings = &self.settings.failure_detector;
        self.detectors
            .retain(|m, _| receivers.binary_search(m).is_ok());
        let expect_by = now + self.settings.heartbeat_interval + settings.first_heartbeat_estimate;
        let mut changed = false;
        for &r in receivers.iter() {
            let (detector, first_due) = self
                .detectors
                .entry(r)
                .or_insert_with(|| (PhiAccrual::new(settings), expect_by));
            if self
                .gossip
                .member(r)
                .is_some_and(|m| m.status == MemberStatus::Down)
            {
                crate::probe::hit("membership: a Down member is monitored until unreachable");
            }
            // A member that never answered is judged from when its first answer was due.
            if !detector.is_monitoring() && *first_due <= now {
                detector.heartbeat(*first_due, settings);
            }
            if detector.is_monitoring() && !detector.is_available(now, settings) {
                changed |= self.gossip.observe(self.me, r, false);
            }
            self.heartbeat_sequence += 1;
            let probe = ClusterMessage::Heartbeat {
                sequence: self.heartbeat_sequence,
            };
            out.send_cluster(r, probe);
        }
        self.heartbeat_receivers = Some((state, receivers));
        if changed {
            self.after_change(now, rng, out);
        }
    }

    /// The monitored members and those this member observes unreachable, sorted (worked out
    /// again only when the state changed: both depend on nothing else).
    fn heartbeat_receivers(&mut self) -> (StateDigest, Vec<MemberId>) {
        let state = self.gossip.digest();
        if let Some(cached) = self.heartbeat_receivers.take().filter(|(k, _)| *k == state) {
            return cached;
        }
        let members: Vec<MemberId> = self.gossip.members().map(|m| m.id).collect();
        let mut receivers: BTreeSet<MemberId> =
            monitored(self.me, &members, self.settings.monitored_by)
                .into_iter()
                .collect();
        receivers.extend(
            members
                .iter()
                .filter(|m| self.gossip.observes_unreachable(self.me, **m)),
        );
        (state, receivers.into_iter().collect())
    }
}

/// Up to `count` members drawn at random from the first pool, then (once it is exhausted)
/// from the second: each draw takes a uniform index and fills the hole with the pool's last
/// member, as `swap_remove` on copies of the pools would, without copying them (a round of a
/// thousand-member cluster draws one of a thousand).
fn draw_targets(pools: [&[MemberId]; 2], count: usize, rng: &mut Rng) -> Vec<MemberId> {
    let mut chosen = Vec::with_capacity(count);
    for pool in pools {
        // Slots overwritten by earlier draws from this pool, latest last.
        let mut moved: Vec<(usize, MemberId)> = Vec::new();
        let mut len = pool.len();
        while chosen.len() < count && len > 0 {
            let at = |i: usize, moved: &[(usize, MemberId)]| {
                moved
                    .iter()
                    .rev()
                    .find(|(j, _)| *j == i)
                    .map_or(pool[i], |(_, m)| *m)
            };
            let i = usize::try_from(rng.below(len as u64)).expect("an index into the pool");
            let picked = at(i, &moved);
            let last = at(len - 1, &moved);
            moved.push((i, last));
            len -= 1;
            chosen.push(picked);
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The original draw: `swap_remove` on copies of the pools.
    fn draw_by_copying(pools: [&[MemberId]; 2], count: usize, rng: &mut Rng) -> Vec<MemberId> {
        let (mut first, mut second) = (pools[0].to_vec(), pools[1].to_vec());
        let mut chosen = Vec::new();
        for _ in 0..count {
            let pool = if first.is_empty() {
                &mut second
            } else {
                &mut first
            };
            if pool.is_empty() {
                break;
            }
            chosen.push(pool.swap_remove(rng.below(pool.len() as u64) as usize));
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
                draw_targets([&first, &second], count, &mut a),
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
}
