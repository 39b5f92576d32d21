//! Entities: the application's stateful actors. An [`Entity`] handles typed messages (serde,
//! postcard on the wire) one at a time, with a bounded mailbox; the node starts it on its first
//! message, stops it on passivation or handoff (running its [`Entity::on_stop`] after the
//! messages already queued), and drops it when a stop is forced.
//!
//! **Execution.** An entity is not a task: one driver task per shard holds its entities as
//! records (the entity, its context, its mailbox's receiver) and gives an entity a turn only
//! while mail waits for it (see `driver`). An idle entity so costs its state and a few small
//! allocations, no future and no buffer; entities of one shard interleave at their awaits,
//! and shards run in parallel.
//!
//! **Supervision.** A panic while handling a message is caught: it is logged and counted, an
//! `ask` waiting for that message fails with [`crate::AskError::EntityPanicked`], and the entity
//! is created afresh from its factory after a backoff (100 ms doubling to 10 s, reset by a
//! message handled without panicking), keeping its mailbox. The core does not see the restart:
//! to the protocol the entity is the same incarnation, still alive in exactly one place, so
//! single activation holds; only the entity's in-memory state is lost, as in Akka's
//! restart-with-backoff supervision.

mod driver;
pub(crate) mod inbox;
pub(crate) mod letter;
pub(crate) mod mailbox;
pub(crate) mod route;
pub(crate) mod runtime;
mod turn;

use std::future::Future;

use serde::Serialize;
use serde::de::DeserializeOwned;
use shoal_core::lease::FencingToken;
use shoal_core::{EntityId, EntityType, Epoch, ShardId};
use tokio::sync::mpsc;

pub(crate) use driver::{DriverEvent, Factory, FactoryFn};

/// A stateful entity, addressed by its type and id, alive in exactly one place in the cluster.
///
/// ```
/// use shoal::{Entity, EntityContext};
///
/// struct Counter(u64);
///
/// impl Entity for Counter {
///     type Message = u64;
///     type Reply = u64;
///
///     async fn handle(&mut self, _ctx: &mut EntityContext, add: u64) -> u64 {
///         self.0 += add;
///         self.0
///     }
/// }
/// ```
pub trait Entity: Send + 'static {
    /// What it is sent.
    type Message: Serialize + DeserializeOwned + Send + 'static;
    /// What it answers (to an `ask`; a `tell`'s answer is dropped). `()` when nothing.
    type Reply: Serialize + DeserializeOwned + Send + 'static;

    /// Handles one message; the next waits until this one is done.
    fn handle(
        &mut self,
        ctx: &mut EntityContext,
        message: Self::Message,
    ) -> impl Future<Output = Self::Reply> + Send;

    /// Runs when the incarnation starts, before its first message, and again whenever
    /// supervision creates the entity afresh (a persistent entity recovers its state here).
    fn on_start(&mut self, ctx: &mut EntityContext) -> impl Future<Output = ()> + Send {
        let _ = ctx;
        async {}
    }

    /// Runs when the entity is stopped gracefully (passivation, its shard handed off), after
    /// the messages queued before the stop. Not run when the stop is forced.
    fn on_stop(&mut self, ctx: &mut EntityContext) -> impl Future<Output = ()> + Send {
        let _ = ctx;
        async {}
    }
}

/// What an entity knows about itself while it handles a message.
#[derive(Debug)]
pub struct EntityContext {
    link: EntityLink,
    passivate: bool,
    /// What supervision must do once the current call returns, if anything.
    verdict: Option<Verdict>,
    /// Reliable delivery's consumer state, made by the first reliably delivered message (or
    /// persistent write): most entities never get one, and an idle entity keeps its context.
    inbox: Option<Box<inbox::Inbox>>,
}

/// What an entity asks its supervision to do after a call (persistent entities do).
#[derive(Clone, Debug, Eq, PartialEq)]
pub(crate) enum Verdict {
    /// Create the entity afresh after the backoff (its state could not be read or written).
    Restart(String),
    /// A store refused a write at this incarnation's epoch, holding `current`: stop for good.
    Fenced(Epoch),
}

impl EntityContext {
    pub(crate) fn new(link: EntityLink) -> Self {
        Self {
            link,
            passivate: false,
            verdict: None,
            inbox: None,
        }
    }

    /// Reliable delivery's consumer state: a persistent entity writes the current message's
    /// mark with its effect and restores the marks on recovery.
    pub(crate) fn inbox(&mut self) -> &mut inbox::Inbox {
        self.inbox_and_link().0
    }

    /// The inbox, with the link its confirmations go out by.
    fn inbox_and_link(&mut self) -> (&mut inbox::Inbox, &EntityLink) {
        let capacity = self.link.shard.mailbox_capacity;
        let inbox = (self.inbox).get_or_insert_with(|| Box::new(inbox::Inbox::new(capacity)));
        (inbox, &self.link)
    }

    /// Asks supervision to act once the current call returns.
    pub(crate) fn set_verdict(&mut self, verdict: Verdict) {
        self.verdict = Some(verdict);
    }

    pub(crate) fn take_verdict(&mut self) -> Option<Verdict> {
        self.verdict.take()
    }

    /// The node's state store, for a persistent type.
    pub(crate) fn journal(&self) -> Option<&crate::store::Journal> {
        self.link.shard.journal.as_ref()
    }

    /// The entity's id.
    pub fn id(&self) -> &EntityId {
        &self.link.entity
    }

    /// The entity's type.
    pub fn entity_type(&self) -> &EntityType {
        &self.link.shard.entity_type
    }

    /// The entity's shard.
    pub fn shard(&self) -> ShardId {
        self.link.shard.shard
    }

    /// The fencing epoch of the entity's shard allocation: non-zero for a type that persists
    /// state or remembers entities, and newer for every later allocation of the shard. An
    /// entity writing to a store of its own should carry it, and the store should refuse a
    /// write older than the newest it has seen for the shard (see
    /// `shoal_core::FencingVerdict`), as the state stores here do.
    pub fn epoch(&self) -> Epoch {
        self.link.shard.epoch
    }

    /// The token the entity's shard held its lease under when the entity started, for a type
    /// with shard leases (`None` otherwise). Writes to a store of the entity's own should
    /// carry it beside the epoch: once a newer holder of the shard's lease has written, a
    /// write under an older token comes from an instance that lost the lease (paused, or cut
    /// off past its validity) and must be refused whatever its epoch, as the state stores
    /// here refuse it (see `shoal_core::FencingVerdict`).
    pub fn lease_token(&self) -> Option<FencingToken> {
        self.link.shard.lease_token
    }

    /// Asks to be stopped (Akka's passivation): messages that arrive meanwhile are buffered
    /// by the node and start the entity again afterwards.
    pub fn passivate(&mut self) {
        self.passivate = true;
    }

    pub(crate) fn take_passivate(&mut self) -> bool {
        std::mem::take(&mut self.passivate)
    }

    pub(crate) fn link(&self) -> &EntityLink {
        &self.link
    }
}

/// What the entities of one shard allocation share: where they run and how they report.
#[derive(Debug)]
pub(crate) struct ShardLink {
    pub(crate) entity_type: EntityType,
    /// The shard, and its allocation's fencing epoch (the entities' writes carry it).
    pub(crate) shard: ShardId,
    pub(crate) epoch: Epoch,
    /// The token the shard held its lease under when its entities started, if leased.
    pub(crate) lease_token: Option<FencingToken>,
    /// Where a persistent type's state goes (`None` for other types).
    pub(crate) journal: Option<crate::store::Journal>,
    /// Its entities' mailbox size: the demand one grants a reliable producer stays below it.
    pub(crate) mailbox_capacity: usize,
    pub(crate) signals: mpsc::UnboundedSender<EntitySignal>,
    /// The node's direct routes (replies to their asks that came too late are counted there).
    pub(crate) routes: std::sync::Arc<route::Routes>,
}

/// One running incarnation of an entity, as its driver and the host name it.
#[derive(Clone, Debug)]
pub(crate) struct EntityLink {
    /// Shared by the entities its shard's allocation started.
    pub(crate) shard: std::sync::Arc<ShardLink>,
    pub(crate) entity: EntityId,
    /// Distinguishes the host's successive starts of one entity.
    pub(crate) generation: u64,
}

impl EntityLink {
    pub(crate) fn signal(&self, kind: SignalKind) {
        // The host outlives its entities except at shutdown, when nobody listens.
        let _ = self.shard.signals.send(EntitySignal {
            entity_type: self.shard.entity_type.clone(),
            entity: self.entity.clone(),
            generation: self.generation,
            kind,
        });
    }
}

impl Drop for EntityContext {
    /// The context lives exactly as long as its incarnation: dropped after a graceful stop, a
    /// forced stop (the driver drops the entity, or its turn's future) or anything else, it
    /// reports the end, so the core hears `EntityStopped` exactly once.
    fn drop(&mut self) {
        self.link.signal(SignalKind::Lifecycle(Lifecycle::Stopped));
    }
}

/// What an entity tells the host.
#[derive(Debug)]
pub(crate) struct EntitySignal {
    pub(crate) entity_type: EntityType,
    pub(crate) entity: EntityId,
    pub(crate) generation: u64,
    pub(crate) kind: SignalKind,
}

/// The kinds of [`EntitySignal`].
#[derive(Debug)]
pub(crate) enum SignalKind {
    /// A step of the entity's life the core must hear of.
    Lifecycle(Lifecycle),
    /// The answer to an ask.
    Answer {
        ask: letter::AskRef,
        answer: Result<Vec<u8>, letter::AskFailure>,
    },
    /// A confirmation for reliable producer `producer` on member `to`.
    Confirm {
        to: shoal_core::MemberId,
        producer: shoal_core::delivery::ProducerId,
        confirm: shoal_core::delivery::Confirm,
    },
}

/// The steps of an entity's life it reports.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub(crate) enum Lifecycle {
    /// The incarnation ended (gracefully, forced, or its mailbox closed).
    Stopped,
    /// The entity called [`EntityContext::passivate`].
    Passivate,
    /// A state store refused the entity's write: it holds this newer epoch for the shard.
    WriteFenced(Epoch),
}
