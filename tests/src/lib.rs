//! Checks that span Shoal's crates: the bench binary (`src/bin/bench`), the virtual-cluster
//! example, and the layering check that keeps every crate free of import circles
//! ([`layering`], run by `tests/layering.rs`).

pub mod layering;
