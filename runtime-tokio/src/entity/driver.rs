//! A shard's driver: the one task that runs the entities of one shard on this node. It holds
//! them as records (see `turn::Record`) and gives an entity a turn (a future that handles its
//! mail, then ends) only while mail waits for it, so an idle entity holds no future, no timer
//! and no buffer, and starting one spawns nothing.
//!
//! The host tells the driver of starts and forced stops on one channel; mailboxes schedule
//! their entities' turns on another (see `mailbox`). A turn that finds its mailbox empty ends
//! and gives its record back; mail that came after it looked is seen by the driver at once (the
//! record is scheduled again), so nothing waits without a turn. A forced stop drops the
//! record, or aborts the turn holding it: either way the record is dropped at once or at the
//! driver's next poll, and its context reports the end. A turn that panics outside the
//! entity's calls (its factory) loses its record the same way, and the shard's other entities
//! run on.

use std::collections::HashMap;
use std::future::Future;
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::future::{AbortHandle, Abortable};
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};
use shoal_core::EntityId;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::task::JoinHandle;
use tracing::Instrument;

use super::mailbox::MailReceiver;
use super::turn::{Finish, Record, turn};
use super::{Entity, EntityContext, EntityLink};

/// What the host tells a shard's driver.
pub(crate) enum DriverEvent {
    /// A new incarnation, with its mailbox's receiver: its first turn creates it.
    Start(EntityLink, MailReceiver),
    /// A forced stop of the incarnation of this generation: it is dropped with its mail, in
    /// the middle of a turn if one runs.
    Stop(u64),
}

/// Starts the drivers of one entity type (type-erased, so the host holds one per registered
/// type).
pub(crate) trait Factory: Send + Sync {
    /// Spawns the driver of one shard's entities, told of starts and stops on `events` and of
    /// turns due on `turns` (the generations of entities whose mailbox scheduled them).
    fn spawn_driver(
        &self,
        events: UnboundedReceiver<DriverEvent>,
        turns: UnboundedReceiver<u64>,
    ) -> JoinHandle<()>;
}

/// A [`Factory`] of `E` made by a closure.
pub(crate) struct FactoryFn<E, F> {
    make: Arc<F>,
    entity: PhantomData<fn() -> E>,
}

impl<E, F> FactoryFn<E, F> {
    pub(crate) fn new(make: F) -> Self {
        Self {
            make: Arc::new(make),
            entity: PhantomData,
        }
    }
}

impl<E, F> Factory for FactoryFn<E, F>
where
    E: Entity,
    F: Fn(&EntityId) -> E + Send + Sync + 'static,
{
    fn spawn_driver(
        &self,
        events: UnboundedReceiver<DriverEvent>,
        turns: UnboundedReceiver<u64>,
    ) -> JoinHandle<()> {
        let driver = Driver {
            make: Arc::clone(&self.make),
            events,
            turns,
            events_closed: false,
            idle: ByGeneration::default(),
            busy: ByGeneration::default(),
            running: FuturesUnordered::new(),
        };
        tokio::spawn(driver.run())
    }
}

/// A turn: the record it gives back and how it ended, unless it panicked.
type Turn<E> = Pin<Box<dyn Future<Output = std::thread::Result<(Box<Record<E>>, Finish)>> + Send>>;

/// A turn that had to wait, for the incarnation of `generation`: abortable by a forced stop.
struct PendingTurn<E> {
    generation: u64,
    turn: Abortable<Turn<E>>,
}

impl<E> Future for PendingTurn<E> {
    /// The generation, and what the turn gave back (`None`: aborted or panicked).
    type Output = (u64, Option<(Box<Record<E>>, Finish)>);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let ended = std::task::ready!(self.turn.poll_unpin(cx));
        Poll::Ready((self.generation, ended.ok().and_then(Result::ok)))
    }
}

/// Maps keyed by generation, touched on every turn.
type ByGeneration<V> = HashMap<u64, V, foldhash::fast::RandomState>;

/// The driver of one shard's entities.
struct Driver<E, F> {
    make: Arc<F>,
    events: UnboundedReceiver<DriverEvent>,
    turns: UnboundedReceiver<u64>,
    /// The host dropped its end: no more starts. The driver ends with its last entity.
    events_closed: bool,
    /// Entities between turns, by generation.
    idle: ByGeneration<Box<Record<E>>>,
    /// Entities in a turn that had to wait: how to abort it.
    busy: ByGeneration<AbortHandle>,
    running: FuturesUnordered<PendingTurn<E>>,
}

impl<E, F> Driver<E, F>
where
    E: Entity,
    F: Fn(&EntityId) -> E + Send + Sync + 'static,
{
    async fn run(mut self) {
        std::future::poll_fn(|cx| self.poll(cx)).await;
    }

    /// Takes the host's events first (a start before the turns its mail schedules, a forced
    /// stop before more mail is handled), then the turns due, then the turns that ended; done
    /// once the host left and no entity is left.
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            let mut progressed = false;
            while !self.events_closed {
                match self.events.poll_recv(cx) {
                    Poll::Ready(Some(event)) => {
                        self.handle_event(event, cx);
                        progressed = true;
                    }
                    Poll::Ready(None) => self.events_closed = true,
                    Poll::Pending => break,
                }
            }
            while let Poll::Ready(Some(generation)) = self.turns.poll_recv(cx) {
                // A generation no longer idle was stopped, or its turn runs and will look.
                if let Some(record) = self.idle.remove(&generation) {
                    self.start_turn(generation, record, cx);
                }
                progressed = true;
            }
            while let Poll::Ready(Some((generation, ended))) = self.running.poll_next_unpin(cx) {
                self.busy.remove(&generation);
                if let Some((record, Finish::Idle)) = ended {
                    self.handle_idle(generation, record, cx);
                }
                // Otherwise the record was dropped, and its context reported the end.
                progressed = true;
            }
            if self.events_closed && self.idle.is_empty() && self.busy.is_empty() {
                return Poll::Ready(());
            }
            if !progressed {
                return Poll::Pending;
            }
        }
    }

    fn handle_event(&mut self, event: DriverEvent, cx: &mut Context<'_>) {
        match event {
            DriverEvent::Start(link, mail) => {
                let generation = link.generation;
                let record = Box::new(Record::new(EntityContext::new(link), mail));
                self.start_turn(generation, record, cx);
            }
            DriverEvent::Stop(generation) => {
                if let Some(abort) = self.busy.remove(&generation) {
                    // The turn's future, and the record in it, go at the next poll.
                    abort.abort();
                }
                // Dropping it reports the end.
                drop(self.idle.remove(&generation));
            }
        }
    }

    /// A turn ended with the mailbox empty: the entity waits, unless mail came after the turn
    /// looked (its mailbox then scheduled it, and that turn is due now).
    fn handle_idle(&mut self, generation: u64, record: Box<Record<E>>, cx: &mut Context<'_>) {
        if record.scheduled() {
            self.start_turn(generation, record, cx);
        } else {
            self.idle.insert(generation, record);
        }
    }

    /// Runs a turn of the entity of `generation`. It is polled here first: most turns handle
    /// their mail without waiting, and need no more than this. One that waits is made
    /// abortable and polled by the driver's set of pending turns from then on.
    fn start_turn(&mut self, generation: u64, mut record: Box<Record<E>>, cx: &mut Context<'_>) {
        loop {
            let mut turn = self.turn(record);
            let (next, finish) = match turn.as_mut().poll(cx) {
                Poll::Ready(Ok(ended)) => ended,
                // Dropped with the turn: its context reported the end.
                Poll::Ready(Err(_panicked)) => return,
                Poll::Pending => {
                    let (abort, registration) = AbortHandle::new_pair();
                    self.busy.insert(generation, abort);
                    self.running.push(PendingTurn {
                        generation,
                        turn: Abortable::new(turn, registration),
                    });
                    return;
                }
            };
            if !matches!(finish, Finish::Idle) {
                return;
            }
            if !next.scheduled() {
                self.idle.insert(generation, next);
                return;
            }
            record = next;
        }
    }

    /// A turn of `record`'s entity, not polled yet.
    fn turn(&self, mut record: Box<Record<E>>) -> Turn<E> {
        let make = Arc::clone(&self.make);
        // Everything the entity logs carries where it runs.
        let ctx = record.ctx();
        let span = tracing::info_span!("entity", region = %ctx.entity_type(), shard = ctx.shard().0, id = %ctx.id());
        let turn = async move {
            let finish = turn(&*make, &mut record).await;
            (record, finish)
        };
        // A panic outside the entity's own calls (its factory) ends this incarnation only.
        Box::pin(AssertUnwindSafe(turn).catch_unwind().instrument(span))
    }
}
