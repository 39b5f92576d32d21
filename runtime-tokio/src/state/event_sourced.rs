//! Event-sourced entities: commands decide events, events change the state, and the journal
//! of events (with snapshots) is what survives.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::versioned::{decode, encode};
use super::{PersistError, Recovered, StateWrite, failure, journal_of, key_of};
use crate::{Entity, EntityContext};

/// The state of an event-sourced entity, with its command and event handlers.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use shoal::{EntityContext, EventSourced, Persist};
///
/// #[derive(Default, Deserialize, Serialize)]
/// struct Counter(u64);
///
/// #[derive(Deserialize, Serialize)]
/// struct Added(u64);
///
/// impl EventSourced for Counter {
///     type Command = u64;
///     type Event = Added;
///     type Reply = u64;
///
///     fn decide(&self, _ctx: &mut EntityContext, add: u64) -> Persist<Added, u64> {
///         Persist::events(vec![Added(add)], self.0 + add)
///     }
///
///     fn apply(&mut self, event: &Added) {
///         self.0 += event.0;
///     }
/// }
/// ```
pub trait EventSourced: Serialize + DeserializeOwned + Send + 'static {
    /// What it is sent.
    type Command: Serialize + DeserializeOwned + Send + 'static;
    /// What it persists.
    type Event: Serialize + DeserializeOwned + Send + 'static;
    /// What it answers, once the events a command decided are durable.
    type Reply: Serialize + DeserializeOwned + Send + 'static;

    /// The version events and snapshots are written with: raise it when their encoding
    /// changes, and read the older ones in [`EventSourced::upcast_event`] and
    /// [`EventSourced::upcast_state`].
    const VERSION: u32 = 1;

    /// Decides what a command does: the events to persist (none for a query) and the reply,
    /// sent once they are durable. Must not change anything itself: the events do, through
    /// [`EventSourced::apply`].
    fn decide(
        &self,
        ctx: &mut EntityContext,
        command: Self::Command,
    ) -> Persist<Self::Event, Self::Reply>;

    /// Applies one event to the state: when it was decided, and again on every recovery, so
    /// it must depend on nothing else.
    fn apply(&mut self, event: &Self::Event);

    /// Reads an event that an older `version` of the type wrote (the default reads none).
    fn upcast_event(version: u32, bytes: &[u8]) -> Result<Self::Event, String> {
        let _ = bytes;
        Err(format!("no upcast from event version {version}"))
    }

    /// Reads a snapshot that an older `version` of the type wrote (the default reads none).
    fn upcast_state(version: u32, bytes: &[u8]) -> Result<Self, String> {
        let _ = bytes;
        Err(format!("no upcast from state version {version}"))
    }
}

/// What a command decided: events to persist, and the reply once they are durable.
#[derive(Debug)]
pub struct Persist<E, R> {
    /// The events, in order.
    pub events: Vec<E>,
    /// The reply.
    pub reply: R,
}

impl<E, R> Persist<E, R> {
    /// Persist `events`, then reply.
    pub fn events(events: Vec<E>, reply: R) -> Self {
        Self { events, reply }
    }

    /// Persist nothing; reply at once.
    pub fn reply(reply: R) -> Self {
        Self {
            events: Vec::new(),
            reply,
        }
    }
}

/// How often an event-sourced entity saves a snapshot of its state, which recovery then
/// starts from instead of the first event.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum Snapshots {
    /// Never: recovery replays every event.
    Never,
    /// After every this many events (at least 1), in the transaction of the event that reaches
    /// the count.
    Every(u64),
}

/// An [`EventSourced`] state run as an entity; address it as `Region<EventSourcedEntity<S>>`.
/// Its answers are `Result<S::Reply, PersistError>`.
pub struct EventSourcedEntity<S> {
    state: S,
    /// The sequence number of the newest event applied.
    seq: u64,
    /// Events applied since the newest snapshot.
    since_snapshot: u64,
    snapshots: Snapshots,
}

impl<S: EventSourced> EventSourcedEntity<S> {
    /// An entity whose state, before its first event, is `initial`.
    pub fn new(initial: S, snapshots: Snapshots) -> Self {
        Self {
            state: initial,
            seq: 0,
            since_snapshot: 0,
            snapshots,
        }
    }

    /// The state as recovered and changed so far.
    pub fn state(&self) -> &S {
        &self.state
    }

    /// The state from the latest snapshot and the events after it.
    fn recover(&mut self, recovered: Recovered) -> Result<(), crate::store::StoreError> {
        if let Some((seq, snapshot)) = &recovered.snapshot {
            self.state = decode(snapshot, S::VERSION, S::upcast_state)?;
            self.seq = *seq;
        }
        self.since_snapshot = 0;
        for (seq, event) in &recovered.events {
            let event: S::Event = decode(event, S::VERSION, S::upcast_event)?;
            self.state.apply(&event);
            self.seq = *seq;
            self.since_snapshot += 1;
        }
        Ok(())
    }

    /// Whether a snapshot is due after `count` more events.
    fn snapshot_due(&self, count: u64) -> bool {
        match self.snapshots {
            Snapshots::Never => false,
            Snapshots::Every(every) => self.since_snapshot + count >= every.max(1),
        }
    }

    /// Applies `events` and writes them (with a snapshot when due) at the next sequence
    /// numbers.
    async fn persist(
        &mut self,
        ctx: &mut EntityContext,
        events: Vec<S::Event>,
    ) -> Result<(), PersistError> {
        let journal = journal_of(ctx)?;
        let encoded: Result<Vec<_>, _> = events.iter().map(|e| encode(e, S::VERSION)).collect();
        let encoded = encoded.map_err(|error| failure(ctx, error))?;
        let count = encoded.len() as u64;
        // Applied before the write: the snapshot holds the state after them. If the write
        // fails, supervision discards this state and recovers from the store.
        for event in &events {
            self.state.apply(event);
        }
        let snapshot = if self.snapshot_due(count) {
            Some(encode(&self.state, S::VERSION).map_err(|error| failure(ctx, error))?)
        } else {
            None
        };
        let write = StateWrite::Events {
            first_seq: self.seq + 1,
            events: encoded,
            snapshot: snapshot.clone(),
            delivered: ctx.inbox().current(),
        };
        journal
            .write(key_of(ctx), write)
            .await
            .map_err(|error| failure(ctx, error))?;
        self.seq += count;
        self.since_snapshot = if snapshot.is_some() {
            0
        } else {
            self.since_snapshot + count
        };
        Ok(())
    }
}

impl<S: EventSourced> Entity for EventSourcedEntity<S> {
    type Message = S::Command;
    type Reply = Result<S::Reply, PersistError>;

    async fn on_start(&mut self, ctx: &mut EntityContext) {
        let Ok(journal) = journal_of(ctx) else {
            return;
        };
        let recovered = journal
            .recover(&key_of(ctx))
            .await
            .and_then(|mut recovered| {
                let delivered = std::mem::take(&mut recovered.delivered);
                self.recover(recovered).map(|()| delivered)
            });
        match recovered {
            Ok(delivered) => ctx.inbox().recovered(delivered),
            Err(error) => {
                failure(ctx, error);
            }
        }
    }

    async fn handle(&mut self, ctx: &mut EntityContext, command: S::Command) -> Self::Reply {
        let Persist { events, reply } = self.state.decide(ctx, command);
        if !events.is_empty() {
            self.persist(ctx, events).await?;
        }
        Ok(reply)
    }
}
