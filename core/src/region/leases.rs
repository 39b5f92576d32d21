//! What shard leases add to the region: routing the lease store's answers to the shard
//! instance that asked, and releasing the leases its instances gave up: a grant that arrives
//! for an instance that is gone, and the lease of an instance that stopped. A release waits
//! until the instance's entities have all stopped (released at once after a forced stop, the
//! next home could start an entity still being stopped here), and is sent again after a
//! failure until the store answers it or the grant has run out anyway (a release lost would
//! keep the next home waiting for the whole ttl).

use std::collections::{BTreeMap, BTreeSet};

use crate::effect::Effects;
use crate::id::{EntityId, ShardId};
use crate::lease::{LeaseAnswer, LeaseCall, LeaseTerms};
use crate::region::Region;
use crate::time::Instant;

impl Region {
    /// The lease store answered `call` about `shard`'s lease: an acquire goes to the instance
    /// that asked; a grant for an instance that stopped meanwhile is released; a release's
    /// answer settles it.
    pub(crate) fn handle_lease_answered(
        &mut self,
        now: Instant,
        shard: ShardId,
        call: LeaseCall,
        answer: LeaseAnswer,
        out: &mut Effects,
    ) {
        let Some(terms) = &self.shard_lease else {
            return;
        };
        let (name, owner, sent) = match call {
            LeaseCall::Acquire {
                name, owner, sent, ..
            } => (name, owner, sent),
            release @ LeaseCall::Release { .. } => {
                return self
                    .releases
                    .handle_answer(now, shard, &release, &answer, terms);
            }
        };
        if let Some(instance) = self.shards.get_mut(&shard) {
            instance.handle_lease_answer(now, sent, answer, &mut self.budget, out);
            return self.after_shard_change(now, shard, out);
        }
        let LeaseAnswer::Granted(token) = answer else {
            return;
        };
        let release = LeaseCall::Release { name, owner, token };
        if !self.releases.replace(shard, &release, out) {
            crate::probe::hit("region: a lease granted to a stopped shard is released");
            if self.releases.holds_back(shard) {
                crate::probe::hit(
                    "region: a late lease grant waits for a terminated shard's entities",
                );
            }
            self.releases
                .release_after(now, (shard, release), Vec::new(), terms, out);
        }
    }

    /// Gives up the lease of `shard`'s instance that stopped (or is being stopped by force,
    /// its `running` entities not stopped yet).
    pub(super) fn release_shard_lease(
        &mut self,
        now: Instant,
        (shard, release): (ShardId, Option<LeaseCall>),
        running: Vec<EntityId>,
        out: &mut Effects,
    ) {
        let Some(terms) = &self.shard_lease else {
            return;
        };
        match release {
            Some(release) => {
                (self.releases).release_after(now, (shard, release), running, terms, out)
            }
            // Not held (lost, or an acquire out): a grant that answers it later is released
            // only once these have stopped.
            None => self.releases.hold_back(shard, running),
        }
    }
}

/// Where one release stands.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
enum Stage {
    /// Held back while entities of its shard are still stopping here.
    Waiting,
    /// Sent; its answer settles it.
    Out,
    /// Failed; sent again then.
    Due(Instant),
}

/// One release to make.
#[derive(Debug)]
struct Pending {
    call: LeaseCall,
    stage: Stage,
    /// The grant has run out by then anyway: no more tries after it.
    until: Instant,
    /// How long to wait after a failure.
    retry: std::time::Duration,
}

/// The releases of shards' leases that are not done, by shard and holder, and the entities
/// of stopped instances that have not stopped yet: no release of a shard's lease goes out
/// while one of its entities still runs here, whichever instance's grant it gives up (a
/// grant can answer an acquire an instance sent before it was terminated with its entities
/// still stopping: seed 111668).
#[derive(Debug, Default)]
pub(crate) struct Releases {
    pending: BTreeMap<(ShardId, u64), Pending>,
    stopping: BTreeMap<ShardId, BTreeSet<EntityId>>,
}

fn holder(call: &LeaseCall) -> u64 {
    match call {
        LeaseCall::Acquire { owner, .. } | LeaseCall::Release { owner, .. } => owner.holder,
    }
}

impl Releases {
    /// Sends `release` (of `shard`'s lease, on `terms`) once every entity of `running`, and
    /// every entity of the shard's earlier instances, has stopped, and again after a failure.
    pub(crate) fn release_after(
        &mut self,
        now: Instant,
        (shard, release): (ShardId, LeaseCall),
        running: Vec<EntityId>,
        terms: &LeaseTerms,
        out: &mut Effects,
    ) {
        self.hold_back(shard, running);
        let mut pending = Pending {
            call: release,
            stage: Stage::Waiting,
            until: now + terms.ttl,
            retry: terms.retry_interval,
        };
        if self.holds_back(shard) {
            crate::probe::hit("region: a lease is released once its shard's entities stopped");
        } else {
            pending.send(out);
        }
        self.pending.insert((shard, holder(&pending.call)), pending);
    }

    /// `running` entities of a stopped instance of `shard` are still stopping here: no
    /// release of the shard's lease goes out before they have.
    pub(crate) fn hold_back(&mut self, shard: ShardId, running: Vec<EntityId>) {
        if !running.is_empty() {
            self.stopping.entry(shard).or_default().extend(running);
        }
    }

    /// Whether entities of a stopped instance of `shard` are still stopping here.
    pub(crate) fn holds_back(&self, shard: ShardId) -> bool {
        self.stopping.contains_key(&shard)
    }

    /// A grant came for `shard` while a release of the same holder is not done: that release
    /// gives up `release`'s grant instead (the newest the store made), sent now if the one it
    /// replaces was out already (its answer no longer settles it); whether one was there.
    pub(crate) fn replace(
        &mut self,
        shard: ShardId,
        release: &LeaseCall,
        out: &mut Effects,
    ) -> bool {
        let Some(pending) = self.pending.get_mut(&(shard, holder(release))) else {
            return false;
        };
        crate::probe::hit("region: a grant to a shard being released is released with it");
        if pending.call != *release {
            pending.call = release.clone();
            if pending.stage == Stage::Out {
                pending.send(out);
            }
        }
        true
    }

    /// `entity` of `shard` stopped: the releases waiting for the shard's entities go out if
    /// it was the last.
    pub(crate) fn stopped(&mut self, shard: ShardId, entity: &EntityId, out: &mut Effects) {
        let Some(running) = self.stopping.get_mut(&shard) else {
            return;
        };
        if !running.remove(entity) || !running.is_empty() {
            return;
        }
        self.stopping.remove(&shard);
        let range = (shard, 0)..=(shard, u64::MAX);
        for pending in self.pending.range_mut(range).map(|(_, p)| p) {
            if pending.stage == Stage::Waiting {
                pending.send(out);
            }
        }
    }

    /// The store answered a release: done, or sent again after the retry interval.
    fn handle_answer(
        &mut self,
        now: Instant,
        shard: ShardId,
        release: &LeaseCall,
        answer: &LeaseAnswer,
        terms: &LeaseTerms,
    ) {
        let key = (shard, holder(release));
        let Some(pending) = self.pending.get_mut(&key) else {
            return;
        };
        if pending.call != *release || pending.stage != Stage::Out {
            // An answer to an earlier release of a newer grant: the newer one is out.
            return;
        }
        if matches!(answer, LeaseAnswer::Failed(_)) && now + terms.retry_interval < pending.until {
            crate::probe::hit("region: a failed release is sent again");
            pending.stage = Stage::Due(now + pending.retry);
        } else {
            self.pending.remove(&key);
        }
    }

    /// Sends the releases due again.
    pub(crate) fn handle_timeout(&mut self, now: Instant, out: &mut Effects) {
        for pending in self.pending.values_mut() {
            if matches!(pending.stage, Stage::Due(at) if at <= now) {
                pending.send(out);
            }
        }
    }

    /// When a release is due again.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        (self.pending.values())
            .filter_map(|p| match p.stage {
                Stage::Due(at) => Some(at),
                _ => None,
            })
            .min()
    }
}

impl Pending {
    fn send(&mut self, out: &mut Effects) {
        self.stage = Stage::Out;
        out.lease(self.call.clone());
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::effect::Effect;
    use crate::id::{EntityType, MemberId};
    use crate::lease::{FencingToken, LeaseName, LeaseOwner};

    fn release(token: u64) -> LeaseCall {
        LeaseCall::Release {
            name: LeaseName::Shard {
                entity_type: EntityType::new("t"),
                shard: ShardId(3),
            },
            owner: LeaseOwner {
                member: MemberId::new(1, 1),
                holder: 1,
            },
            token: FencingToken(token),
        }
    }

    fn sent(out: &mut Effects) -> Vec<LeaseCall> {
        (out.take().into_iter())
            .filter_map(|e| match e {
                Effect::Lease(call) => Some(call),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_release_waits_for_the_stops_is_retried_and_follows_a_newer_grant() {
        let terms = LeaseTerms {
            ttl: Duration::from_secs(10),
            retry_interval: Duration::from_millis(500),
            ..LeaseTerms::default()
        };
        let (mut releases, mut out) = (Releases::default(), Effects::new(MemberId::new(1, 1)));
        let now = Instant::from_secs(1);
        let running = vec![EntityId::new("a"), EntityId::new("b")];
        releases.release_after(now, (ShardId(3), release(7)), running, &terms, &mut out);
        assert!(sent(&mut out).is_empty(), "entities still stopping");
        releases.stopped(ShardId(3), &EntityId::new("a"), &mut out);
        assert!(sent(&mut out).is_empty());
        releases.stopped(ShardId(3), &EntityId::new("b"), &mut out);
        assert_eq!(sent(&mut out), [release(7)], "the last one stopped");
        // A renewal in flight was granted under a newer token: released instead, at once.
        assert!(releases.replace(ShardId(3), &release(8), &mut out));
        assert_eq!(sent(&mut out), [release(8)]);
        // The first release's answer no longer settles it; the newer one's failure is retried.
        let failed = LeaseAnswer::Failed("down".into());
        releases.handle_answer(now, ShardId(3), &release(7), &LeaseAnswer::Released, &terms);
        releases.handle_answer(now, ShardId(3), &release(8), &failed, &terms);
        let retry = now + Duration::from_millis(500);
        assert_eq!(releases.next_due(), Some(retry));
        releases.handle_timeout(retry, &mut out);
        assert_eq!(sent(&mut out), [release(8)]);
        releases.handle_answer(
            retry,
            ShardId(3),
            &release(8),
            &LeaseAnswer::Released,
            &terms,
        );
        assert_eq!(releases.next_due(), None);
        assert!(!releases.replace(ShardId(3), &release(9), &mut out), "done");
    }

    #[test]
    fn a_grant_after_a_terminate_waits_for_the_entities_the_instance_left_stopping() {
        let terms = LeaseTerms::default();
        let (mut releases, mut out) = (Releases::default(), Effects::new(MemberId::new(1, 1)));
        let now = Instant::from_secs(1);
        // Terminated while its lease was lost and an acquire was out: nothing to release yet.
        releases.hold_back(ShardId(3), vec![EntityId::new("a")]);
        assert!(releases.holds_back(ShardId(3)));
        // The acquire is granted afterwards: the release waits for "a".
        releases.release_after(now, (ShardId(3), release(7)), Vec::new(), &terms, &mut out);
        assert!(
            sent(&mut out).is_empty(),
            "an entity of the shard still stops here"
        );
        releases.stopped(ShardId(4), &EntityId::new("a"), &mut out);
        assert!(sent(&mut out).is_empty(), "another shard's entity");
        releases.stopped(ShardId(3), &EntityId::new("a"), &mut out);
        assert_eq!(sent(&mut out), [release(7)]);
        assert!(!releases.holds_back(ShardId(3)));
        // A later release of the shard goes out at once.
        releases.handle_answer(now, ShardId(3), &release(7), &LeaseAnswer::Released, &terms);
        releases.release_after(now, (ShardId(3), release(8)), Vec::new(), &terms, &mut out);
        assert_eq!(sent(&mut out), [release(8)]);
    }
}
