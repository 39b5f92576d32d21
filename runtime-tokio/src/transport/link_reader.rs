//! A connection's reader on direct routes: letters of the peer for entities this node runs go
//! straight into their mailboxes when the route is open to this connection, skipping the
//! host (one task hop where the host's path takes two). The rules are the core's
//! (`shoal_core::direct`), judged by the simulator; this is the reader's half:
//!
//! - Each connection is a link of its own (its number is the connection's), whose routes the
//!   host opens and closes through the route gate; a new connection starts with none.
//! - The reader goes direct only while none of its data-lane envelopes waits for the host
//!   (`waiting`, lowered by [`Judging`] once the host has judged an envelope and changed its
//!   route), and only for a number above every one it has seen on the link.
//! - Before it hands the host anything more, and when it ends, it queues the last number it
//!   consumed as [`Arrival::Consumed`], in the same queue, so the node refuses copies of what
//!   it delivered. An older connection of a peer ends (and so reports) before a newer one is
//!   read, so a copy arriving on the newer one is refused too.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use shoal_core::direct::{LinkLetter, LinkNumbers, restore_letter_payload, take_letter_payload};
use shoal_core::{Envelope, MemberId};
use tokio::sync::mpsc;

use crate::entity::route::Routes;

/// What a reader hands the host on the data lane.
pub(crate) enum Arrival {
    /// An envelope, counted on its reader until the host has judged it.
    Envelope(Box<Envelope>, Judging),
    /// The last number the reader of `from`'s link consumed on direct routes.
    Consumed {
        /// The peer.
        from: MemberId,
        /// The number.
        seq: u64,
    },
}

/// A reader's envelope on its way through the host: counted as waiting until dropped (after
/// the host judged it and opened or closed its route, or with the envelope if the node
/// stops first), so the count cannot leak and hold the reader off its routes.
pub(crate) struct Judging {
    link: u64,
    waiting: Arc<AtomicUsize>,
}

impl Judging {
    /// The link (connection) the envelope came on.
    pub(crate) fn link(&self) -> u64 {
        self.link
    }
}

impl Drop for Judging {
    fn drop(&mut self) {
        self.waiting.fetch_sub(1, Ordering::Release);
    }
}

/// One connection's reader state for direct routes.
pub(super) struct LinkReader {
    link: u64,
    /// The peer's member (the handshake's): only its envelopes go direct.
    peer: MemberId,
    /// This node's member: only envelopes addressed to it go direct.
    me: MemberId,
    routes: Arc<Routes>,
    numbers: LinkNumbers,
    waiting: Arc<AtomicUsize>,
}

impl LinkReader {
    /// The reader of connection `link` from `peer` to `me`, delivering on `routes`.
    pub(super) fn new(link: u64, (peer, me): (MemberId, MemberId), routes: Arc<Routes>) -> Self {
        Self {
            link,
            peer,
            me,
            routes,
            numbers: LinkNumbers::default(),
            waiting: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Delivers a data-lane `envelope` on a direct route if it may; gives it back otherwise,
    /// for the host.
    pub(super) fn try_direct(&mut self, mut envelope: Box<Envelope>) -> Option<Box<Envelope>> {
        if envelope.to != self.me || envelope.from != self.peer {
            // The node judges (and drops) what is not this link's.
            return Some(envelope);
        }
        let newer = self.numbers.arrived(envelope.seq);
        if !newer || self.waiting.load(Ordering::Acquire) > 0 {
            return Some(envelope);
        }
        let Some(letter) = LinkLetter::of(&envelope) else {
            return Some(envelope);
        };
        let Some(route) = self.routes.find(letter.entity_type, letter.entity) else {
            return Some(envelope);
        };
        let shard = letter.shard;
        let payload = take_letter_payload(&mut envelope).expect("a link letter carries one");
        match route.send_link_letter((self.link, shard), payload, &self.routes) {
            Ok(()) => {
                self.numbers.consumed(envelope.seq);
                None
            }
            Err(payload) => {
                restore_letter_payload(&mut envelope, payload);
                Some(envelope)
            }
        }
    }

    /// Hands `envelope` to the host, after the report of what was consumed if one is due.
    pub(super) async fn to_host(
        &mut self,
        queue: &mpsc::Sender<Arrival>,
        envelope: Box<Envelope>,
    ) -> bool {
        if !self.report(queue).await {
            return false;
        }
        self.waiting.fetch_add(1, Ordering::AcqRel);
        let judging = Judging {
            link: self.link,
            waiting: Arc::clone(&self.waiting),
        };
        queue
            .send(Arrival::Envelope(envelope, judging))
            .await
            .is_ok()
    }

    /// Queues the report of the last number consumed, if one is due (before anything else of
    /// the link reaches the host, and when the connection ends); `false` if the host is gone.
    pub(super) async fn report(&mut self, queue: &mpsc::Sender<Arrival>) -> bool {
        let Some(seq) = self.numbers.report_due() else {
            return true;
        };
        let from = self.peer;
        if queue.send(Arrival::Consumed { from, seq }).await.is_err() {
            return false;
        }
        // Only now: a send cancelled on the way leaves the report due, for the reader's end.
        self.numbers.reported(seq);
        true
    }
}
