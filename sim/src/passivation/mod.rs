//! The passivation simulator: replays access traces against each of the core's passivation
//! policies (`shoal_core::passivation`) and against the offline optimal, and tables their hit
//! rates, the share of accesses that find their entity still active.
//!
//! The traces are synthetic, each probing one weakness ([`Synthetic`]), or read from a file of
//! entity ids ([`Trace::read_file`]). The optimal is Belady's MIN ([`optimal_hits`]): it sees
//! the future, so no policy beats it, and a policy's share of its hit rate says how much room
//! is left.

mod compare;
mod optimal;
mod synthetic;
mod trace;
mod zipf;

pub use compare::{Comparison, TraceResult, compare, policy_hits};
pub use optimal::optimal_hits;
pub use synthetic::{Synthetic, select};
pub use trace::Trace;

#[cfg(test)]
mod tests;
