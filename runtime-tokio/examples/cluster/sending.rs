//! How a worker's increments reach the counters: as reliable sends (the default: a reliable
//! producer per worker; a send completes once the counter has persisted the increment, and a
//! message redelivered after a crash or a move takes effect once), or as plain asks
//! (`--delivery ask`: an ask that times out leaves the worker not knowing whether the
//! increment happened).

use std::time::Duration;

use shoal::delivery::{ProducerSettings, ReliableProducer};
use shoal::{AskError, PersistError, Region};
use tokio::task::JoinHandle;

use crate::member::{Counter, CounterOp, entity_id};

/// How long an increment may take before it counts as failed (an ask) or slow (a reliable
/// send, which goes on until confirmed).
pub(crate) const ASK_TIMEOUT: Duration = Duration::from_secs(3);

/// `--delivery`: how increments are sent.
#[derive(Clone, Copy, Debug, Eq, PartialEq, clap::ValueEnum)]
pub(crate) enum DeliveryMode {
    /// Reliable producers: every increment is applied exactly once.
    Reliable,
    /// Plain asks with a timeout.
    Ask,
}

/// A worker's way to the counters.
#[derive(Clone)]
pub(crate) enum Sender {
    Ask(Region<Counter>),
    Reliable(ReliableProducer<Counter>),
}

/// What became of one increment.
pub(crate) enum Outcome {
    /// Acknowledged (the ask's reply) or confirmed (the reliable send).
    Done,
    /// Failed, with its label for the table; `true` if the harness's node stopped.
    Failed(String, bool),
    /// A reliable send not confirmed within [`ASK_TIMEOUT`]: it goes on in this task.
    Slow(JoinHandle<Self>),
}

impl Sender {
    /// Worker `sender`'s way to the counters of `region`.
    pub(crate) async fn new(
        mode: DeliveryMode,
        region: &Region<Counter>,
        sender: u32,
    ) -> Result<Self, String> {
        match mode {
            DeliveryMode::Ask => Ok(Self::Ask(region.clone())),
            DeliveryMode::Reliable => {
                let settings = ProducerSettings {
                    resend_after: Duration::from_secs(1),
                    ..ProducerSettings::default()
                };
                let producer = region
                    .reliable_producer(format!("worker-{sender}"), settings)
                    .await
                    .map_err(|e| format!("worker {sender}'s producer: {e}"))?;
                Ok(Self::Reliable(producer))
            }
        }
    }

    /// Sends one increment of `entity`.
    pub(crate) async fn increment(&self, entity: u32, op: CounterOp) -> Outcome {
        match self {
            Self::Ask(region) => {
                let counter = region.entity_ref(entity_id(entity));
                match counter.ask(&op, ASK_TIMEOUT).await {
                    Ok(Ok(_)) => Outcome::Done,
                    Ok(Err(error)) => Outcome::Failed(persist_label(&error).into(), false),
                    Err(AskError::ShuttingDown) => Outcome::Failed("ShuttingDown".into(), true),
                    Err(error) => Outcome::Failed(ask_label(&error), false),
                }
            }
            Self::Reliable(producer) => {
                let producer = producer.clone();
                let mut send = tokio::spawn(async move {
                    match producer.send(entity_id(entity), &op).await {
                        Ok(()) => Outcome::Done,
                        Err(error) => Outcome::Failed(format!("{error}"), true),
                    }
                });
                tokio::select! {
                    done = &mut send => done.unwrap_or_else(|e| Outcome::Failed(e.to_string(), true)),
                    () = tokio::time::sleep(ASK_TIMEOUT) => Outcome::Slow(send),
                }
            }
        }
    }
}

fn persist_label(error: &PersistError) -> &'static str {
    // The counter could not persist the increment: it recovers and goes on.
    match error {
        PersistError::Fenced(_) => "persistence (fenced)",
        PersistError::Failed(_) => "persistence (failed)",
        _ => "persistence",
    }
}

fn ask_label(error: &AskError) -> String {
    match error {
        AskError::DeadLetter(reason) => format!("dead letter ({reason:?})"),
        other => format!("{other:?}")
            .split(['(', ' '])
            .next()
            .unwrap_or_default()
            .to_string(),
    }
}
