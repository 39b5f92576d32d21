//! The node's remember store as the host's effects reach it: each request on its own task,
//! its completion sent back to the host loop.

use std::sync::Arc;
use std::time::Duration;

use shoal_core::{Input, StoreCompletion, StoreRequest};
use tokio::sync::mpsc;

use super::{RememberStore, execute};
use crate::metric_names;

/// The node's remember store and where its answers go back to the host loop.
pub(crate) struct StoreLink {
    store: Arc<dyn RememberStore>,
    /// A request not answered within this fails (and the core retries it).
    timeout: Duration,
    done: mpsc::UnboundedSender<Input>,
}

impl StoreLink {
    pub(crate) fn new(
        store: Arc<dyn RememberStore>,
        timeout: Duration,
        done: mpsc::UnboundedSender<Input>,
    ) -> Self {
        Self {
            store,
            timeout,
            done,
        }
    }

    /// Runs `request` against the store. One task per request: the core keeps at most one in
    /// flight per shard, so requests of different shards overlap and a slow one holds up only
    /// its own shard.
    pub(crate) fn spawn(&self, request: StoreRequest) {
        metrics::counter!(metric_names::REMEMBER_STORE_REQUESTS_TOTAL).increment(1);
        let (store, timeout, done) = (self.store.clone(), self.timeout, self.done.clone());
        tokio::spawn(async move {
            let started = std::time::Instant::now();
            let completion = execute(&*store, &request, timeout).await;
            let seconds = started.elapsed().as_secs_f64();
            let histogram = metric_names::STORE_WRITE_SECONDS;
            metrics::histogram!(histogram, "store" => "remember").record(seconds);
            if let StoreCompletion::Failed(reason) = &completion {
                metrics::counter!(metric_names::REMEMBER_STORE_FAILURES_TOTAL).increment(1);
                tracing::warn!(?request, %reason, "remember store request failed");
            }
            // The host is gone only when the node stopped; nobody waits for the answer then.
            let _ = done.send(Input::StoreCompleted {
                request,
                completion,
            });
        });
    }
}
