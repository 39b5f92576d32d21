//! Leases with fencing tokens, as a sans-IO machine a host drives: a [`LeaseHolder`] asks an
//! external store (PostgreSQL, etcd, the simulator's) for a named lease, renews it well before
//! it runs out, releases it, and says when it is no longer safe to act on it.
//!
//! ```text
//!  Released ──want──▶ Acquiring ──Granted(token)──▶ Held: renew every `renew_every`
//!     ▲                  │  ▲ Refused: retry          │  Granted → valid longer
//!     │                  └──┘ after `retry_interval`  │  Refused, or no grant before the
//!     └───────────── release ◀────────────────────────┘  validity ends → Lost
//! ```
//!
//! **Validity on the holder's own clock.** A grant is valid for `ttl` from when the store made
//! it. The holder cannot see the store's clock, so it counts from when it *sent* the request
//! (earlier than the store's grant), and shortens the span by the clock drift the settings
//! allow and a safety margin: it acts on the lease only until `sent + ttl × (1 − drift) −
//! margin` by its own clock, which comes before the store's expiry in true time however its
//! clock drifts within the bound. A paused holder finds, when it resumes, that its validity has
//! passed, and stops before acting.
//!
//! **Fencing token.** Every grant carries the store's revision of the lease, which only grows:
//! a new holder's is larger than every earlier holder's. Whatever the lease guards (a shard's
//! entities, a coordinator's allocations) writes with it, and a store that has seen a newer one
//! refuses the write, so an old holder that missed its expiry still cannot do harm.

mod holder;

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use holder::LeaseHolder;

/// A lease's revision (defined with the ids: the remember store's fencing reads it too).
pub use crate::id::FencingToken;

use crate::id::{EntityType, MemberId, ShardId};
use crate::time::Instant;

/// What a lease guards, which names it in the store (a host may prefix the name with its
/// cluster's).
#[derive(Clone, Debug, Deserialize, Eq, Hash, Ord, PartialEq, PartialOrd, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum LeaseName {
    /// A shard's lease: only its holder runs the shard's entities (Akka's per-shard
    /// `lease-implementation`).
    Shard {
        /// The shard's type.
        entity_type: EntityType,
        /// The shard.
        shard: ShardId,
    },
    /// The cluster's downing lease: the side whose leader holds it survives a partition
    /// (lease-majority downing).
    Downing,
    /// A type's coordinator lease: only its holder allocates the type's shards (Akka's
    /// singleton `use-lease`).
    Coordinator {
        /// The type.
        entity_type: EntityType,
    },
}

/// Who asks for a lease: one holder on one member. A member may hold a lease again through a
/// new holder (a shard that stopped and started again there), which the store tells apart from
/// the old one, so that the old one's release cannot end the new one's grant.
#[derive(Clone, Copy, Debug, Deserialize, Eq, Hash, Ord, PartialEq, PartialOrd, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct LeaseOwner {
    /// The member.
    pub member: MemberId,
    /// The holder on that member: a shard's numbered by the member from 1, a coordinator's by
    /// the time it started on the member's clock, the downing lease's 0.
    pub holder: u64,
}

impl std::fmt::Display for LeaseOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.member, self.holder)
    }
}

impl std::fmt::Display for LeaseName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Shard { entity_type, shard } => write!(f, "shard-{entity_type}-{}", shard.0),
            Self::Downing => write!(f, "downing"),
            Self::Coordinator { entity_type } => write!(f, "coordinator-{entity_type}"),
        }
    }
}

/// How a holder uses a lease.
#[derive(Clone, Debug, Deserialize, PartialEq, Serialize)]
pub struct LeaseTerms {
    /// How long a grant lasts in the store: longer than `safety_margin` and `renew_every`
    /// together, with room for a failed renewal or two.
    pub ttl: Duration,
    /// How often a holder renews: well within `ttl`, so that a renewal or two may fail.
    pub renew_every: Duration,
    /// The most a holder's clock may drift against true time, in parts per million.
    pub max_drift_ppm: u32,
    /// Taken off the validity on top of the drift. It must cover the longest stall of the
    /// holder's process (a pause, a long garbage collection: a holder stalled as its validity
    /// ends acts only after it) and the time the host takes to stop what the lease guards
    /// by force (a shard's entities) after it. Past that, only fencing tokens on writes
    /// protect what the lease guards.
    pub safety_margin: Duration,
    /// How long to wait before asking again after a refusal or a failed call.
    pub retry_interval: Duration,
    /// A call not answered within this is taken as failed (its outcome unknown).
    pub operation_timeout: Duration,
}

impl Default for LeaseTerms {
    /// Akka's lease defaults, with renewals every tenth of the ttl and a 1,000 ppm drift.
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(120),
            renew_every: Duration::from_secs(12),
            max_drift_ppm: 1_000,
            safety_margin: Duration::from_secs(1),
            retry_interval: Duration::from_secs(5),
            operation_timeout: Duration::from_secs(5),
        }
    }
}

impl LeaseTerms {
    /// How long after sending the request that won a grant the holder may act on it.
    pub fn validity(&self) -> Duration {
        let drift = self.ttl.as_nanos() * u128::from(self.max_drift_ppm) / 1_000_000;
        let drift = Duration::from_nanos(u64::try_from(drift).unwrap_or(u64::MAX));
        self.ttl
            .saturating_sub(drift)
            .saturating_sub(self.safety_margin)
    }
}

/// What a holder asks of the lease store. The host answers every call with
/// `Input::LeaseAnswered`, echoing it.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum LeaseCall {
    /// Take the lease for `owner` if nobody holds it (or its grant expired), or extend it if
    /// `owner` holds it, for `ttl` from now on the store's clock.
    Acquire {
        /// The lease.
        name: LeaseName,
        /// Who asks.
        owner: LeaseOwner,
        /// How long the grant lasts.
        ttl: Duration,
        /// When the holder sent it, by its clock: a grant counts from then (and an answer to
        /// a call an earlier holder sent is told apart by it).
        sent: Instant,
    },
    /// Give the lease up (only if `owner` holds it under `token`).
    Release {
        /// The lease.
        name: LeaseName,
        /// Who holds it.
        owner: LeaseOwner,
        /// Its grant.
        token: FencingToken,
    },
}

/// The store's answer to a [`LeaseCall`].
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum LeaseAnswer {
    /// An acquire: granted (or extended) under `token`.
    Granted(FencingToken),
    /// An acquire: someone else holds it.
    Refused,
    /// A release: done (or the grant was no longer the caller's).
    Released,
    /// The call failed or timed out: whether it took effect is unknown.
    Failed(String),
}

/// What a holder reports to whatever the lease guards.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum LeaseChange {
    /// The lease is held under this token: act on it.
    Acquired(FencingToken),
    /// It is no longer safe to act on the lease: stop what it guards, now.
    Lost,
}

#[cfg(test)]
mod tests;
