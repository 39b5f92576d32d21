//! What the simulator keeps to judge a region's warning that its coordinator does not answer
//! (`Event::CoordinatorUnanswered`), from what the region sent and received alone: its asks for
//! shard homes on its retry ticks and its registrations since the coordinator last answered.
//!
//! The counts reset on everything that may reset the region's own (any shard-home answer, a
//! view naming another coordinator, its registration acknowledged), so they never exceed the
//! region's: a warning they call owed is owed.
//!
//! The same record judges the registrations' rhythm (Akka's backoff): retries start at the
//! initial backoff and double up to the retry interval, each within ±10 % jitter, so two
//! retries are never closer than 90 % of the initial backoff, and an unacknowledged region
//! retries within 110 % of the retry interval.

use std::collections::BTreeMap;
use std::time::Duration;

use shoal_core::{Instant, MemberId, ShardId};

/// Unanswered rounds after which a region warns (Akka warns from its fifth retry on).
pub(crate) const WARN_AFTER: u32 = 5;

/// How far from one retry interval apart two asks may be and still be consecutive ticks'.
const TICK_SLACK: Duration = Duration::from_micros(1);

/// How far timers may stray from their deadlines in local time (conversions between true and
/// local time round).
const CLOCK_SLACK: Duration = Duration::from_millis(1);

/// One region's unanswered requests to its coordinator, in its node's local time.
#[derive(Debug, Default)]
pub(crate) struct Unanswered {
    /// Per shard: when it was last asked for on a retry tick, and how many ticks in a row
    /// asked for it since the last answer.
    asks: BTreeMap<ShardId, (Instant, u32)>,
    /// When it last asked for any shard's home.
    last_ask: Option<Instant>,
    /// The member its last ask or registration went to.
    last_to: Option<MemberId>,
    /// The coordinator its view last named (`None` until its first view change).
    named: Option<Option<MemberId>>,
    /// Registrations sent on its own retries since the last acknowledgement or view change.
    registrations: u32,
    /// The coordinator asked it to register again: the registration sent in reply is not one
    /// of its retries.
    reply_owed: bool,
    /// When it last sent a registration, and whether as a proxy; `None` after anything that
    /// may restart its backoff or delay its timers (a view change, a pause).
    last_register: Option<(Instant, bool)>,
    /// When it last warned.
    last_warning: Option<Instant>,
    /// Since when it owes a warning for its unacknowledged registrations.
    owed_since: Option<Instant>,
}

impl Unanswered {
    /// The region asked where `shard` lives at `now`. An ask one retry interval after the
    /// shard's last counted one is the next tick's; an earlier one (its first letter, a
    /// registration, a stop) is not a round; a later one starts a new run, since a tick
    /// between asked for nothing and so may have reset the region's count. Returns the run's
    /// length.
    pub(crate) fn asked(
        &mut self,
        now: Instant,
        to: MemberId,
        shard: ShardId,
        interval: Duration,
    ) -> u32 {
        self.last_ask = Some(now);
        self.asking(to);
        // Ticks fire exactly one interval apart in local time (less the rounding of clock
        // conversions); an ask at another instant that close to it is all but impossible.
        let slack = TICK_SLACK;
        let run = self.asks.entry(shard).or_insert((now, 0));
        let since = now.saturating_duration_since(run.0);
        if run.1 == 0 || since > interval + slack {
            *run = (now, 1);
        } else if since + slack >= interval {
            *run = (now, run.1 + 1);
        }
        run.1
    }

    /// Whether the region asked for a shard's home at `now`.
    pub(crate) fn asked_at(&self, now: Instant) -> bool {
        self.last_ask == Some(now)
    }

    /// The longest run of tick asks that reached `now`.
    pub(crate) fn rounds_at(&self, now: Instant) -> u32 {
        let runs = self.asks.values().filter(|(at, _)| *at == now);
        runs.map(|(_, rounds)| *rounds).max().unwrap_or(0)
    }

    /// A shard home (or a shard to host) reached the region: every run ends.
    pub(crate) fn homes_answered(&mut self) {
        self.asks.clear();
    }

    /// The member the region last asked or registered with.
    pub(crate) fn last_to(&self) -> Option<MemberId> {
        self.last_to
    }

    /// The region sent a registration to `to` at `now` (as a proxy if `proxy`); `Err` with the
    /// gap if it came sooner than 90 % of `initial` (the initial backoff) after the last one.
    /// A reply to the coordinator's request to register, or a change from region to proxy
    /// (which registers at once), is no retry.
    pub(crate) fn registered_to(
        &mut self,
        now: Instant,
        to: MemberId,
        proxy: bool,
        initial: Duration,
    ) -> Result<(), Duration> {
        self.asking(to);
        let last = self.last_register.replace((now, proxy));
        if std::mem::take(&mut self.reply_owed) {
            return Ok(());
        }
        self.registrations = self.registrations.saturating_add(1);
        match last {
            Some((at, was_proxy)) if was_proxy == proxy => {
                let gap = now.saturating_duration_since(at);
                let least = initial - initial / 10;
                if gap + CLOCK_SLACK < least {
                    return Err(gap);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Since when the region, unacknowledged, has not retried its registration, if that is
    /// longer than 110 % of `interval` at `now`.
    pub(crate) fn registration_retry_overdue(
        &self,
        now: Instant,
        interval: Duration,
    ) -> Option<Instant> {
        let (at, _) = self.last_register?;
        let latest = at + interval + interval / 10 + CLOCK_SLACK;
        (now > latest).then_some(at)
    }

    /// The region's process was paused: its timers ran late.
    pub(crate) fn paused(&mut self) {
        self.last_register = None;
    }

    /// A request goes to `to`: if that is another coordinator than the last one, the region
    /// counts afresh (it does on every coordinator change, which some hosts make without a
    /// view-change event).
    fn asking(&mut self, to: MemberId) {
        if self.last_to.replace(to) != Some(to) {
            self.reset();
        }
    }

    /// Its view changed and names `coordinator` for the type: another one than before resets
    /// everything (a region's counts and backoff restart only then).
    pub(crate) fn coordinator_named(&mut self, coordinator: Option<MemberId>) {
        if self.named.replace(coordinator) != Some(coordinator) {
            self.reset();
        }
    }

    /// The coordinator asked the region to register again.
    pub(crate) fn register_requested(&mut self) {
        self.reply_owed = true;
    }

    /// The region's registration was acknowledged, or its view names another coordinator:
    /// everything counted so far may have been reset.
    pub(crate) fn reset(&mut self) {
        self.asks.clear();
        self.registrations = 0;
        self.owed_since = None;
        self.last_register = None;
    }

    /// The region warned at `now`.
    pub(crate) fn warned(&mut self, now: Instant) {
        self.last_warning = Some(now);
        self.owed_since = None;
    }

    /// Whether the region warned at `now`.
    pub(crate) fn warned_at(&self, now: Instant) -> bool {
        self.last_warning == Some(now)
    }

    /// Whether a warning for unacknowledged registrations is owed.
    pub(crate) fn owes_warning(&self) -> bool {
        self.owed_since.is_some()
    }

    /// At the end of a call at `now`, with `buffered` letters held: if it has gone unanswered
    /// `WARN_AFTER` times and held letters since, its retry tick (at most one interval apart,
    /// which a timer call at or after `now` has fired) owes a warning. Returns since when a
    /// warning has been owed, if `tick_fired` and it is overdue.
    pub(crate) fn registration_warning_overdue(
        &mut self,
        now: Instant,
        buffered: usize,
        tick_fired: bool,
        interval: Duration,
    ) -> Option<Instant> {
        if self.registrations < WARN_AFTER || buffered == 0 {
            self.owed_since = None;
            return None;
        }
        let since = *self.owed_since.get_or_insert(now);
        let due = since + interval + interval / 100;
        (tick_fired && now > due).then_some(since)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const I: Duration = Duration::from_secs(1);
    const C: MemberId = MemberId {
        node: shoal_core::NodeId(1),
        incarnation: shoal_core::Incarnation(1),
    };

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn asks_one_interval_apart_make_a_run_and_earlier_ones_do_not_count() {
        let mut u = Unanswered::default();
        let shard = ShardId(3);
        assert_eq!(u.asked(at(0), C, shard, I), 1);
        assert_eq!(
            u.asked(at(300), C, shard, I),
            1,
            "a first letter's ask is no round"
        );
        assert_eq!(u.asked(at(1000), C, shard, I), 2);
        assert_eq!(u.asked(at(1999), C, shard, I), 2, "not a tick: too early");
        assert_eq!(u.asked(at(2000), C, shard, I), 3);
        assert_eq!(u.rounds_at(at(2000)), 3);
        assert_eq!(u.rounds_at(at(1000)), 0, "no run reached that instant");
        assert_eq!(
            u.asked(at(4000), C, shard, I),
            1,
            "a tick between asked nothing"
        );
        u.homes_answered();
        assert_eq!(u.asked(at(5000), C, shard, I), 1);
    }

    #[test]
    fn a_warning_for_registrations_is_owed_one_interval_after_the_fifth() {
        let mut u = Unanswered::default();
        let initial = I / 8;
        u.register_requested();
        u.registered_to(at(0), C, false, initial).unwrap();
        for k in 1..WARN_AFTER {
            u.registered_to(at(u64::from(k) * 125), C, false, initial)
                .unwrap();
        }
        assert_eq!(u.registration_warning_overdue(at(500), 3, true, I), None);
        u.registered_to(at(625), C, false, initial).unwrap();
        assert_eq!(u.registration_warning_overdue(at(700), 3, true, I), None);
        assert_eq!(u.registration_warning_overdue(at(1800), 3, false, I), None);
        assert_eq!(
            u.registration_warning_overdue(at(1800), 3, true, I),
            Some(at(700))
        );
        u.warned(at(1800));
        assert_eq!(u.registration_warning_overdue(at(1900), 3, true, I), None);
        assert_eq!(u.registration_warning_overdue(at(2000), 0, true, I), None);
        u.reset();
        assert_eq!(u.registration_warning_overdue(at(9000), 3, true, I), None);
    }

    #[test]
    fn registrations_keep_their_backoff() {
        let mut u = Unanswered::default();
        let initial = I / 8;
        u.registered_to(at(0), C, false, initial).unwrap();
        assert_eq!(
            u.registered_to(at(100), C, false, initial),
            Err(Duration::from_millis(100)),
            "sooner than 90 % of the initial backoff"
        );
        u.registered_to(at(213), C, false, initial).unwrap();
        u.register_requested();
        u.registered_to(at(214), C, false, initial)
            .expect("a reply to the coordinator is no retry");
        u.registered_to(at(215), C, true, initial)
            .expect("a proxy registers at once");
        assert_eq!(u.registration_retry_overdue(at(1315), I), None);
        assert_eq!(u.registration_retry_overdue(at(1317), I), Some(at(215)));
        u.paused();
        assert_eq!(u.registration_retry_overdue(at(5000), I), None);
        let other = MemberId {
            node: shoal_core::NodeId(2),
            incarnation: shoal_core::Incarnation(1),
        };
        u.registered_to(at(5001), C, true, initial).unwrap();
        u.registered_to(at(5002), other, true, initial)
            .expect("another coordinator: the backoff starts again");
    }
}
