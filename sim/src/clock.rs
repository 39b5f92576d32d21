//! A simulated node's clock: an offset and a bounded drift against true time. Nodes see only
//! their own clocks; the checkers use true time.

use shoal_core::Instant;

/// A node's clock: offset and drift against true time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    pub(crate) offset: u64,
    pub(crate) skew_ppm: i64,
}

impl Clock {
    /// This clock's reading at true time `t`: `t + offset + t·skew/10⁶`, in 64-bit arithmetic
    /// (split so that `t·skew` cannot overflow; this runs twice per simulated event).
    pub(crate) fn local(self, t: Instant) -> Instant {
        if self.skew_ppm == 0 {
            // A clock without drift (the bench's): the offset alone, as the formula gives.
            return Instant(t.as_nanos().wrapping_add(self.offset));
        }
        let t = t.as_nanos() as i64;
        let drift = (t / 1_000_000) * self.skew_ppm + (t % 1_000_000) * self.skew_ppm / 1_000_000;
        Instant((t + self.offset as i64 + drift) as u64)
    }

    /// The true time at which this clock reads `local` (rounded up: never earlier).
    pub(crate) fn true_time(self, local: Instant) -> Instant {
        let l = local.as_nanos() as i64 - self.offset as i64;
        if self.skew_ppm == 0 {
            // Without drift the division below is exact: spare it (it runs after every call).
            return Instant(l.max(0) as u64);
        }
        let scale = 1_000_000 + self.skew_ppm;
        let t = match l.checked_mul(1_000_000) {
            Some(scaled) => (scaled + scale - 1) / scale,
            None => {
                ((i128::from(l) * 1_000_000 + i128::from(scale) - 1) / i128::from(scale)) as i64
            }
        };
        Instant(t.max(0) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_convert_exactly_as_wide_arithmetic_does() {
        for skew_ppm in [-1000, -7, 0, 3, 999] {
            for offset in [0, 123_456_789, 999_999_999] {
                let clock = Clock { offset, skew_ppm };
                for t in [0, 1, 999_999, 1_000_001, 86_400_000_000_123, 1 << 50] {
                    let wide = i128::from(t);
                    let expected =
                        wide + i128::from(offset) + wide * i128::from(skew_ppm) / 1_000_000;
                    let local = clock.local(Instant(t));
                    assert_eq!(i128::from(local.as_nanos()), expected);
                    // A wakeup for a reading fires when the clock shows it, a nanosecond or
                    // two late at most (the division rounds up).
                    let back = clock.true_time(local);
                    assert!(clock.local(back) >= local, "{skew_ppm} {offset} {t}");
                    assert!(back <= Instant(t + 2), "{skew_ppm} {offset} {t}");
                    if skew_ppm == 0 {
                        assert_eq!(back, Instant(t), "without drift the conversion is exact");
                    }
                }
            }
        }
    }
}
