//! The one place where time is converted: the core's [`shoal_core::Instant`] (nanoseconds
//! since this node started) to and from tokio's clock, so the core never reads a clock and a
//! paused tokio clock (`tokio::time::pause`) drives the whole node in tests.

use std::time::Duration;

/// A node's clock: its origin is when the node started.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    origin: tokio::time::Instant,
}

impl Clock {
    /// A clock starting now.
    pub(crate) fn start() -> Self {
        Self {
            origin: tokio::time::Instant::now(),
        }
    }

    /// The core's time now.
    pub(crate) fn now(&self) -> shoal_core::Instant {
        shoal_core::Instant::ZERO + self.origin.elapsed()
    }

    /// When tokio should wake the node for a core deadline (`Instant::MAX`, "never", maps to
    /// a year from the origin, far past any timer the core sets).
    pub(crate) fn deadline(&self, at: shoal_core::Instant) -> tokio::time::Instant {
        const NEVER: Duration = Duration::from_secs(365 * 24 * 3600);
        let since_origin = Duration::from_nanos(at.as_nanos()).min(NEVER);
        self.origin + since_origin
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn core_time_follows_tokio_time_both_ways() {
        let clock = Clock::start();
        assert_eq!(clock.now(), shoal_core::Instant::ZERO);
        tokio::time::advance(Duration::from_millis(1_500)).await;
        assert_eq!(clock.now(), shoal_core::Instant::from_millis(1_500));

        let due = shoal_core::Instant::from_secs(3);
        tokio::time::sleep_until(clock.deadline(due)).await;
        assert_eq!(clock.now(), due, "woken exactly at the core's deadline");

        let never = clock.deadline(shoal_core::Instant::MAX);
        assert!(never > clock.deadline(shoal_core::Instant::from_secs(1_000_000)));
    }
}
