//! The connection handshake, sans-IO: a synchronous state machine fed the peer's frames and
//! polled for its own, so that every rule of who may connect is unit-tested and fuzzed apart
//! from sockets (the README's runtime section).
//!
//! Each side sends a [`Hello`] (magic, protocol version, cluster name, its member id and
//! address, a fresh nonce) as soon as it starts. On the peer's hello it checks magic, version
//! and cluster name, then sends a proof: HMAC-SHA256 keyed by the cluster's shared secret over
//! a role label and both hellos, the dialer's first. On the peer's proof it checks it in
//! constant time; the connection is then established with the peer's identity.
//!
//! Why this shape: both nonces are inside both proofs, so a recorded proof never verifies on
//! another connection; the role label makes the two proofs of one connection differ, so a
//! peer cannot reflect ours back at us; and nothing secret is ever sent.

use std::collections::VecDeque;

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use shoal_core::{Address, MemberId, codec::PROTOCOL_VERSION};

/// The first bytes of every hello: "SHOL".
pub const MAGIC: [u8; 4] = *b"SHOL";

/// Largest handshake frame accepted (a hello carries two short strings).
pub const MAX_HANDSHAKE_FRAME: usize = 4096;

type HmacSha256 = Hmac<Sha256>;

/// Which end of the connection this is.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum Role {
    /// It opened the connection.
    Dialer,
    /// It accepted the connection.
    Acceptor,
}

impl Role {
    fn label(self) -> &'static [u8] {
        match self {
            Self::Dialer => b"shoal handshake v1: dialer proof",
            Self::Acceptor => b"shoal handshake v1: acceptor proof",
        }
    }

    fn other(self) -> Self {
        match self {
            Self::Dialer => Self::Acceptor,
            Self::Acceptor => Self::Dialer,
        }
    }
}

/// What a side says about itself.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
pub struct Hello {
    /// [`MAGIC`].
    pub magic: [u8; 4],
    /// The wire protocol version it speaks (`shoal_core::codec::PROTOCOL_VERSION`).
    pub protocol_version: u8,
    /// The cluster it belongs to.
    pub cluster_name: String,
    /// Its member id.
    pub member: MemberId,
    /// The address others reach it at.
    pub address: Address,
    /// Fresh randomness of this connection.
    pub nonce: [u8; 32],
}

/// The frames of a handshake.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
enum Frame {
    Hello(Hello),
    Proof([u8; 32]),
}

/// This side's identity and the cluster's shared secret.
#[derive(Clone, Debug)]
pub struct Identity {
    /// The cluster's name; a peer of another cluster is refused.
    pub cluster_name: String,
    /// This member.
    pub member: MemberId,
    /// The address it advertises.
    pub address: Address,
    /// The shared secret keying the proofs (may be empty: then only the cluster name and
    /// version are checked).
    pub secret: Vec<u8>,
}

/// The peer of an established connection.
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct Peer {
    /// Its member id.
    pub member: MemberId,
    /// The address it advertises.
    pub address: Address,
}

/// Why a handshake failed; the connection is closed.
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum HandshakeError {
    /// A frame that does not decode, or is too large.
    #[error("malformed handshake frame")]
    Malformed,
    /// The peer does not speak Shoal.
    #[error("wrong magic {0:?}")]
    BadMagic([u8; 4]),
    /// The peer speaks another protocol version.
    #[error("protocol version {theirs}, this node speaks {ours}")]
    VersionMismatch {
        /// Ours.
        ours: u8,
        /// Theirs.
        theirs: u8,
    },
    /// The peer belongs to another cluster.
    #[error("cluster {theirs:?}, this node belongs to {ours:?}")]
    ClusterMismatch {
        /// Ours.
        ours: String,
        /// Theirs.
        theirs: String,
    },
    /// The peer's proof is wrong: it does not hold the shared secret (or replayed a proof).
    #[error("the peer's proof does not verify (wrong shared secret?)")]
    BadProof,
    /// A frame the handshake does not expect now (a second hello, a proof before the hello).
    #[error("unexpected handshake frame")]
    OutOfOrder,
    /// A frame after the handshake failed.
    #[error("the handshake already failed")]
    Failed,
}

#[derive(Debug)]
enum State {
    /// Our hello is out; waiting for theirs.
    AwaitHello,
    /// Our proof is out; waiting for theirs (over their hello as received).
    AwaitProof {
        peer: Peer,
        theirs: Vec<u8>,
    },
    Established(Peer),
    Failed,
}

/// One connection's handshake.
#[derive(Debug)]
pub struct Handshake {
    role: Role,
    identity: Identity,
    ours: Vec<u8>,
    state: State,
    outbox: VecDeque<Vec<u8>>,
}

impl Handshake {
    /// Starts a handshake with a fresh `nonce` (the host draws it); the hello is ready to
    /// poll at once.
    pub fn new(role: Role, identity: Identity, nonce: [u8; 32]) -> Self {
        let hello = Hello {
            magic: MAGIC,
            protocol_version: PROTOCOL_VERSION,
            cluster_name: identity.cluster_name.clone(),
            member: identity.member,
            address: identity.address.clone(),
            nonce,
        };
        let ours = encode(&Frame::Hello(hello));
        Self {
            role,
            identity,
            outbox: VecDeque::from([ours.clone()]),
            ours,
            state: State::AwaitHello,
        }
    }

    /// Feeds one frame from the peer. An error fails the handshake for good.
    pub fn handle_frame(&mut self, bytes: &[u8]) -> Result<(), HandshakeError> {
        let result = self.step(bytes);
        if result.is_err() {
            self.state = State::Failed;
            self.outbox.clear();
        }
        result
    }

    fn step(&mut self, bytes: &[u8]) -> Result<(), HandshakeError> {
        if matches!(self.state, State::Failed) {
            return Err(HandshakeError::Failed);
        }
        if bytes.len() > MAX_HANDSHAKE_FRAME {
            return Err(HandshakeError::Malformed);
        }
        let frame: Frame = postcard::from_bytes(bytes).map_err(|_| HandshakeError::Malformed)?;
        match (&self.state, frame) {
            (State::AwaitHello, Frame::Hello(hello)) => {
                self.check_hello(&hello)?;
                let proof = self.mac(self.role, bytes).finalize().into_bytes().into();
                self.outbox.push_back(encode(&Frame::Proof(proof)));
                let peer = Peer {
                    member: hello.member,
                    address: hello.address,
                };
                let theirs = bytes.to_vec();
                self.state = State::AwaitProof { peer, theirs };
                Ok(())
            }
            (State::AwaitProof { peer, theirs }, Frame::Proof(proof)) => {
                // `verify_slice` compares in constant time.
                self.mac(self.role.other(), theirs)
                    .verify_slice(&proof)
                    .map_err(|_| HandshakeError::BadProof)?;
                self.state = State::Established(peer.clone());
                Ok(())
            }
            _ => Err(HandshakeError::OutOfOrder),
        }
    }

    fn check_hello(&self, hello: &Hello) -> Result<(), HandshakeError> {
        if hello.magic != MAGIC {
            return Err(HandshakeError::BadMagic(hello.magic));
        }
        if hello.protocol_version != PROTOCOL_VERSION {
            return Err(HandshakeError::VersionMismatch {
                ours: PROTOCOL_VERSION,
                theirs: hello.protocol_version,
            });
        }
        if hello.cluster_name != self.identity.cluster_name {
            return Err(HandshakeError::ClusterMismatch {
                ours: self.identity.cluster_name.clone(),
                theirs: hello.cluster_name.clone(),
            });
        }
        Ok(())
    }

    /// The MAC of the proof `role` owes, given the peer's hello as received: over the role's
    /// label and both hellos, the dialer's first, each prefixed with its length.
    fn mac(&self, role: Role, theirs: &[u8]) -> HmacSha256 {
        let (dialer, acceptor) = match self.role {
            Role::Dialer => (self.ours.as_slice(), theirs),
            Role::Acceptor => (theirs, self.ours.as_slice()),
        };
        let mut mac = HmacSha256::new_from_slice(&self.identity.secret)
            .expect("HMAC takes keys of any length");
        for part in [role.label(), dialer, acceptor] {
            mac.update(&(part.len() as u64).to_le_bytes());
            mac.update(part);
        }
        mac
    }

    /// The next frame to send, if any.
    pub fn poll_frame(&mut self) -> Option<Vec<u8>> {
        self.outbox.pop_front()
    }

    /// The peer, once the handshake succeeded.
    pub fn outcome(&self) -> Option<&Peer> {
        match &self.state {
            State::Established(peer) => Some(peer),
            _ => None,
        }
    }

    /// Whether the handshake failed (the connection must be closed).
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn has_failed(&self) -> bool {
        matches!(self.state, State::Failed)
    }
}

fn encode(frame: &Frame) -> Vec<u8> {
    postcard::to_allocvec(frame).expect("handshake frames always encode")
}

#[cfg(test)]
mod tests;
