//! Deterministic cluster simulator for Shoal (see issue "Simulator"); not built yet.
