//! The host: the one task that owns the node's `Driver` and implements `Io` over the
//! transport and the entities. So far: its request table.

pub mod requests;
