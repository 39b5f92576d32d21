//! The coordinator lease interface (specified here; an etcd implementation comes with the
//! tokio runtime). Keep-majority downing depends on timing: a member paused longer than
//! failure detection and `down-removal-margin` may still run entities after the majority moved
//! them. A lease closes that gap for the coordinator the way Akka's `lease-implementation`
//! does for singletons: only the lease holder runs the coordinators.
//!
//! The core stays sans-IO. It will ask the host for the lease with
//! [`LeaseRequest::Acquire`] before starting a coordinator, and hear back with a
//! [`LeaseEvent`]:
//!
//! - `Granted`: the coordinator starts (until then requests wait, as before the gate opens);
//! - `Refused`: retried after `retry_interval`;
//! - `Lost` (the host could not renew it within `heartbeat_timeout`): the coordinator stops at
//!   once, and the regions' fencing ignores anything it sent after.
//!
//! The host renews a granted lease every `heartbeat_interval` and must report `Lost` as soon as
//! `last successful renewal + heartbeat_timeout - operation_timeout` passes on its monotonic
//! clock, even if the store still holds the key: a paused holder must give up before anyone
//! else can acquire. Every durable write a coordinator makes (there are none today: the table
//! is rebuilt from registrations) would be fenced by the lease's revision.

use serde::{Deserialize, Serialize};

use crate::id::MemberId;

/// Settings of the coordinator lease (Akka's `akka.coordination.lease` defaults).
#[derive(Clone, Debug, Deserialize, PartialEq, Serialize)]
pub struct LeaseSettings {
    /// The lease's name in the store, e.g. `"<cluster>-shard-coordinator"`.
    pub name: String,
    /// A holder that could not renew for this long has lost the lease.
    pub heartbeat_timeout: std::time::Duration,
    /// How often a holder renews.
    pub heartbeat_interval: std::time::Duration,
    /// The longest a store operation may take.
    pub operation_timeout: std::time::Duration,
    /// How long to wait before asking again after a refusal.
    pub retry_interval: std::time::Duration,
}

impl LeaseSettings {
    /// Akka's defaults for a lease named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            heartbeat_timeout: std::time::Duration::from_secs(120),
            heartbeat_interval: std::time::Duration::from_secs(12),
            operation_timeout: std::time::Duration::from_secs(5),
            retry_interval: std::time::Duration::from_secs(5),
        }
    }
}

/// What the core asks the host to do with a lease.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
pub enum LeaseRequest {
    /// Acquire the named lease for `owner` (and keep renewing it).
    Acquire {
        /// The lease.
        name: String,
        /// Who will hold it.
        owner: MemberId,
    },
    /// Release the named lease (the coordinator stopped).
    Release {
        /// The lease.
        name: String,
        /// Who holds it.
        owner: MemberId,
    },
}

/// What the host reports about a lease.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
pub enum LeaseEvent {
    /// The lease was acquired.
    Granted {
        /// The lease.
        name: String,
    },
    /// Someone else holds it.
    Refused {
        /// The lease.
        name: String,
    },
    /// It could not be renewed in time: stop everything it guards, now.
    Lost {
        /// The lease.
        name: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_messages_round_trip_for_hosts_that_persist_or_log_them() {
        let request = LeaseRequest::Acquire {
            name: "c".into(),
            owner: MemberId::new(1, 2),
        };
        let bytes = postcard::to_allocvec(&request).expect("encodes");
        assert_eq!(postcard::from_bytes::<LeaseRequest>(&bytes), Ok(request));
        let settings = LeaseSettings::new("c");
        assert!(settings.heartbeat_interval < settings.heartbeat_timeout);
    }
}
