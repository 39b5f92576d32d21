//! Probes: named internal branches that a test can ask "was this reached?" about, for the
//! states the wire does not show (a late `ShardStopped` completing a handoff, a keep-majority
//! rule deciding a count, ...). The simulator collects them per run next to its own markers, its
//! coverage test requires them to fire within the default batch, and each kept regression
//! asserts that it still reaches the branch its fix added (a regression that no longer gets
//! there guards nothing).
//!
//! Only the test-only `fault-injection` feature records anything (in a per-thread table, so
//! parallel test threads do not mix their runs); otherwise `hit` compiles to nothing.

#[cfg(feature = "fault-injection")]
use std::cell::RefCell;
#[cfg(feature = "fault-injection")]
use std::collections::BTreeMap;

#[cfg(feature = "fault-injection")]
thread_local! {
    static HITS: RefCell<BTreeMap<&'static str, u64>> = const { RefCell::new(BTreeMap::new()) };
}

/// Records that the branch `name` was reached.
#[inline]
pub(crate) fn hit(name: &'static str) {
    #[cfg(feature = "fault-injection")]
    HITS.with(|hits| *hits.borrow_mut().entry(name).or_default() += 1);
    #[cfg(not(feature = "fault-injection"))]
    let _ = name;
}

/// Takes the probes this thread recorded since the last call (test-only feature).
#[cfg(feature = "fault-injection")]
pub fn take() -> BTreeMap<&'static str, u64> {
    HITS.with(|hits| std::mem::take(&mut *hits.borrow_mut()))
}
