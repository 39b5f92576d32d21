//! The listener and one reader task per accepted connection. A reader checks the handshake,
//! then forwards the peer's envelopes to the host, control lane and data lane apart, except
//! the letters it delivers itself on direct routes (see `link_reader`). When a peer connects
//! again (it reconnected, or restarted as a new incarnation), its older connection is closed
//! and finished *before* the new one is read, so frames of an old connection never follow
//! those of a newer one (the core's link-sequence rule), and the older reader's report of the
//! numbers it consumed reaches the host before anything of the newer one.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::BytesMut;
use futures_util::StreamExt;
use shoal_core::{Envelope, Lane};
use tokio::sync::{mpsc, oneshot};
use tokio::time::timeout;
use tokio_util::codec::{Framed, FramedParts};
use tracing::Instrument;

use super::connect::handshake;
use super::counters::HandshakeFailure;
use super::frame::{EnvelopeCodec, FrameError};
use super::handshake::{Peer, Role};
use super::link_reader::{Arrival, LinkReader};
use super::network::{BoxConnection, Listener};
use super::{Shared, lock};
use crate::entity::route::Routes;

/// Where received envelopes go: the host's two inbound queues, and the node's direct routes.
#[derive(Clone)]
pub(crate) struct Inbox {
    pub(crate) control: mpsc::Sender<Box<Envelope>>,
    pub(crate) data: mpsc::Sender<Arrival>,
    pub(crate) routes: Arc<Routes>,
}

/// A peer node's live inbound connection (a newer one from the same node replaces it).
pub(crate) struct Live {
    /// Which accepted connection it is.
    id: u64,
    /// What the peer advertised in its handshake.
    pub(crate) peer: Peer,
    /// Closes it.
    close: oneshot::Sender<()>,
    /// Resolves once its reader has finished.
    finished: oneshot::Receiver<()>,
}

/// Accepts connections until the task is aborted.
pub(crate) async fn listen(mut listener: Box<dyn Listener>, shared: Arc<Shared>, inbox: Inbox) {
    let mut next_connection = 0u64;
    loop {
        match listener.accept().await {
            Ok((stream, from)) => {
                next_connection += 1;
                tracing::trace!(%from, "accepted a connection");
                let (shared, inbox) = (Arc::clone(&shared), inbox.clone());
                let connection = Accepted {
                    stream,
                    from,
                    id: next_connection,
                };
                let span = tracing::info_span!("inbound", %from);
                tokio::spawn(serve(connection, shared, inbox).instrument(span));
            }
            Err(error) => {
                // Out of file descriptors and the like: pause rather than spin.
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

/// An accepted connection, numbered in order of arrival.
struct Accepted {
    stream: BoxConnection,
    from: SocketAddr,
    id: u64,
}

async fn serve(connection: Accepted, shared: Arc<Shared>, inbox: Inbox) {
    let Accepted {
        mut stream,
        from,
        id,
    } = connection;
    let outcome = timeout(
        shared.settings.handshake_timeout,
        handshake(&mut stream, Role::Acceptor, &shared.identity),
    )
    .await
    .unwrap_or(Err(HandshakeFailure::Timeout));
    let (peer, rest) = match outcome {
        Ok(done) => done,
        Err(failure) => {
            shared.counters.handshake_failed(&failure);
            tracing::warn!(%from, %failure, "inbound handshake failed; closing");
            return;
        }
    };
    shared.counters.accepted();
    let node = peer.member.node;
    let (close, closed) = oneshot::channel();
    let (finished, on_finished) = oneshot::channel::<()>();
    let live = Live {
        id,
        peer: peer.clone(),
        close,
        finished: on_finished,
    };
    // From now on an older connection of the node that ends leaves this one in place.
    let older = lock(&shared.inbound).insert(node, live);
    if let Some(older) = older {
        shared.counters.replaced();
        let _ = older.close.send(());
        // Resolves when the older reader has dropped its `finished` sender.
        let _ = older.finished.await;
    }
    let me = shared.identity.member;
    let routes = Arc::clone(&inbox.routes);
    let mut reader = LinkReader::new(id, (peer.member, me), routes);
    read(stream, rest, (&peer, &mut reader), &shared, &inbox, closed).await;
    // What it consumed reaches the host before anything a newer connection brings.
    reader.report(&inbox.data).await;
    drop(finished);
    let mut inbound = lock(&shared.inbound);
    if inbound.get(&node).is_some_and(|current| current.id == id) {
        // The last connection from that node ended: its address comes from membership now.
        inbound.remove(&node);
    }
}

/// Forwards the peer's envelopes until the connection ends, a frame is refused, or a newer
/// connection of the same peer closes this one.
async fn read(
    stream: BoxConnection,
    rest: BytesMut,
    (peer, reader): (&Peer, &mut LinkReader),
    shared: &Shared,
    inbox: &Inbox,
    mut closed: oneshot::Receiver<()>,
) {
    // Built from parts so the bytes read past the handshake are decoded at once: a buffer
    // filled by hand is only looked at after the next read, so frames that came with the
    // handshake (a joiner's InitJoin) would wait for the peer's next write.
    let mut parts = FramedParts::new::<&Envelope>(stream, EnvelopeCodec::default());
    parts.read_buf = rest;
    let mut frames = Framed::from_parts(parts);
    loop {
        let frame = tokio::select! {
            biased;
            _ = &mut closed => return,
            frame = frames.next() => frame,
        };
        let envelope = match frame {
            None => return,
            Some(Ok(envelope)) => envelope,
            Some(Err(error)) => {
                let reason = match &error {
                    FrameError::Io(e) if e.kind() == std::io::ErrorKind::InvalidData => "oversized",
                    FrameError::Io(_) => return, // the connection broke: nothing to refuse
                    FrameError::Codec(_) => "malformed",
                };
                shared.counters.frame_rejected(reason);
                tracing::warn!(member = %peer.member, %error, "refused a frame; closing the connection");
                return;
            }
        };
        if envelope.from.node != peer.member.node {
            shared.counters.frame_rejected("forged_sender");
            tracing::warn!(member = %peer.member, from = %envelope.from, "an envelope claiming another sender; closing");
            return;
        }
        shared.counters.received();
        let envelope = Box::new(envelope);
        let sent = match envelope.lane() {
            Lane::Control => tokio::select! {
                biased;
                _ = &mut closed => return,
                sent = inbox.control.send(envelope) => sent.is_ok(),
            },
            Lane::Data => {
                let Some(waiting) = reader.try_direct(envelope) else {
                    continue;
                };
                tokio::select! {
                    biased;
                    _ = &mut closed => return,
                    sent = reader.hand_to_host(&inbox.data, waiting) => sent,
                }
            }
        };
        if !sent {
            return;
        }
    }
}
