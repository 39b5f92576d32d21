//! A route's half for connections' readers (see `transport/link_reader.rs`): a reader sends a
//! peer's letter straight into the running incarnation's mailbox only while the route is open
//! to its link for the shard the letter names, and none of the link's earlier letters to the
//! entity waits for the host; otherwise the letter goes through the host, counted here until
//! the host has judged it ([`LinkWaiting`]), so no direct letter overtakes it.

use std::sync::Arc;

use shoal_core::{Payload, ShardId};

use super::{Route, RouteState, Routes, lock};
use crate::entity::mailbox::{Mail, Refused};

impl Route {
    /// Sends a letter the reader of `link` brought, naming `shard`, into the running
    /// incarnation's mailbox if `may_go` (the reader's own rules allow it), the route is open
    /// to that link for that shard, and none of the link's letters to the entity waits for
    /// the host. Otherwise gives the payload back, counted as waiting until the returned
    /// guard is dropped: the reader hands it to the host with the envelope.
    pub(crate) fn send_link_letter(
        self: &Arc<Self>,
        (link, shard): (u64, ShardId),
        payload: Payload,
        (may_go, routes): (bool, &Routes),
    ) -> Result<(), (Payload, LinkWaiting)> {
        let mut state = lock(&self.state);
        let open = may_go
            && state
                .links
                .as_ref()
                .is_some_and(|l| l.may_send(link, shard));
        let payload = match state.mailbox.as_ref().filter(|_| open) {
            Some(mailbox) => match mailbox.try_send(Mail::Letter(payload)) {
                Ok(()) => {
                    self.delivered(&mut state, routes);
                    return Ok(());
                }
                Err(error) => {
                    if matches!(error, Refused::Closed(_)) {
                        state.close_all();
                        self.wake_line(&state);
                    }
                    match error.into_inner() {
                        Mail::Letter(payload) => payload,
                        Mail::Direct(_) => unreachable!("sent as a letter just above"),
                    }
                }
            },
            None => payload,
        };
        state.links_mut().count_waiting(link);
        let waiting = LinkWaiting {
            route: Arc::clone(self),
            link,
        };
        Err((payload, waiting))
    }
}

/// A link's letter to the entity on its way through the host, counted on the route until
/// dropped: after the host judged it and opened or closed the link's route, or with the
/// letter if the node stops first, so the count cannot leak.
pub(crate) struct LinkWaiting {
    route: Arc<Route>,
    link: u64,
}

impl Drop for LinkWaiting {
    fn drop(&mut self) {
        let mut state = lock(&self.route.state);
        if let Some(links) = &mut state.links {
            links.judged(self.link);
        }
        state.tidy_links();
    }
}

/// Which links a route is open to, and their letters waiting for the host.
#[derive(Debug, Default)]
pub(super) struct LinkRoutes {
    /// The links it is open to, each with the shard its letters name (the one the node judged
    /// for this incarnation).
    open: Vec<(u64, ShardId)>,
    /// Per link, its letters to the entity that wait for the host.
    waiting: Vec<(u64, usize)>,
}

impl LinkRoutes {
    /// Whether a letter of `link` naming `shard` may go straight in: open, nothing waiting.
    fn may_send(&self, link: u64, shard: ShardId) -> bool {
        self.open.contains(&(link, shard)) && !self.waiting.iter().any(|(l, _)| *l == link)
    }

    /// Opens the route to `link` for letters naming `shard`.
    pub(super) fn open(&mut self, link: u64, shard: ShardId) {
        if !self.open.contains(&(link, shard)) {
            self.open.push((link, shard));
        }
    }

    /// Whether it is open to any link.
    pub(super) fn any_open(&self) -> bool {
        !self.open.is_empty()
    }

    /// Closes it to every link (letters still waiting stay counted).
    pub(super) fn close_all(&mut self) {
        self.open.clear();
    }

    fn count_waiting(&mut self, link: u64) {
        match self.waiting.iter_mut().find(|(l, _)| *l == link) {
            Some((_, count)) => *count += 1,
            None => self.waiting.push((link, 1)),
        }
    }

    fn judged(&mut self, link: u64) {
        if let Some(at) = self.waiting.iter().position(|(l, _)| *l == link) {
            self.waiting[at].1 -= 1;
            if self.waiting[at].1 == 0 {
                self.waiting.swap_remove(at);
            }
        }
    }
}

impl RouteState {
    /// The route's state for links, made for the first.
    pub(super) fn links_mut(&mut self) -> &mut LinkRoutes {
        self.links.get_or_insert_with(Box::default)
    }

    /// Closes the route to `link`.
    pub(super) fn close_link(&mut self, link: u64) {
        if let Some(links) = &mut self.links {
            links.open.retain(|(l, _)| *l != link);
        }
        self.tidy_links();
    }

    /// Lets the links' state go once it holds nothing.
    pub(super) fn tidy_links(&mut self) {
        if (self.links.as_ref()).is_some_and(|l| l.open.is_empty() && l.waiting.is_empty()) {
            self.links = None;
        }
    }
}
