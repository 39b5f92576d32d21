//! Scenario tests across Shoal's crates; populated by the simulator and runtime issues.
