//! The counting allocator behind every memory row: the system allocator with byte counters
//! (`stats_alloc`), so memory figures are measured, not estimated. Its counters cost a few
//! relaxed atomic adds per allocation, paid by the baselines and the measured code alike.

use std::alloc::System;

use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Heap bytes live in the whole process now.
pub(crate) fn live_bytes() -> isize {
    let stats = GLOBAL.stats();
    stats.bytes_allocated as isize - stats.bytes_deallocated as isize + stats.bytes_reallocated
}
