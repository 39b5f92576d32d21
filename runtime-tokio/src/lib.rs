//! Shoal's tokio runtime: what applications embed (see issue "Runtime"); not built yet.
