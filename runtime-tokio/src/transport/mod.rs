//! The network transport between members. So far: the connection handshake (a sans-IO state
//! machine the peer tasks will drive) and the envelope frames.

pub mod frame;
pub mod handshake;

#[cfg(test)]
mod handshake_tests;
