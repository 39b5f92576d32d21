//! The network transport between members: TCP, length-prefixed postcard frames, a sans-IO
//! handshake, one-way connections (one per direction of a peer pair) with reconnects, and a
//! control lane that user traffic never delays. The host sends through `Transport::send`,
//! which never blocks: a full queue hands the envelope back.

mod connect;
mod counters;
mod frame;
#[cfg(feature = "fuzzing")]
pub mod handshake;
#[cfg(not(feature = "fuzzing"))]
#[allow(unreachable_pub)]
pub(crate) mod handshake;
mod inbound;
mod link_reader;
pub mod network;
mod peer;
#[cfg(feature = "tls")]
pub mod tls;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use shoal_core::{Address, Envelope, Lane, MemberId, NodeId};
use tokio::sync::mpsc::error::TrySendError;
use tokio::task::JoinHandle;

pub(crate) use counters::Counters;
pub use counters::TransportStats;
pub(crate) use inbound::Inbox;
pub(crate) use link_reader::Arrival;

use handshake::Identity;
use network::{Listener, Network};

/// Queue sizes and timeouts of the transport.
#[derive(Clone, Debug)]
pub struct TransportSettings {
    /// Envelopes of user traffic (letters, replies) queued per peer; more are dead-lettered
    /// with `OutboundQueueFull` (Akka Artery's `outbound-message-queue-size`).
    pub user_queue: usize,
    /// Membership and protocol envelopes queued per peer lane.
    pub control_queue: usize,
    /// Time allowed for a TCP connect.
    pub connect_timeout: Duration,
    /// Time allowed for a handshake.
    pub handshake_timeout: Duration,
    /// First reconnect delay (doubled per failure, jittered by ±50 %).
    pub reconnect_min: Duration,
    /// Largest reconnect delay.
    pub reconnect_max: Duration,
    /// How long the writer to an address outside the view (a node being answered while it
    /// joins) outlives its last envelope, so a queued answer is not dropped with it.
    pub unknown_peer_linger: Duration,
}

impl Default for TransportSettings {
    fn default() -> Self {
        Self {
            user_queue: 3072,
            control_queue: 4096,
            connect_timeout: Duration::from_secs(5),
            handshake_timeout: Duration::from_secs(5),
            reconnect_min: Duration::from_millis(50),
            reconnect_max: Duration::from_secs(5),
            unknown_peer_linger: Duration::from_secs(20),
        }
    }
}

/// What the transport's tasks share.
pub(crate) struct Shared {
    pub(crate) identity: Identity,
    pub(crate) settings: TransportSettings,
    pub(crate) counters: Counters,
    pub(crate) network: Arc<dyn Network>,
    /// The node's seed: each peer task's reconnect jitter follows from it and the address.
    pub(crate) seed: u64,
    /// The live inbound connection per peer node (see [`inbound::Live`]). What its peer
    /// advertised in the handshake also says where to answer a member that reached this one
    /// before membership carried its address here (a node that just joined through another),
    /// as the simulator answers over the connection such a member opened.
    pub(crate) inbound: Mutex<HashMap<NodeId, inbound::Live>>,
}

/// Locks `mutex`, whose data stays valid even if a holder panicked (each update is one
/// insert or remove).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The outbound side, owned by the host, and the listener.
pub(crate) struct Transport {
    shared: Arc<Shared>,
    /// Ordered, so tasks are stopped in the same order on every run (replays stay exact).
    peers: BTreeMap<Address, peer::PeerQueues>,
    listener: JoinHandle<()>,
}

impl Transport {
    /// Starts accepting on `listener`, forwarding what arrives to `inbox`; dials through
    /// `network`.
    pub(crate) fn start(
        listener: Box<dyn Listener>,
        network: Arc<dyn Network>,
        identity: Identity,
        settings: TransportSettings,
        seed: u64,
        inbox: Inbox,
    ) -> Self {
        let shared = Arc::new(Shared {
            identity,
            settings,
            counters: Counters::default(),
            network,
            seed,
            inbound: Mutex::default(),
        });
        let listener = tokio::spawn(inbound::listen(listener, Arc::clone(&shared), inbox));
        Self {
            shared,
            peers: BTreeMap::new(),
            listener,
        }
    }

    /// Queues `envelope` for the member at `address`, or hands it back if its queue is full.
    pub(crate) fn send(
        &mut self,
        address: &Address,
        envelope: Box<Envelope>,
    ) -> Result<(), Box<Envelope>> {
        if !self.peers.contains_key(address) {
            let peer = peer::spawn(address.clone(), Arc::clone(&self.shared));
            self.peers.insert(address.clone(), peer);
        }
        let peer = self.peers.get_mut(address).expect("inserted above");
        peer.last_send = tokio::time::Instant::now();
        let user = envelope.is_user_traffic();
        if user && peer.user_queued.load(Ordering::Relaxed) >= self.shared.settings.user_queue {
            return Err(envelope);
        }
        let queue = match envelope.lane() {
            Lane::Control => &peer.control,
            Lane::Data => &peer.data,
        };
        // Counted before it is queued: the writer may take it (and count it out) at once.
        if user {
            peer.user_queued.fetch_add(1, Ordering::Relaxed);
        }
        queue.try_send(envelope).map_err(|error| {
            if user {
                peer.user_queued.fetch_sub(1, Ordering::Relaxed);
            }
            match error {
                TrySendError::Full(envelope) | TrySendError::Closed(envelope) => envelope,
            }
        })
    }

    /// The address `member` advertised when it connected to this node, while that
    /// connection lasts.
    pub(crate) fn heard_from(&self, member: MemberId) -> Option<Address> {
        let inbound = lock(&self.shared.inbound);
        let peer = &inbound.get(&member.node)?.peer;
        (peer.member == member).then(|| peer.address.clone())
    }

    /// Stops the tasks of peers not at `keep` (members that left the view), except writers
    /// to addresses that were never a member's and were written to within
    /// `unknown_peer_linger`: a joiner's InitJoinAck is sent before the joiner is in the view,
    /// and dropping its writer then would lose the answer and leave the join waiting for its
    /// retry. (A removed member's writer was busy until its removal: it stops at once.)
    pub(crate) fn retain(&mut self, keep: impl Fn(&Address) -> bool) {
        let linger = self.shared.settings.unknown_peer_linger;
        self.peers.retain(|address, peer| {
            let member = keep(address);
            peer.was_member |= member;
            let kept = member || (!peer.was_member && peer.last_send.elapsed() < linger);
            if !kept {
                peer.task.abort();
            }
            kept
        });
    }

    /// The counters.
    pub(crate) fn stats(&self) -> TransportStats {
        self.shared.counters.snapshot()
    }

    /// Stops listening and writing.
    pub(crate) fn shutdown(&mut self) {
        self.listener.abort();
        for peer in std::mem::take(&mut self.peers).into_values() {
            peer.task.abort();
        }
    }

    /// Stops listening and writing, and waits until the listening socket is closed: a node
    /// started again at the same address right after this one stopped can bind it (an
    /// aborted task drops its socket only when the runtime next gets to it).
    pub(crate) async fn close(&mut self) {
        self.shutdown();
        // The task ends cancelled; its result says nothing more.
        let _ = (&mut self.listener).await;
    }
}

impl Drop for Transport {
    fn drop(&mut self) {
        self.shutdown();
    }
}
