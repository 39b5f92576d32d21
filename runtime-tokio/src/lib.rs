//! Shoal's tokio runtime: what applications embed. Under construction (issue "Runtime"): the
//! pieces that exist are the sans-IO ones the async host will drive.

pub mod clock;
pub mod entity;
pub mod host;
pub mod transport;
