//! The core's own notion of time: a point passed in by the host, never read from a clock.
//!
//! [`Deadlines`] is the table of due times the roles keep their timers in.

use std::fmt;
use std::ops::{Add, AddAssign};
use std::time::Duration;

use serde::{Deserialize, Serialize};

mod deadlines;

pub(crate) use deadlines::Deadlines;

/// Nanoseconds since an arbitrary origin chosen by the host. The host passes the current
/// `Instant` into every `handle_*` call; it must never decrease (the [`crate::Driver`] clamps it).
#[derive(
    Clone, Copy, Debug, Default, Deserialize, Eq, Hash, Ord, PartialEq, PartialOrd, Serialize,
)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Instant(pub u64);

impl Instant {
    /// The origin.
    pub const ZERO: Self = Self(0);
    /// A point later than any reachable time; used as "never".
    pub const MAX: Self = Self(u64::MAX);

    /// `secs` seconds after the origin.
    pub const fn from_secs(secs: u64) -> Self {
        Self(secs.saturating_mul(1_000_000_000))
    }

    /// `millis` milliseconds after the origin.
    pub const fn from_millis(millis: u64) -> Self {
        Self(millis.saturating_mul(1_000_000))
    }

    /// Nanoseconds since the origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time elapsed from `earlier` to `self`, or zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Self) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Self;

    /// Saturates at [`Instant::MAX`] rather than overflowing.
    fn add(self, rhs: Duration) -> Self {
        let nanos = u64::try_from(rhs.as_nanos()).unwrap_or(u64::MAX);
        Self(self.0.saturating_add(nanos))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{:03}s",
            self.0 / 1_000_000_000,
            (self.0 / 1_000_000) % 1000
        )
    }
}

/// One of a role's timers by name, and when it is next due (`None`: not armed): a role lists
/// its timers so that its `poll_timeout` and the name of a busy loop's timer read one table.
pub(crate) type NamedDeadline = (&'static str, Option<Instant>);

/// The soonest of a role's named deadlines.
pub(crate) fn soonest(deadlines: &[NamedDeadline]) -> Option<Instant> {
    deadlines.iter().filter_map(|(_, at)| *at).min()
}

/// Keeps the earliest of two optional deadlines (`None`: no deadline); roles use it to answer
/// `poll_timeout`, hosts to combine the core's wakeup with their own deadlines.
pub fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}
