//! Reliable delivery to sharded entities, as two pure machines its hosts drive (the runtime
//! over its application-message path, the simulator the same): a [`Producer`] numbers what one
//! producer sends one entity, keeps it until the entity confirms it, holds back what the
//! entity's demand does not cover, and resends what is unconfirmed after a timeout or a move;
//! a [`Consumer`] tells, for each producer, whether a message is the next to apply, a duplicate
//! of one applied already, or one past a gap, and says what to confirm and how much more to
//! send.
//!
//! ```text
//!  producer ── (producer, seq, payload) ──▶ entity: Consumer::handle_message
//!     ▲          resent until confirmed          Apply → processed → Confirm
//!     └──────── Confirm { up_to, demand, resend } ◀──┘   Duplicate / Gap → Confirm
//! ```
//!
//! An [`Outbox`] holds one producer's [`Producer`]s, one per entity, with a bound on what they
//! hold unconfirmed together and the timers of their resends: what a host drives.
//!
//! A consumer's [`HighWater`] is what makes delivery *effectively once*: stored with the
//! entity's state, in the same conditional write, it survives a crash or a handoff with the
//! state it describes, and a message redelivered afterwards is recognised as applied. Kept in
//! memory only (a plain entity), it makes delivery at-least-once across a move.

mod consumer;
mod outbox;
mod producer;

pub use consumer::{Confirm, Consumer, HighWater, Mark, Verdict};
pub use outbox::Outbox;
pub use producer::{Producer, ProducerSettings, Transmit, WindowFull};

use serde::{Deserialize, Serialize};

/// A producer's stable name: a producer restarted with the same id resumes its sequence (from
/// its durable queue) and its consumers' high-water marks still apply to it.
#[derive(Clone, Debug, Deserialize, Eq, Hash, Ord, PartialEq, PartialOrd, Serialize)]
pub struct ProducerId(pub std::sync::Arc<str>);

impl ProducerId {
    /// The producer named `name`.
    pub fn new(name: impl Into<std::sync::Arc<str>>) -> Self {
        Self(name.into())
    }
}

impl std::fmt::Display for ProducerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What travels with a reliably delivered message: whose it is and where it stands.
#[derive(Clone, Debug, Deserialize, Eq, Hash, PartialEq, Serialize)]
pub struct Tag {
    /// The producer.
    pub producer: ProducerId,
    /// The producer's session: a producer that restarts without its queue starts a newer one,
    /// numbering from 1 again; a consumer forgets an older session's marks.
    pub session: u64,
    /// The message's place in the session's sequence to this entity.
    pub seq: Seq,
    /// Every message of the session up to this one has been confirmed to the producer, so
    /// some incarnation of the entity applied it: a consumer that has no mark of its own
    /// (a plain entity's next incarnation) starts from here instead of asking for them again.
    pub confirmed: Seq,
}

/// A message's place in one producer's sequence to one entity (from 1).
#[derive(
    Clone, Copy, Debug, Default, Deserialize, Eq, Hash, Ord, PartialEq, PartialOrd, Serialize,
)]
pub struct Seq(pub u64);

#[cfg(test)]
mod tests;
