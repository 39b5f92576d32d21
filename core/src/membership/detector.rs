//! Failure detection: which members each member monitors (a bounded ring, not all-to-all, as
//! Akka's heartbeat ring), and the phi-accrual detector that turns heartbeat arrival times into
//! a suspicion level (Hayashibara et al.; Akka's `PhiAccrualFailureDetector`).

use std::collections::VecDeque;

use crate::hash::murmur2;
use crate::id::MemberId;
use crate::membership::settings::FailureDetectorSettings;
use crate::time::Instant;

/// The members `me` monitors: the next `count` after it on a ring ordered by a hash of the
/// member id, so each member is monitored by about `count` others wherever it sits. `members`
/// holds no repeats (a state's members).
pub(crate) fn monitored(me: MemberId, members: &[MemberId], count: usize) -> Vec<MemberId> {
    // Worked out by every member for every state: only the `count` nearest are kept, in one
    // walk, not the whole ring ordered. Going round from `me`: the keys above its key come
    // first (`false` sorts before `true`), then the others, each part in key order.
    let own = ring_key(me);
    let mut nearest: Vec<(bool, (u32, MemberId))> = Vec::with_capacity(count + 1);
    for &m in members.iter().filter(|m| **m != me) {
        let key = ring_key(m);
        let place = (key <= own, key);
        if nearest.len() == count && nearest.last().is_none_or(|last| place >= *last) {
            continue;
        }
        let at = nearest.partition_point(|p| *p < place);
        nearest.insert(at, place);
        nearest.truncate(count);
    }
    nearest.into_iter().map(|(_, (_, m))| m).collect()
}

/// The members in ring order (see [`monitored`]): each monitors the `count` after it, going
/// round. For working out who monitors whom across a whole state at once.
pub(crate) fn ring_order(members: &[MemberId]) -> Vec<MemberId> {
    let mut ring: Vec<(u32, MemberId)> = members.iter().map(|m| ring_key(*m)).collect();
    ring.sort_unstable();
    ring.dedup();
    ring.into_iter().map(|(_, m)| m).collect()
}

/// A member's place on the ring: the hash of its id, the id itself breaking ties.
fn ring_key(m: MemberId) -> (u32, MemberId) {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&m.node.0.to_le_bytes());
    bytes[8..].copy_from_slice(&m.incarnation.0.to_le_bytes());
    (murmur2(&bytes), m)
}

/// Suspicion of one monitored member, from the intervals between its heartbeats.
#[derive(Clone, Debug)]
pub(crate) struct PhiAccrual {
    /// Recent intervals, in milliseconds.
    intervals: VecDeque<f64>,
    sum: f64,
    sum_of_squares: f64,
    last: Option<Instant>,
}

impl PhiAccrual {
    /// A detector that assumes `first_heartbeat_estimate` (± a quarter) until it has measured.
    pub(crate) fn new(settings: &FailureDetectorSettings) -> Self {
        let mean = ms(settings.first_heartbeat_estimate.as_nanos() as u64);
        let mut d = Self {
            intervals: VecDeque::new(),
            sum: 0.0,
            sum_of_squares: 0.0,
            last: None,
        };
        d.record(mean - mean / 4.0, settings.max_sample_size);
        d.record(mean + mean / 4.0, settings.max_sample_size);
        d
    }

    fn record(&mut self, interval: f64, max: usize) {
        if self.intervals.len() >= max {
            if let Some(old) = self.intervals.pop_front() {
                self.sum -= old;
                self.sum_of_squares -= old * old;
            }
        }
        self.intervals.push_back(interval);
        self.sum += interval;
        self.sum_of_squares += interval * interval;
    }

    /// A heartbeat arrived at `now`.
    pub(crate) fn heartbeat(&mut self, now: Instant, settings: &FailureDetectorSettings) {
        if let Some(last) = self.last {
            // A gap that already made the member suspect is not a sample of its rhythm, and
            // neither is one longer than the acceptable pause: that allowance is added to the
            // mean already, and learning such a gap would let every partition teach the
            // detector to sit through a longer next one. (Akka records it: after a 5 s and
            // then a 9 s gap, 20 s of silence stayed under the threshold, the minority of a
            // split never downed itself and its shards ran twice, flapping-links seed 402764.)
            let gap = now.saturating_duration_since(last);
            if self.is_available(now, settings) {
                if gap <= settings.acceptable_heartbeat_pause {
                    self.record(ms(gap.as_nanos() as u64), settings.max_sample_size);
                } else {
                    crate::probe::hit("detector: a gap past the acceptable pause is not learnt");
                }
            }
        }
        self.last = Some(now);
    }

    /// Whether a heartbeat ever arrived.
    pub(crate) fn is_monitoring(&self) -> bool {
        self.last.is_some()
    }

    /// When the last heartbeat arrived (`None` before the first).
    pub(crate) fn last_heard(&self) -> Option<Instant> {
        self.last
    }

    /// How long since the last heartbeat (`None` before the first).
    pub(crate) fn silence(&self, now: Instant) -> Option<std::time::Duration> {
        self.last.map(|last| now.saturating_duration_since(last))
    }

    /// The suspicion level at `now` (0 before the first heartbeat).
    pub(crate) fn phi(&self, now: Instant, settings: &FailureDetectorSettings) -> f64 {
        match self.expected(now, settings) {
            Some((elapsed, mean)) => phi(elapsed, mean, self.std_deviation(settings)),
            None => 0.0,
        }
    }

    /// Whether the member is considered alive at `now`: its suspicion level is under the
    /// threshold. Asked on every heartbeat answer and for every monitored member each round,
    /// nearly always within the expected interval, where phi is at most `log10(2)`: no
    /// logarithm is needed to know it is under any threshold above that.
    pub(crate) fn is_available(&self, now: Instant, settings: &FailureDetectorSettings) -> bool {
        match self.expected(now, settings) {
            Some((elapsed, mean)) if elapsed <= mean && settings.threshold > PHI_WITHIN_MEAN => {
                true
            }
            Some((elapsed, mean)) => {
                phi(elapsed, mean, self.std_deviation(settings)) < settings.threshold
            }
            None => 0.0 < settings.threshold,
        }
    }

    /// Milliseconds since the last heartbeat, and the mean interval plus the acceptable pause
    /// (`None` before the first heartbeat).
    fn expected(&self, now: Instant, settings: &FailureDetectorSettings) -> Option<(f64, f64)> {
        let last = self.last?;
        let mean = self.sum / self.intervals.len() as f64;
        let mean = mean + ms(settings.acceptable_heartbeat_pause.as_nanos() as u64);
        let elapsed = ms(now.saturating_duration_since(last).as_nanos() as u64);
        Some((elapsed, mean))
    }

    /// The standard deviation of the intervals, at least the configured minimum.
    fn std_deviation(&self, settings: &FailureDetectorSettings) -> f64 {
        let n = self.intervals.len() as f64;
        let mean = self.sum / n;
        let variance = (self.sum_of_squares / n - mean * mean).max(0.0);
        variance
            .sqrt()
            .max(ms(settings.min_std_deviation.as_nanos() as u64))
    }
}

/// The most [`phi`] can be while the elapsed time is at most the mean: `e >= 1` there, so
/// `1 - 1 / (1 + e) >= 0.5` and phi `<= -log10(0.5)` (0.30103), with room for rounding.
const PHI_WITHIN_MEAN: f64 = 0.302;

fn ms(nanos: u64) -> f64 {
    nanos as f64 / 1e6
}

/// Akka's logistic approximation of the normal distribution's tail: `-log10(P(later))`.
fn phi(elapsed: f64, mean: f64, std: f64) -> f64 {
    let y = (elapsed - mean) / std;
    let e = (-y * (1.5976 + 0.070566 * y * y)).exp();
    if elapsed > mean {
        -(e / (1.0 + e)).log10()
    } else {
        -(1.0 - 1.0 / (1.0 + e)).log10()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn suspicion_grows_with_silence_and_resets_with_a_heartbeat() {
        let s = FailureDetectorSettings::default();
        let mut d = PhiAccrual::new(&s);
        assert!(!d.is_monitoring());
        assert_eq!(
            d.phi(at(100_000), &s),
            0.0,
            "nothing to suspect before a heartbeat"
        );
        for i in 0..=10 {
            d.heartbeat(at(i * 1000), &s);
        }
        // Heartbeats every second, 3 s of acceptable pause: fine after 2 s, dead after 10 s.
        assert!(d.is_available(at(12_000), &s));
        assert!(d.phi(at(14_000), &s) > d.phi(at(13_000), &s));
        assert!(!d.is_available(at(20_000), &s));
        d.heartbeat(at(20_000), &s);
        assert!(d.is_available(at(20_500), &s));
        assert_eq!(
            d.intervals.len(),
            2 + 10,
            "the long gap was not taken as a sample"
        );
    }

    /// `is_available` skips the logarithm within the expected interval; it must answer as
    /// comparing phi with the threshold does, for thresholds on both sides of `log10(2)`
    /// (a threshold of 0.25 is already crossed just before the mean) and at every moment.
    #[test]
    fn availability_is_phi_under_the_threshold_at_every_moment() {
        for threshold in [
            0.05,
            0.25,
            0.3,
            std::f64::consts::LOG10_2,
            0.302,
            0.31,
            1.0,
            8.0,
            12.0,
        ] {
            let s = FailureDetectorSettings {
                threshold,
                ..FailureDetectorSettings::default()
            };
            let mut d = PhiAccrual::new(&s);
            for i in 0..=20 {
                d.heartbeat(at(i * 1000 + (i * 37) % 90), &s);
            }
            let last = d.last.expect("heard");
            let mut checked_before_mean = 0;
            for step in 0..=40_000 {
                let now = last + Duration::from_micros(step * 500);
                let (elapsed, mean) = d.expected(now, &s).expect("heard");
                checked_before_mean += usize::from(elapsed <= mean);
                assert_eq!(
                    d.is_available(now, &s),
                    d.phi(now, &s) < threshold,
                    "threshold {threshold}, {elapsed} ms after the last heartbeat (mean {mean})"
                );
            }
            assert!(checked_before_mean > 1_000, "the shortcut was exercised");
        }
    }

    /// Gaps under the threshold but past the acceptable pause (a partition or a clog)
    /// are not learnt: a fresh detector that sat through a 5 s and then a 9 s gap still
    /// declares a member unreachable about as soon as one heard every second (flapping-links
    /// seed 402764: learnt, they kept 20 s of silence under the threshold).
    #[test]
    fn gaps_past_the_acceptable_pause_do_not_teach_the_detector_patience() {
        let s = FailureDetectorSettings::default();
        let mut d = PhiAccrual::new(&s);
        let mut t = 0;
        for gap in [0, 5_000, 1_000, 9_000, 1_000] {
            t += gap;
            d.heartbeat(at(t), &s);
        }
        assert!(
            d.intervals.iter().all(|i| *i <= 3_000.0),
            "{:?}",
            d.intervals
        );
        assert!(
            !d.is_available(at(t + 8_000), &s),
            "8 s of silence is a failure"
        );
    }

    #[test]
    fn samples_are_bounded() {
        let s = FailureDetectorSettings {
            max_sample_size: 5,
            ..FailureDetectorSettings::default()
        };
        let mut d = PhiAccrual::new(&s);
        for i in 0..100 {
            d.heartbeat(at(i * 1000), &s);
        }
        assert_eq!(d.intervals.len(), 5);
        assert!(
            (d.sum / 5.0 - 1000.0).abs() < 1e-6,
            "only real intervals remain"
        );
    }

    /// The ring as first written: every member sorted by its key, read round from `me`.
    fn monitored_by_sorting(me: MemberId, members: &[MemberId], count: usize) -> Vec<MemberId> {
        let mut ring: Vec<(u32, MemberId)> = members.iter().map(|m| ring_key(*m)).collect();
        ring.sort_unstable();
        ring.dedup();
        let start = ring.partition_point(|k| *k <= ring_key(me));
        ring.iter()
            .cycle()
            .skip(start)
            .take(ring.len())
            .map(|(_, m)| *m)
            .filter(|m| *m != me)
            .take(count)
            .collect()
    }

    #[test]
    fn the_nearest_members_on_the_ring_are_those_of_the_sorted_ring() {
        let mut rng = crate::rng::Rng::new(11);
        for _ in 0..500 {
            let size = rng.below(40);
            let members: Vec<MemberId> = (0..size)
                .map(|n| MemberId::new(n * 3 + rng.below(3), 1 + rng.below(2)))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            // `me` among the members or not (a member not yet in its own state).
            let me = MemberId::new(rng.below(130), 1 + rng.below(2));
            let count = rng.below(12) as usize;
            assert_eq!(
                monitored(me, &members, count),
                monitored_by_sorting(me, &members, count),
                "{me} of {members:?}, {count}"
            );
        }
    }

    #[test]
    fn the_ring_order_gives_each_member_the_members_it_monitors() {
        let mut rng = crate::rng::Rng::new(12);
        for _ in 0..200 {
            let members: Vec<MemberId> = (0..1 + rng.below(30))
                .map(|n| MemberId::new(n * 2 + rng.below(2), 1 + rng.below(2)))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            let ring = ring_order(&members);
            let count = rng.below(12) as usize;
            for (at, me) in ring.iter().enumerate() {
                let next: Vec<MemberId> = (1..ring.len())
                    .map(|k| ring[(at + k) % ring.len()])
                    .take(count)
                    .collect();
                assert_eq!(next, monitored(*me, &members, count), "{me} of {members:?}");
            }
        }
    }

    #[test]
    fn each_member_is_monitored_by_a_bounded_number_of_others() {
        let members: Vec<MemberId> = (1..=20).map(|n| MemberId::new(n, 1)).collect();
        let mut monitored_by = std::collections::BTreeMap::<MemberId, usize>::new();
        for &m in &members {
            let targets = monitored(m, &members, 5);
            assert_eq!(targets.len(), 5);
            assert!(!targets.contains(&m));
            for t in targets {
                *monitored_by.entry(t).or_default() += 1;
            }
        }
        assert!(
            monitored_by.values().all(|&n| n == 5),
            "a ring: {monitored_by:?}"
        );
        let few = &members[..3];
        assert_eq!(
            monitored(few[0], few, 5).len(),
            2,
            "everyone else when fewer"
        );
        assert_eq!(monitored(few[0], &few[..1], 5), [], "alone");
    }
}
