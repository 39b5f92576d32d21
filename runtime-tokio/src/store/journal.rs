//! The node's way to its state store: recoveries go straight to it; writes go through one
//! writer task that groups every write waiting into one transaction (group commit), so that
//! many entities writing at once pay for one commit, not one each.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use tokio::sync::{mpsc, oneshot};

use super::{Recovered, StateKey, StateStore, StateWrite, StoreError};
use crate::metric_names;

/// Most writes grouped into one transaction.
const MAX_GROUP: usize = 512;

/// Writes waiting for the writer; an entity waits for its own, so this bounds nothing the
/// entities' mailboxes do not already bound.
const QUEUE: usize = 4096;

/// One write waiting, with who waits for its outcome.
struct Pending {
    key: StateKey,
    write: StateWrite,
    done: oneshot::Sender<Result<(), StoreError>>,
}

/// A handle to the node's state store (cheap to clone: every persistent entity holds one).
#[derive(Clone)]
pub(crate) struct Journal {
    store: Arc<dyn StateStore>,
    writes: mpsc::Sender<Pending>,
    timeout: Duration,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Journal {
    /// Starts the writer task over `store`; a recovery or a group that takes longer than
    /// `timeout` fails (its outcome unknown).
    pub(crate) fn start(store: Arc<dyn StateStore>, timeout: Duration) -> Self {
        let (writes, queue) = mpsc::channel(QUEUE);
        tokio::spawn(write_groups(Arc::clone(&store), queue, timeout));
        Self {
            store,
            writes,
            timeout,
        }
    }

    /// Claims the key's epoch and reads the entity's state.
    pub(crate) async fn recover(&self, key: &StateKey) -> Result<Recovered, StoreError> {
        let read = AssertUnwindSafe(self.store.recover(key)).catch_unwind();
        match tokio::time::timeout(self.timeout, read).await {
            Ok(Ok(recovered)) => recovered,
            Ok(Err(_)) => Err(StoreError::Unavailable("the state store panicked".into())),
            Err(_) => Err(StoreError::Unavailable(format!(
                "recovery timed out after {:?}",
                self.timeout
            ))),
        }
    }

    /// Makes `write`, grouped with whatever else is waiting; its own outcome.
    pub(crate) async fn write(&self, key: StateKey, write: StateWrite) -> Result<(), StoreError> {
        let (done, outcome) = oneshot::channel();
        let pending = Pending { key, write, done };
        if self.writes.send(pending).await.is_err() {
            return Err(StoreError::Unavailable("the node is stopping".into()));
        }
        outcome
            .await
            .unwrap_or_else(|_| Err(StoreError::Unavailable("the state writer stopped".into())))
    }
}

/// The writer: takes every write waiting (up to [`MAX_GROUP`]) and makes them in one call.
async fn write_groups(
    store: Arc<dyn StateStore>,
    mut queue: mpsc::Receiver<Pending>,
    timeout: Duration,
) {
    let mut group = Vec::new();
    while let Some(first) = queue.recv().await {
        group.push(first);
        while group.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(pending) => group.push(pending),
                Err(_) => break,
            }
        }
        let (writes, waiting): (Vec<_>, Vec<_>) =
            group.drain(..).map(|p| ((p.key, p.write), p.done)).unzip();
        metrics::histogram!(metric_names::STATE_WRITE_GROUP_SIZE).record(writes.len() as f64);
        let made = AssertUnwindSafe(store.write(&writes)).catch_unwind();
        let started = std::time::Instant::now();
        let made = tokio::time::timeout(timeout, made).await;
        let seconds = started.elapsed().as_secs_f64();
        metrics::histogram!(metric_names::STORE_WRITE_SECONDS, "store" => "state").record(seconds);
        let outcomes = match made {
            Ok(Ok(Ok(outcomes))) if outcomes.len() == writes.len() => outcomes,
            Ok(Ok(Ok(outcomes))) => {
                let reason = format!("{} outcomes for {} writes", outcomes.len(), writes.len());
                vec![Err(StoreError::Invalid(reason)); writes.len()]
            }
            Ok(Ok(Err(error))) => vec![Err(error); writes.len()],
            Ok(Err(_)) => {
                let error = StoreError::Unavailable("the state store panicked".into());
                vec![Err(error); writes.len()]
            }
            Err(_) => {
                let reason = format!("write timed out after {timeout:?}");
                vec![Err(StoreError::Unavailable(reason)); writes.len()]
            }
        };
        for (done, outcome) in waiting.into_iter().zip(outcomes) {
            if outcome.is_err() {
                metrics::counter!(metric_names::STATE_WRITES_FAILED_TOTAL).increment(1);
            }
            let _ = done.send(outcome);
        }
    }
}
