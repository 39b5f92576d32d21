//! One task per peer address writes everything this node sends there: it dials (with
//! jittered exponential backoff), runs the handshake, then writes frames, control lane first,
//! so membership and failure detection never wait behind user traffic. Connections are
//! one-way (as Akka Artery's): a node writes only on connections it dialled and reads only
//! from those it accepted, so each direction of a peer pair has exactly one live connection
//! and its frames stay in order.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::SinkExt;
use shoal_core::{Address, Envelope, NodeId, Rng};
use tokio::io::{AsyncReadExt, ReadHalf};
use tokio::sync::mpsc;
use tokio::time::timeout;
use tokio_util::codec::FramedWrite;
use tracing::Instrument;

use super::Shared;
use super::connect::{handshake, jitter};
use super::frame::{EnvelopeCodec, FrameError};
use super::handshake::Role;
use super::network::BoxConnection;

/// Most frames written before a flush.
const BATCH: usize = 256;

/// The queues to one peer's task.
pub(crate) struct PeerQueues {
    pub(crate) control: mpsc::Sender<Box<Envelope>>,
    pub(crate) data: mpsc::Sender<Box<Envelope>>,
    /// Envelopes of user traffic in `data` (bounded apart from the protocol's own).
    pub(crate) user_queued: Arc<AtomicUsize>,
    pub(crate) task: tokio::task::AbortHandle,
    /// When the host last queued an envelope here: a peer outside the view (a joiner being
    /// answered) is kept while its answer may still be on the way.
    pub(crate) last_send: tokio::time::Instant,
    /// The address has been a member's: once it leaves the view its writer stops at once.
    pub(crate) was_member: bool,
}

/// The receiving ends, owned by the task.
struct Lanes {
    control: mpsc::Receiver<Box<Envelope>>,
    data: mpsc::Receiver<Box<Envelope>>,
    user_queued: Arc<AtomicUsize>,
}

/// Starts the task writing to `address`.
pub(crate) fn spawn(address: Address, shared: Arc<Shared>) -> PeerQueues {
    let settings = &shared.settings;
    let (control, control_rx) = mpsc::channel(settings.control_queue);
    // Room for the user traffic allowed plus the protocol's own messages.
    let (data, data_rx) = mpsc::channel(settings.user_queue + settings.control_queue);
    let user_queued = Arc::new(AtomicUsize::new(0));
    let lanes = Lanes {
        control: control_rx,
        data: data_rx,
        user_queued: Arc::clone(&user_queued),
    };
    let span = tracing::info_span!("peer", %address);
    let task = tokio::spawn(run(address, shared, lanes).instrument(span)).abort_handle();
    PeerQueues {
        control,
        data,
        user_queued,
        task,
        last_send: tokio::time::Instant::now(),
        was_member: false,
    }
}

/// How a connection ended.
enum Ended {
    /// The host dropped the queues: the task ends.
    Closed,
    /// The connection failed; dial again.
    Broken(String),
}

async fn run(address: Address, shared: Arc<Shared>, mut lanes: Lanes) {
    let settings = &shared.settings;
    let mut backoff = settings.reconnect_min;
    let mut failures = 0u32;
    let mut rng = Rng::new(shared.seed ^ NodeId::of_address(address.as_str()).0);
    loop {
        match dial(&address, &shared).await {
            Ok(stream) => {
                if failures > 0 {
                    tracing::info!(%address, failures, "connected after failed attempts");
                }
                failures = 0;
                backoff = settings.reconnect_min;
                match write(stream, &mut lanes, &shared).await {
                    Ended::Closed => return,
                    Ended::Broken(why) => tracing::info!(%address, %why, "connection lost"),
                }
            }
            Err(why) => {
                failures += 1;
                // The first failure after a success is news; the retries are not.
                if failures == 1 {
                    tracing::warn!(%address, %why, "cannot connect; retrying with backoff");
                } else {
                    tracing::debug!(%address, %why, failures, "cannot connect");
                }
            }
        }
        tokio::time::sleep(backoff.mul_f64(jitter(&mut rng))).await;
        backoff = (backoff * 2).min(settings.reconnect_max);
    }
}

/// Connects to `address` and runs the handshake as the dialer.
async fn dial(address: &Address, shared: &Shared) -> Result<BoxConnection, String> {
    let settings = &shared.settings;
    let connect = shared.network.connect(address.as_str());
    let mut stream = match timeout(settings.connect_timeout, connect).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(error)) => {
            shared.counters.dial_failed();
            return Err(error.to_string());
        }
        Err(_) => {
            shared.counters.dial_failed();
            return Err("connect timed out".into());
        }
    };
    let outcome = timeout(
        settings.handshake_timeout,
        handshake(&mut stream, Role::Dialer, &shared.identity),
    )
    .await
    .unwrap_or(Err(super::counters::HandshakeFailure::Timeout));
    match outcome {
        Ok((peer, _)) => {
            shared.counters.dialed();
            tracing::debug!(%address, member = %peer.member, "connected");
            Ok(stream)
        }
        Err(failure) => {
            shared.counters.handshake_failed(&failure);
            tracing::warn!(%address, %failure, "handshake failed");
            Err(failure.to_string())
        }
    }
}

/// Writes queued envelopes until the connection breaks or the queues close.
async fn write(stream: BoxConnection, lanes: &mut Lanes, shared: &Shared) -> Ended {
    let (mut read, write) = tokio::io::split(stream);
    let mut sink = FramedWrite::new(write, EnvelopeCodec::default());
    loop {
        let first = tokio::select! {
            biased;
            envelope = lanes.control.recv() => envelope,
            envelope = lanes.data.recv() => envelope,
            why = closed_by_peer(&mut read) => return Ended::Broken(why),
        };
        let Some(mut envelope) = first else {
            return Ended::Closed;
        };
        let mut written = 0u64;
        loop {
            lanes.taken(&envelope);
            match sink.feed(&*envelope).await {
                Ok(()) => written += 1,
                Err(FrameError::Codec(error)) => {
                    // The core bounds payloads, so this is a bug; lose the one envelope only.
                    tracing::error!(%error, to = %envelope.to, "an envelope did not encode");
                }
                Err(error) => return Ended::Broken(error.to_string()),
            }
            if written >= BATCH as u64 {
                break;
            }
            match lanes.try_next() {
                Some(next) => envelope = next,
                None => break,
            }
        }
        if let Err(error) = sink.flush().await {
            return Ended::Broken(error.to_string());
        }
        shared.counters.sent(written);
    }
}

impl Lanes {
    fn try_next(&mut self) -> Option<Box<Envelope>> {
        self.control
            .try_recv()
            .or_else(|_| self.data.try_recv())
            .ok()
    }

    fn taken(&self, envelope: &Envelope) {
        if envelope.is_user_traffic() {
            self.user_queued.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Completes when the peer closes the connection (it never writes on a connection we dialled).
async fn closed_by_peer(read: &mut ReadHalf<BoxConnection>) -> String {
    let mut byte = [0u8; 1];
    match read.read(&mut byte).await {
        Ok(0) => "closed by the peer".into(),
        Ok(_) => "the peer wrote on a one-way connection".into(),
        Err(error) => error.to_string(),
    }
}
