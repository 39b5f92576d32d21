//! Graceful operations never stall. A shard that moves (rebalance, graceful shutdown, leave)
//! goes through phases the simulator sees on the wire and in the nodes' events:
//!
//! ```text
//!  BeginHandOff ──acks──▶ HandOff ──entities stop──▶ ShardStopped ──re-allocation──▶ ShardStarted
//!   (coordinator)          (coordinator)              (old owner)                    (new home)
//! ```
//!
//! and a region's graceful shutdown runs from the command to its `RegionStopped`. (Messages
//! between roles on one node never reach the wire: a phase may end unseen, and the next one is
//! then judged from the last seen start against the sum of their bounds.) When no fault
//! happened for long enough before a phase began (and none since), and the coordinator that
//! began it is still the one running, each phase must end within its bound: a few network hops,
//! plus the entities' stop time where entities stop. A phase still open when the run ends is
//! judged then. The bounds come from [`crate::bounds`].

use std::collections::BTreeMap;
use std::time::Duration;

use shoal_core::{HandoffRound, Instant, MemberId, ShardId, ShardingSettings};

use crate::bounds;
use crate::options::Options;

/// A phase in progress: when it began, and under which coordinator.
#[derive(Clone, Copy, Debug)]
struct Open {
    since: Instant,
    coordinators: u64,
    /// The handoff round, for the acknowledgement phase.
    round: Option<HandoffRound>,
    /// The shard's owner runs on the coordinator's node: `HandOff` and `ShardStopped` never
    /// reach the wire, so the move may be past the acknowledgements unseen.
    owner_local: bool,
}

/// Which phase of a move or shutdown.
#[derive(Clone, Copy, Debug, Eq, Ord, PartialEq, PartialOrd)]
enum Phase {
    /// `BeginHandOff` sent; waiting for every acknowledgement (then `HandOff`).
    Acking,
    /// `HandOff` sent; waiting for the owner to stop the shard.
    Stopping,
    /// The owner stopped the shard; waiting for it to start at its new home.
    Homeless,
}

impl Phase {
    fn describe(self) -> &'static str {
        match self {
            Self::Acking => "from BeginHandOff to HandOff (the acknowledgements)",
            Self::Stopping => "from HandOff to its owner's ShardStopped (the entities' stop)",
            Self::Homeless => "from its owner's ShardStopped to a new home (re-allocation)",
        }
    }
}

/// The phases in progress, and what the bounds need.
#[derive(Debug)]
pub(crate) struct Stalls {
    shards: BTreeMap<ShardId, (Phase, Open)>,
    /// Where each shard last started (until it stops there): a `HostShard` resent to that
    /// region is acknowledged without a new start, and begins no move.
    running: BTreeMap<ShardId, MemberId>,
    shutdowns: BTreeMap<MemberId, Open>,
    /// The last fault (crash, partition or heal, break, clog, pause or resume, downing, restart
    /// after a crash): phases that began less than `settle` after it are not judged.
    last_fault: Option<Instant>,
    /// How long a fault's consequences may last (detection, downing, removal margin, a
    /// handoff timing out).
    settle: Duration,
    /// The coordinator abandons a round whose acknowledgements are not all in by then.
    handoff_timeout: Duration,
    /// What an abandoned round adds to a graceful shutdown: its timeout, the region's next
    /// `GracefulShutdownReq` (a retry interval later), and the hop that carries it.
    abandon_cost: Duration,
    /// Abandoned rounds of each shutting-down region's shards, since its shutdown began.
    shutdown_abandons: BTreeMap<MemberId, u32>,
    /// Bumped whenever a coordinator starts or stops: a new coordinator rebuilds its state, and
    /// phases begun under the old one are not judged.
    coordinators: u64,
    bounds: Bounds,
}

#[derive(Clone, Copy, Debug)]
struct Bounds {
    acking: Duration,
    stopping: Duration,
    homeless: Duration,
    shutdown: Duration,
}

impl Stalls {
    pub(crate) fn new(opts: &Options, settings: &ShardingSettings, stable_after: Duration) -> Self {
        let hop = bounds::hop(opts);
        // Joins, leaves and coordinator moves spread by gossip (a round a second) before
        // regions (re-)register, with a registration backoff of up to `retry_interval`.
        let spread = Duration::from_secs(6) + settings.retry_interval;
        let bounds = Bounds {
            acking: bounds::handoff_acks(opts),
            stopping: bounds::handoff_stopping(opts, settings),
            homeless: bounds::rehoming(opts),
            shutdown: spread + bounds::handoff(opts, settings),
        };
        Self {
            shards: BTreeMap::new(),
            running: BTreeMap::new(),
            shutdowns: BTreeMap::new(),
            last_fault: None,
            settle: settings.handoff_timeout + settings.down_removal_margin + stable_after * 2,
            handoff_timeout: settings.handoff_timeout,
            abandon_cost: settings.handoff_timeout + settings.retry_interval + hop,
            shutdown_abandons: BTreeMap::new(),
            coordinators: 0,
            bounds,
        }
    }

    /// A fault happened at `now`.
    pub(crate) fn fault(&mut self, now: Instant) {
        self.last_fault = Some(self.last_fault.map_or(now, |last| last.max(now)));
    }

    /// A coordinator started or stopped somewhere.
    pub(crate) fn coordinator_changed(&mut self) {
        self.coordinators += 1;
    }

    /// The coordinator began handing `shard` off (`round`: one `BeginHandOff` per region). A
    /// new round means the last one was abandoned (see [`Stalls::abandoned`]).
    pub(crate) fn begin_handoff(
        &mut self,
        now: Instant,
        shard: ShardId,
        (coordinator, owner): (MemberId, MemberId),
        round: HandoffRound,
    ) -> Option<Stall> {
        let previous = match self.shards.get(&shard) {
            Some((Phase::Acking, open)) if open.round == Some(round) => return None,
            Some((Phase::Acking, open)) => Some(*open),
            _ => None,
        };
        let open = Open {
            round: Some(round),
            owner_local: coordinator.node == owner.node,
            ..self.open(now)
        };
        self.shards.insert(shard, (Phase::Acking, open));
        let previous = previous?;
        // With tight timers a round may legitimately miss its deadline; a shutdown waiting
        // on it takes that much longer (a round that should not have missed is judged here).
        if self.shutdowns.contains_key(&owner) {
            *self.shutdown_abandons.entry(owner).or_default() += 1;
        }
        self.judge_abandoned(previous, shard)
    }

    /// Whether the acknowledgement round opened by `open` was abandoned by `now`: the
    /// coordinator's deadline covers it, and without `HandOff` by then the shard stays.
    fn abandoned(&self, phase: Phase, open: &Open, now: Instant) -> bool {
        phase == Phase::Acking && open.since + self.handoff_timeout <= now
    }

    /// An abandoned round took the whole handoff timeout: a stall if the acknowledgements had
    /// a shorter bound (with tight timers, a slow acknowledgement may legitimately miss it).
    fn judge_abandoned(&self, open: Open, shard: ShardId) -> Option<Stall> {
        let at = open.since + self.handoff_timeout;
        let what = Phase::Acking.describe();
        self.judge(at, open, self.bounds.acking, shard.to_string(), what)
    }

    /// The coordinator told the owner to stop `shard` (a repeated `HandOff` changes nothing).
    pub(crate) fn hand_off(&mut self, now: Instant, shard: ShardId) -> Option<Stall> {
        match self.shards.get(&shard) {
            Some((Phase::Stopping, _)) => None,
            _ => self.advance(now, shard, Phase::Stopping),
        }
    }

    /// The owner stopped `shard`. If the simulator saw nothing of the move before (the
    /// coordinator and the owner shared a node), it cannot tell which coordinator ran it: a new
    /// one may never have heard of the shard, and allocate it only on demand. Not judged.
    pub(crate) fn shard_stopped(
        &mut self,
        now: Instant,
        shard: ShardId,
        region: MemberId,
    ) -> Option<Stall> {
        if self.running.get(&shard) == Some(&region) {
            self.running.remove(&shard);
        }
        if let std::collections::btree_map::Entry::Vacant(unseen) = self.shards.entry(shard) {
            let open = Open {
                since: now,
                coordinators: UNKNOWN,
                round: None,
                owner_local: false,
            };
            unseen.insert((Phase::Homeless, open));
            return None;
        }
        self.advance(now, shard, Phase::Homeless)
    }

    /// The coordinator told `region` to host `shard`: until it starts, the shard is on its
    /// way to a home (a new shard's first allocation, or a move whose end this call sees),
    /// unless it runs there already (a resent `HostShard` whose first copy was acknowledged
    /// late; tight timers resend often, seed 200411).
    pub(crate) fn hosting(&mut self, now: Instant, shard: ShardId, region: MemberId) {
        if self.running.get(&shard) == Some(&region) {
            return;
        }
        if !self.shards.contains_key(&shard) {
            self.shards.insert(shard, (Phase::Homeless, self.open(now)));
        }
    }

    /// Shards other than `round` on their way somewhere under the running coordinator, their
    /// move begun in a calm cluster (a move begun under faults may have ended unseen: a resent
    /// `HostShard` is acknowledged without a new start).
    pub(crate) fn moving_besides(&self, now: Instant, round: &[ShardId]) -> Vec<ShardId> {
        self.shards
            .iter()
            .filter(|(shard, (phase, open))| {
                !self.abandoned(*phase, open, now)
                    && self.calm_before(open.since)
                    && open.coordinators == self.coordinators
                    && !round.contains(shard)
            })
            .map(|(shard, _)| *shard)
            .collect()
    }

    /// Whether no fault happened in the `settle` time before `at`.
    fn calm_before(&self, at: Instant) -> bool {
        self.last_fault
            .is_none_or(|fault| fault + self.settle <= at)
    }

    /// `shard` started somewhere: the move is over. (A region told to stop a shard it no
    /// longer hosted answers at once, with no event of its own: the move may go from `HandOff`
    /// straight to the new home.)
    pub(crate) fn shard_started(
        &mut self,
        now: Instant,
        shard: ShardId,
        region: MemberId,
    ) -> Option<Stall> {
        self.running.insert(shard, region);
        let (phase, open) = self.shards.remove(&shard)?;
        let bound = self.bound_through(phase, Phase::Homeless);
        self.judge(now, open, bound, shard.to_string(), phase.describe())
    }

    /// `region` began shutting down gracefully.
    pub(crate) fn shutdown_began(&mut self, now: Instant, region: MemberId) {
        let open = self.open(now);
        self.shutdowns.entry(region).or_insert(open);
    }

    /// `region` finished its graceful shutdown.
    pub(crate) fn region_stopped(&mut self, now: Instant, region: MemberId) -> Option<Stall> {
        let open = self.shutdowns.remove(&region)?;
        let bound = self.shutdown_bound(region);
        self.shutdown_abandons.remove(&region);
        let what = "graceful shutdown, from the command to RegionStopped";
        self.judge(now, open, bound, region.to_string(), what)
    }

    /// `region`'s process is gone (crashed or exited): its shutdown is no longer awaited.
    pub(crate) fn region_gone(&mut self, region: MemberId) {
        self.shutdowns.remove(&region);
        self.shutdown_abandons.remove(&region);
    }

    fn shutdown_bound(&self, region: MemberId) -> Duration {
        let abandons = self.shutdown_abandons.get(&region).copied().unwrap_or(0);
        self.bounds.shutdown + self.abandon_cost * abandons
    }

    /// The phases still open at the end of the run that have overrun their bounds.
    pub(crate) fn overdue(&self, now: Instant) -> Vec<Stall> {
        let shards = self.shards.iter().filter_map(|(shard, (phase, open))| {
            if open.owner_local {
                // Still acknowledging, or stopping, or re-allocating: judged against them all
                // (mass-passivation seed 10396883038 ended with a local shard stopping). Past
                // the coordinator's deadline the round may also have been abandoned (tight
                // timers, seed 10396883068): a stall only if it is one either way.
                let bound = self.bound_through(*phase, Phase::Homeless);
                let what = "from BeginHandOff to a new home (the owner is the coordinator's node)";
                let moving = self.judge(now, *open, bound, shard.to_string(), what);
                if self.abandoned(*phase, open, now) {
                    return self.judge_abandoned(*open, *shard).and(moving);
                }
                return moving;
            }
            if self.abandoned(*phase, open, now) {
                return self.judge_abandoned(*open, *shard);
            }
            let bound = self.bound(*phase);
            self.judge(now, *open, bound, shard.to_string(), phase.describe())
        });
        let shutdowns = self.shutdowns.iter().filter_map(|(region, open)| {
            let what = "graceful shutdown, from the command to RegionStopped";
            let bound = self.shutdown_bound(*region);
            self.judge(now, *open, bound, region.to_string(), what)
        });
        shards.chain(shutdowns).collect()
    }

    fn bound(&self, phase: Phase) -> Duration {
        match phase {
            Phase::Acking => self.bounds.acking,
            Phase::Stopping => self.bounds.stopping,
            Phase::Homeless => self.bounds.homeless,
        }
    }

    /// The bounds of the phases from `first` to `last`, both included.
    fn bound_through(&self, first: Phase, last: Phase) -> Duration {
        [Phase::Acking, Phase::Stopping, Phase::Homeless]
            .into_iter()
            .filter(|p| (first..=last).contains(p))
            .map(|p| self.bound(p))
            .sum()
    }

    fn open(&self, now: Instant) -> Open {
        Open {
            since: now,
            coordinators: self.coordinators,
            round: None,
            owner_local: false,
        }
    }

    /// Moves `shard` to `next`, judging the phases that ended (those before `next`). A move is
    /// judged only if one coordinator ran it throughout: a new coordinator may not have heard
    /// of the shard at all, and then allocates it only when someone asks for it.
    fn advance(&mut self, now: Instant, shard: ShardId, next: Phase) -> Option<Stall> {
        let mut open = self.open(now);
        let previous = self.shards.get(&shard).copied();
        if let Some((_, since)) = previous.filter(|(ended, _)| *ended < next) {
            open.coordinators = since.coordinators;
        }
        let (ended, since) = self.shards.insert(shard, (next, open))?;
        if ended >= next {
            // A new move of the shard (its previous one ended unseen).
            return None;
        }
        let bound = self.bound_through(ended, Phase::Acking.max(ended).max(prev(next)));
        self.judge(now, since, bound, shard.to_string(), ended.describe())
    }

    /// A stall if a phase begun under `open` and ending (or still open) at `now` overran
    /// `bound` in a calm cluster under one coordinator.
    fn judge(
        &self,
        now: Instant,
        open: Open,
        bound: Duration,
        subject: String,
        what: &str,
    ) -> Option<Stall> {
        let calm = self.calm_before(open.since);
        let took = now.saturating_duration_since(open.since);
        let overran = calm && open.coordinators == self.coordinators && took > bound;
        overran.then(|| Stall {
            subject,
            detail: format!(
                "{what} took {:.3}s (bound {:.3}s) with no fault since {}",
                took.as_secs_f64(),
                bound.as_secs_f64(),
                self.last_fault
                    .map_or_else(|| "the start".to_owned(), |f| f.to_string()),
            ),
        })
    }
}

/// A graceful operation that overran its bound.
#[derive(Debug)]
pub(crate) struct Stall {
    /// The shard or region it concerns.
    pub(crate) subject: String,
    pub(crate) detail: String,
}

/// The coordinator epoch of a move that began unseen: never the current one.
const UNKNOWN: u64 = u64::MAX;

/// The phase before `phase` (the first phase has none: itself).
fn prev(phase: Phase) -> Phase {
    match phase {
        Phase::Acking | Phase::Stopping => Phase::Acking,
        Phase::Homeless => Phase::Stopping,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use shoal_core::{HandoffRound, Instant, MemberId, ShardId, ShardingSettings};

    use super::Stalls;
    use crate::options::Options;

    fn member(node: u64) -> MemberId {
        MemberId::new(node, 1)
    }

    /// Entities that ignore their stop hold a handoff until it forces them: a move whose owner
    /// shares the coordinator's node shows nothing on the wire after `BeginHandOff`, so it is
    /// judged against every phase it may be in; one whose `HandOff` would have been seen is
    /// judged against the acknowledgements alone.
    #[test]
    fn a_move_owned_on_the_coordinators_node_is_judged_through_its_stop() {
        let mut opts = Options::for_seed(1);
        opts.host.ignore_stop = 0.2;
        let settings = ShardingSettings::default();
        let stalls = |owner: u64| {
            let mut stalls = Stalls::new(&opts, &settings, Duration::from_secs(7));
            let roles = (member(1), member(owner));
            assert!(
                stalls
                    .begin_handoff(Instant::from_secs(100), ShardId(3), roles, HandoffRound(1))
                    .is_none()
            );
            stalls
        };
        let stopping = Instant::from_secs(100 + 20);
        assert!(stalls(1).overdue(stopping).is_empty());
        let remote = stalls(2).overdue(stopping);
        assert_eq!(remote.len(), 1, "{remote:?}");
        assert!(
            remote[0].detail.contains("the acknowledgements"),
            "{remote:?}"
        );
        let stuck = stalls(1).overdue(Instant::from_secs(100 + 600));
        assert_eq!(stuck.len(), 1, "{stuck:?}");
    }

    /// With a handoff timeout shorter than the acknowledgements may take, a round on the
    /// coordinator's node may have been abandoned unseen: not a stall while the timeout is
    /// legitimately short (seed 10396883068).
    #[test]
    fn a_local_round_past_a_short_deadline_may_have_been_abandoned() {
        let mut opts = Options::for_seed(1);
        opts.host.ignore_stop = 0.2;
        let settings = ShardingSettings {
            handoff_timeout: Duration::from_millis(1_100),
            ..ShardingSettings::default()
        };
        let mut stalls = Stalls::new(&opts, &settings, Duration::from_secs(7));
        let roles = (member(1), member(1));
        let begun =
            stalls.begin_handoff(Instant::from_secs(100), ShardId(3), roles, HandoffRound(1));
        assert!(begun.is_none());
        let late = stalls.overdue(Instant::from_secs(100 + 600));
        assert!(late.is_empty(), "{late:?}");
    }
}
