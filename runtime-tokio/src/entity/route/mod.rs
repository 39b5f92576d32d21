//! The local fast path: a handle ([`crate::EntityRef`]) of this node sends straight into a
//! running entity's mailbox, one task hop where the node's path takes two (handle → host →
//! entity), and an ask's reply goes straight back on its oneshot.
//!
//! The rules are the core's (`shoal_core::direct`), judged by the simulator; this module is
//! their concurrent half. Every `(type, id)` has at most one live [`Route`] on a node, found
//! through [`Routes`] and shared by every handle of the entity and by the host:
//!
//! - A handle sends directly only while the route is open **and** none of this node's letters
//!   to the entity waits in the host's queue (`queued`); otherwise it counts its letter as
//!   queued and sends it through the host, so no direct letter overtakes one of this node's
//!   own letters. The decision and the count change under the route's lock.
//! - The host opens the route (handing it a clone of the running incarnation's mailbox
//!   sender) when the core handed a letter of this node's handles to the running incarnation
//!   in the same call, and lowers `queued` only after it opened or closed the route for that
//!   letter. It closes the route (dropping the clone) on every start or stop of the entity,
//!   before it carries the stop out: a direct letter sent before that is in the mailbox ahead
//!   of the graceful stop, one sent after goes through the node, which buffers it for the next
//!   incarnation.
//! - A direct send that fails (a full or closed mailbox) goes through the host instead, where
//!   a full mailbox becomes a `MailboxFull` dead letter as before.
//! - A direct delivery marks the route accessed and, the first time since the host's last
//!   report, queues it on [`Routes`]' access queue: the host drains that queue at the start of
//!   each round, before its timers, and feeds the core `Input::Accessed`, so idle timeouts and
//!   the active-entity limit see every access. The queue is not one of the host's sources: it
//!   never wakes the host, and the fixed order of sources (and with it "same seed, same
//!   trace" under turmoil) is unchanged.

use std::collections::HashMap;
use std::hash::BuildHasher;

use foldhash::fast::RandomState;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use shoal_core::direct::Sender;
use shoal_core::{EntityId, EntityType, ShardId};
use tokio::sync::futures::Notified;
use tokio::sync::{Notify, mpsc};

use super::mailbox::{DirectMail, Mail, MailSender, Refused};
use line::Line;
use link::LinkRoutes;
pub(crate) use link::LinkWaiting;

mod line;
mod link;

/// How many locks the table of routes is split over, so handles sending to different
/// entities rarely wait for each other.
const TABLE_SHARDS: usize = 32;

/// A table shard: routes by entity, weakly (a route lives while a handle or the host holds
/// it), and how many lived at the last sweep of dead entries.
#[derive(Default)]
struct TableShard {
    routes: HashMap<(EntityType, EntityId), Weak<Route>, RandomState>,
    live_at_sweep: usize,
}

/// The node's routes: the table handles find them in, the queue of accessed routes the host
/// drains, and the count of direct deliveries.
pub(crate) struct Routes {
    shards: Box<[Mutex<TableShard>]>,
    hasher: RandomState,
    accessed: mpsc::UnboundedSender<Arc<Route>>,
    direct: AtomicU64,
    late_replies: AtomicU64,
}

impl std::fmt::Debug for Routes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Routes")
            .field("direct", &self.direct)
            .field("late_replies", &self.late_replies)
            .finish_non_exhaustive()
    }
}

impl Routes {
    /// The node's routes; the host drains accessed routes from the returned receiver.
    pub(crate) fn new() -> (Arc<Self>, mpsc::UnboundedReceiver<Arc<Route>>) {
        let (accessed, drain) = mpsc::unbounded_channel();
        let shards = (0..TABLE_SHARDS).map(|_| Mutex::default()).collect();
        let routes = Self {
            shards,
            hasher: RandomState::default(),
            accessed,
            direct: AtomicU64::new(0),
            late_replies: AtomicU64::new(0),
        };
        (Arc::new(routes), drain)
    }

    /// The locked table shard `key` lives in.
    fn table_shard(&self, key: &(EntityType, EntityId)) -> MutexGuard<'_, TableShard> {
        lock(&self.shards[self.hasher.hash_one(key) as usize % TABLE_SHARDS])
    }

    /// The live route to `entity`, made (closed) if there is none.
    pub(crate) fn route(&self, entity_type: &EntityType, entity: &EntityId) -> Arc<Route> {
        let key = (entity_type.clone(), entity.clone());
        let mut shard = self.table_shard(&key);
        if let Some(route) = shard.routes.get(&key).and_then(Weak::upgrade) {
            return route;
        }
        let route = Arc::new(Route {
            entity_type: key.0.clone(),
            entity: key.1.clone(),
            state: Mutex::new(RouteState::default()),
            turn: Notify::new(),
        });
        shard.routes.insert(key, Arc::downgrade(&route));
        // Dead entries (entities nobody holds a route to) go once the table doubled since the
        // last sweep: amortised, and bounded by twice the live routes.
        if shard.routes.len() > 2 * shard.live_at_sweep + 64 {
            shard.routes.retain(|_, route| route.strong_count() > 0);
            shard.live_at_sweep = shard.routes.len();
        }
        route
    }

    /// An entity answered an ask sent on a direct route after its asker gave up.
    pub(crate) fn note_late_reply(&self) {
        self.late_replies.fetch_add(1, Ordering::Relaxed);
    }

    /// Replies to asks on direct routes that came after their asker gave up.
    pub(crate) fn late_replies(&self) -> u64 {
        self.late_replies.load(Ordering::Relaxed)
    }

    /// Messages handed to entities on direct routes so far.
    pub(crate) fn direct_deliveries(&self) -> u64 {
        self.direct.load(Ordering::Relaxed)
    }
}

/// What a [`Route`] holds under its lock.
#[derive(Default)]
struct RouteState {
    /// The running incarnation's mailbox, while the route is open to any sender.
    mailbox: Option<MailSender>,
    /// Whether it is open to this node's handles.
    local: bool,
    /// Its state for connections' readers, from the first letter one brought (most entities
    /// hear only from their own node's handles, so it is boxed).
    links: Option<Box<LinkRoutes>>,
    /// Letters of this node's handles to the entity that the host has not judged yet.
    queued: usize,
    /// A direct delivery happened since the host's last report of accesses.
    accessed: bool,
    /// Handles waiting their turn to send.
    line: Line,
}

/// One entity's route on this node.
pub(crate) struct Route {
    entity_type: EntityType,
    entity: EntityId,
    state: Mutex<RouteState>,
    /// Wakes the handles in line when the first may go: the one before it sent, the host
    /// judged the node's queued letters, or the route closed.
    turn: Notify,
}

impl Route {
    /// The entity's type.
    pub(crate) fn entity_type(&self) -> &EntityType {
        &self.entity_type
    }

    /// The entity.
    pub(crate) fn entity(&self) -> &EntityId {
        &self.entity
    }

    /// Sends `mail` straight into the running incarnation's mailbox if the route is open and
    /// none of this node's letters to the entity waits for the host. While the route is open
    /// but such letters wait, or earlier handles wait their turn, it lines up (see `line`)
    /// until the host has judged them: a handle sending faster than the host feeds the core
    /// would otherwise never get back onto the route. When the route is closed, or the
    /// mailbox is full or closed, the mail is given back with its place in the host's queue
    /// and the turn: the caller must put it in the host's queue, then let the turn go, so
    /// letters reach the host in the order they left the line.
    pub(crate) async fn send(
        self: &Arc<Self>,
        mut mail: DirectMail,
        routes: &Routes,
    ) -> Result<(), (DirectMail, Queued, Turn)> {
        // The route is cloned into the turn only once a ticket is taken: not on the fast path.
        let mut turn = Turn {
            route: None,
            ticket: None,
        };
        loop {
            let woken = self.turn.notified();
            let mut woken = std::pin::pin!(woken);
            let step = self.try_send(mail, &mut turn.ticket, routes, woken.as_mut());
            if turn.ticket.is_some() {
                turn.route.get_or_insert_with(|| Arc::clone(self));
            }
            match step {
                Step::Sent => return Ok(()),
                Step::Wait(waiting) => {
                    mail = waiting;
                    woken.await;
                }
                Step::Queued(mail) => return Err((mail, Queued(Arc::clone(self)), turn)),
            }
        }
    }

    /// One attempt of [`Route::send`] by the holder of `ticket`, under the route's lock.
    fn try_send(
        self: &Arc<Self>,
        mail: DirectMail,
        ticket: &mut Option<u64>,
        routes: &Routes,
        woken: Pin<&mut Notified<'_>>,
    ) -> Step {
        let mut state = lock(&self.state);
        let open = state.local && state.mailbox.is_some();
        if !state.line.is_first(*ticket) || (open && state.queued > 0) {
            if ticket.is_none() {
                *ticket = Some(state.line.join());
            }
            // Registered before the lock is let go: the wake-up cannot slip between the
            // check and the wait.
            woken.enable();
            return Step::Wait(mail);
        }
        let mail = match state.mailbox.as_ref().filter(|_| open) {
            Some(mailbox) => match mailbox.try_send(Mail::Direct(mail)) {
                Ok(()) => {
                    self.delivered(&mut state, routes);
                    if ticket.take().is_some() {
                        state.line.served();
                        self.wake_line(&state);
                    }
                    return Step::Sent;
                }
                Err(error) => {
                    if matches!(error, Refused::Closed(_)) {
                        state.close_all();
                    }
                    match error.into_inner() {
                        Mail::Direct(mail) => mail,
                        Mail::Letter(_) => unreachable!("sent as direct mail just above"),
                    }
                }
            },
            None => mail,
        };
        state.queued += 1;
        // The turn is held until the letter is in the host's queue (see `Turn`).
        if ticket.is_none() {
            *ticket = Some(state.line.join());
        }
        Step::Queued(mail)
    }

    /// Counts a direct delivery and, the first since the host's last report, queues the route
    /// for the host's report of accesses.
    fn delivered(self: &Arc<Self>, state: &mut RouteState, routes: &Routes) {
        routes.direct.fetch_add(1, Ordering::Relaxed);
        if !std::mem::replace(&mut state.accessed, true) {
            // The host's receiver lives as long as the node; after it, nobody counts.
            let _ = routes.accessed.send(Arc::clone(self));
        }
    }

    /// Wakes the handles in line, if any, to see whether the first may go.
    fn wake_line(&self, state: &RouteState) {
        if !state.line.is_empty() {
            self.turn.notify_waiters();
        }
    }

    /// Counts a letter that must go through the host (a reliable producer's) as queued.
    pub(crate) fn queue(self: Arc<Self>) -> Queued {
        lock(&self.state).queued += 1;
        Queued(self)
    }

    /// One queued letter was judged, or dropped on its way to the host. Handles waiting for
    /// the queue to drain are woken when it has.
    fn judged(&self) {
        let mut state = lock(&self.state);
        state.queued = state.queued.saturating_sub(1);
        if state.queued == 0 {
            self.wake_line(&state);
        }
    }

    /// Opens the route to the incarnation reading `mailbox`, for `sender`; `shard` is the one
    /// the incarnation runs in (a link's letters must name it).
    pub(crate) fn open(&self, sender: Sender, mailbox: &MailSender, shard: ShardId) {
        let mut state = lock(&self.state);
        state.mailbox.get_or_insert_with(|| mailbox.clone());
        match sender {
            Sender::Local => state.local = true,
            Sender::Link(link) => state.links_mut().open(link, shard),
        }
    }

    /// Closes the route to `sender`: it goes through the host until the route opens again.
    pub(crate) fn close(&self, sender: Sender) {
        let mut state = lock(&self.state);
        match sender {
            Sender::Local => state.local = false,
            Sender::Link(link) => state.close_link(link),
        }
        if !state.local && !state.links.as_ref().is_some_and(|l| l.any_open()) {
            state.mailbox = None;
        }
        // The line goes through the host now, in turn.
        self.wake_line(&state);
    }

    /// Closes the route to every sender (a start or stop of the entity).
    pub(crate) fn close_all(&self) {
        let mut state = lock(&self.state);
        state.close_all();
        self.wake_line(&state);
    }

    /// The host reports the route's accesses: the next direct delivery queues it again.
    pub(crate) fn reported(&self) {
        lock(&self.state).accessed = false;
    }
}

impl RouteState {
    /// Closed to every sender, the mailbox clone dropped.
    fn close_all(&mut self) {
        self.mailbox = None;
        self.local = false;
        if let Some(links) = &mut self.links {
            links.close_all();
        }
        self.tidy_links();
    }
}

/// What an attempt to send on a route came to.
enum Step {
    /// In the mailbox.
    Sent,
    /// Not this handle's turn yet, or the node's letters wait for the host on an open route.
    Wait(DirectMail),
    /// Through the host, counted as queued.
    Queued(DirectMail),
}

/// A handle's place in a route's line. Dropped while waiting (the send was cancelled), it is
/// given up; held by a letter going through the host, the next in line waits until the letter
/// is in the host's queue and the turn is dropped. Futures of one task that send at once so
/// reach the host in the order they left the line, however the task polls them after.
pub(crate) struct Turn {
    /// The route, once a ticket was taken.
    route: Option<Arc<Route>>,
    ticket: Option<u64>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        if let (Some(route), Some(ticket)) = (&self.route, self.ticket) {
            let mut state = lock(&route.state);
            state.line.abandon(ticket);
            route.wake_line(&state);
        }
    }
}

/// A letter of this node's handles on its way through the host, counted as queued on its
/// entity's route until dropped: after the host opened or closed the route for it, or with
/// the letter if it never reaches the host (a cancelled send, a node shutting down), so the
/// count cannot leak and hold handles off the route.
pub(crate) struct Queued(Arc<Route>);

impl Queued {
    /// The route the letter counts on.
    pub(crate) fn route(&self) -> &Arc<Route> {
        &self.0
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.0.judged();
    }
}

/// Locks `mutex`, whose state stays consistent even if a holder panicked (every change under
/// it is a single assignment).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
