//! A connection's reader on direct routes: letters of the peer for entities this node runs go
//! straight into their mailboxes when the route is open to this connection, skipping the
//! host (one task hop where the host's path takes two). The rules are the core's
//! (`shoal_core::direct`), judged by the simulator; this is the reader's half:
//!
//! - Each connection is a link of its own (its number is the connection's), whose routes the
//!   host opens and closes through the route gate; a new connection starts with none.
//! - The reader goes direct only while none of its earlier letters to the entity, and none of
//!   its other data-lane envelopes (the protocol's), waits for the host: each is counted, on
//!   the entity's route or on the link, until the host has judged it and changed its route
//!   ([`Judging`]). A backlog of letters to other entities holds none back. It goes direct
//!   only for a number above every one it has seen on the link.
//! - Before it hands the host anything more, and when it ends, it queues the last number it
//!   consumed as [`Arrival::Consumed`], in the same queue, so the node refuses copies of what
//!   it delivered. An older connection of a peer ends (and so reports) before a newer one is
//!   read, so a copy arriving on the newer one is refused too.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use shoal_core::direct::{LinkLetter, LinkNumbers, restore_letter_payload, take_letter_payload};
use shoal_core::{Envelope, MemberId};
use tokio::sync::mpsc;

use crate::entity::route::{LinkWaiting, Routes};

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
    _counted: Counted,
}

/// Where a waiting envelope is counted (the guard lowers the count when dropped).
enum Counted {
    /// A letter, on its entity's route.
    Letter { _guard: LinkWaiting },
    /// Anything else, on the link.
    Other { _guard: OthersWaiting },
}

/// One of the link's other envelopes waiting for the host.
struct OthersWaiting(Arc<AtomicUsize>);

impl Drop for OthersWaiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Release);
    }
}

impl Judging {
    /// The link (connection) the envelope came on.
    pub(crate) fn link(&self) -> u64 {
        self.link
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
    /// The link's envelopes other than letters that wait for the host.
    others_waiting: Arc<AtomicUsize>,
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
            others_waiting: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Delivers a data-lane `envelope` on a direct route if it may; gives it back otherwise,
    /// counted as waiting, for the host.
    pub(super) fn try_direct(
        &mut self,
        mut envelope: Box<Envelope>,
    ) -> Option<(Box<Envelope>, Judging)> {
        // The node judges (and drops) what is not this link's.
        let mine = envelope.to == self.me && envelope.from == self.peer;
        let newer = mine && self.numbers.arrived(envelope.seq);
        let Some(letter) = LinkLetter::of(&envelope).filter(|_| mine) else {
            self.others_waiting.fetch_add(1, Ordering::AcqRel);
            let _guard = OthersWaiting(Arc::clone(&self.others_waiting));
            let counted = Counted::Other { _guard };
            return Some((envelope, self.judging(counted)));
        };
        let may_go = newer && self.others_waiting.load(Ordering::Acquire) == 0;
        let route = self.routes.route(letter.entity_type, letter.entity);
        let shard = letter.shard;
        let payload = take_letter_payload(&mut envelope).expect("a link letter carries one");
        let sent = route.send_link_letter((self.link, shard), payload, (may_go, &self.routes));
        match sent {
            Ok(()) => {
                self.numbers.consumed(envelope.seq);
                None
            }
            Err((payload, waiting)) => {
                restore_letter_payload(&mut envelope, payload);
                let counted = Counted::Letter { _guard: waiting };
                Some((envelope, self.judging(counted)))
            }
        }
    }

    fn judging(&self, counted: Counted) -> Judging {
        Judging {
            link: self.link,
            _counted: counted,
        }
    }

    /// Hands `envelope` to the host, after the report of what was consumed if one is due.
    pub(super) async fn hand_to_host(
        &mut self,
        queue: &mpsc::Sender<Arrival>,
        (envelope, judging): (Box<Envelope>, Judging),
    ) -> bool {
        if !self.report(queue).await {
            return false;
        }
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
