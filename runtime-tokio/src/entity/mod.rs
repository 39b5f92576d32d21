//! Typed entities on top of the core's opaque payloads. So far: the payload formats.

pub mod letter;
