//! What the transport counts: exported through the `metrics` facade and readable as a
//! snapshot ([`crate::Node::stats`]) so tests and operators see the same figures.

use std::sync::atomic::{AtomicU64, Ordering};

use super::handshake::HandshakeError;
use crate::metric_names;

/// The transport's counters (shared by its tasks).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    dialed: AtomicU64,
    accepted: AtomicU64,
    dial_failures: AtomicU64,
    handshakes_failed: AtomicU64,
    frames_rejected: AtomicU64,
    frames_received: AtomicU64,
    frames_sent: AtomicU64,
    replaced: AtomicU64,
}

/// A snapshot of the transport's counters.
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq)]
#[non_exhaustive]
pub struct TransportStats {
    /// Outbound connections established (handshake done).
    pub dialed: u64,
    /// Inbound connections established (handshake done).
    pub accepted: u64,
    /// Dials that failed before a handshake (refused, timed out).
    pub dial_failures: u64,
    /// Handshakes refused or broken off (wrong magic, version, cluster, secret, garbage,
    /// timeout), in either direction.
    pub handshakes_failed: u64,
    /// Frames after the handshake that were refused (oversized, undecodable, forged sender);
    /// each closes its connection.
    pub frames_rejected: u64,
    /// Envelopes received.
    pub frames_received: u64,
    /// Envelopes written.
    pub frames_sent: u64,
    /// Inbound connections closed because the same peer connected again.
    pub replaced: u64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Counters {
    pub(crate) fn dialed(&self) {
        bump(&self.dialed);
        metrics::counter!(metric_names::CONNECTIONS_TOTAL, "direction" => "outbound").increment(1);
    }

    pub(crate) fn accepted(&self) {
        bump(&self.accepted);
        metrics::counter!(metric_names::CONNECTIONS_TOTAL, "direction" => "inbound").increment(1);
    }

    pub(crate) fn dial_failed(&self) {
        bump(&self.dial_failures);
        metrics::counter!(metric_names::DIAL_FAILURES_TOTAL).increment(1);
    }

    pub(crate) fn handshake_failed(&self, error: &HandshakeFailure) {
        bump(&self.handshakes_failed);
        metrics::counter!(metric_names::HANDSHAKES_FAILED_TOTAL, "reason" => error.label())
            .increment(1);
    }

    pub(crate) fn frame_rejected(&self, reason: &'static str) {
        bump(&self.frames_rejected);
        metrics::counter!(metric_names::FRAMES_REJECTED_TOTAL, "reason" => reason).increment(1);
    }

    pub(crate) fn received(&self) {
        bump(&self.frames_received);
    }

    pub(crate) fn sent(&self, frames: u64) {
        self.frames_sent.fetch_add(frames, Ordering::Relaxed);
    }

    pub(crate) fn replaced(&self) {
        bump(&self.replaced);
    }

    pub(crate) fn snapshot(&self) -> TransportStats {
        let read = |c: &AtomicU64| c.load(Ordering::Relaxed);
        TransportStats {
            dialed: read(&self.dialed),
            accepted: read(&self.accepted),
            dial_failures: read(&self.dial_failures),
            handshakes_failed: read(&self.handshakes_failed),
            frames_rejected: read(&self.frames_rejected),
            frames_received: read(&self.frames_received),
            frames_sent: read(&self.frames_sent),
            replaced: read(&self.replaced),
        }
    }
}

/// Why a connection's handshake did not complete.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HandshakeFailure {
    /// The peer broke a rule of the handshake.
    #[error(transparent)]
    Refused(#[from] HandshakeError),
    /// The socket failed, or a frame was over the handshake's cap.
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    /// The peer closed the connection first.
    #[error("closed by the peer")]
    Closed,
    /// It took longer than the handshake timeout.
    #[error("timed out")]
    Timeout,
}

impl HandshakeFailure {
    fn label(&self) -> &'static str {
        match self {
            Self::Refused(HandshakeError::Malformed) => "malformed",
            Self::Refused(HandshakeError::BadMagic(_)) => "magic",
            Self::Refused(HandshakeError::VersionMismatch { .. }) => "version",
            Self::Refused(HandshakeError::ClusterMismatch { .. }) => "cluster",
            Self::Refused(HandshakeError::BadProof) => "proof",
            Self::Refused(_) => "protocol",
            Self::Io(_) => "io",
            Self::Closed => "closed",
            Self::Timeout => "timeout",
        }
    }
}
