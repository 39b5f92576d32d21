//! The node's lease store as the host's effects reach it: each call on its own task, bounded
//! by a timeout, its answer sent back to the host loop. Leases are named in the store with
//! the cluster's name in front, so that clusters sharing a database never share a lease.

use std::sync::Arc;
use std::time::Duration;

use shoal_core::Input;
use shoal_core::lease::{LeaseAnswer, LeaseCall};
use tokio::sync::mpsc;

use super::LeaseStore;
use crate::metric_names;

/// The node's lease store and where its answers go back to the host loop.
pub(crate) struct LeaseLink {
    store: Arc<dyn LeaseStore>,
    /// Put in front of every lease's name.
    cluster: Arc<str>,
    /// A call not answered within this fails (its outcome unknown; the core acts on that).
    timeout: Duration,
    done: mpsc::UnboundedSender<Input>,
}

impl LeaseLink {
    pub(crate) fn new(
        store: Arc<dyn LeaseStore>,
        cluster: &str,
        timeout: Duration,
        done: mpsc::UnboundedSender<Input>,
    ) -> Self {
        Self {
            store,
            cluster: cluster.into(),
            timeout,
            done,
        }
    }

    /// Runs `call` against the store on a task of its own, and sends its answer back.
    pub(crate) fn spawn(&self, call: LeaseCall) {
        let (store, cluster) = (Arc::clone(&self.store), Arc::clone(&self.cluster));
        let (timeout, done) = (self.timeout, self.done.clone());
        tokio::spawn(async move {
            let answer =
                match tokio::time::timeout(timeout, execute(&*store, &cluster, &call)).await {
                    Ok(answer) => answer,
                    Err(_) => LeaseAnswer::Failed(format!("no answer within {timeout:?}")),
                };
            if let LeaseAnswer::Failed(reason) = &answer {
                metrics::counter!(metric_names::LEASE_CALLS_FAILED_TOTAL).increment(1);
                tracing::warn!(?call, %reason, "lease store call failed");
            }
            // The host is gone only when the node stopped; nobody waits for the answer then.
            let _ = done.send(Input::LeaseAnswered { call, answer });
        });
    }
}

/// Carries `call` out against `store`, for the cluster named `cluster`.
async fn execute(store: &dyn LeaseStore, cluster: &str, call: &LeaseCall) -> LeaseAnswer {
    match call {
        LeaseCall::Acquire {
            name, owner, ttl, ..
        } => {
            let (name, owner) = (format!("{cluster}-{name}"), owner.to_string());
            match store.acquire(&name, &owner, *ttl).await {
                Ok(Some(token)) => LeaseAnswer::Granted(token),
                Ok(None) => LeaseAnswer::Refused,
                Err(error) => LeaseAnswer::Failed(error.to_string()),
            }
        }
        LeaseCall::Release { name, owner, token } => {
            let (name, owner) = (format!("{cluster}-{name}"), owner.to_string());
            match store.release(&name, &owner, *token).await {
                Ok(()) => LeaseAnswer::Released,
                Err(error) => LeaseAnswer::Failed(error.to_string()),
            }
        }
    }
}
