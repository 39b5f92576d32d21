//! Drives the sans-IO [`Handshake`] over a fresh connection, then hands the stream over
//! with whatever the peer already sent after its proof.

use bytes::{Bytes, BytesMut};
use futures_util::{SinkExt, StreamExt};
use shoal_core::Rng;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::{Framed, LengthDelimitedCodec};

use super::counters::HandshakeFailure;
use super::handshake::{Handshake, Identity, MAX_HANDSHAKE_FRAME, Peer, Role};

/// Runs the handshake as `role` on `stream`: the peer, and the bytes read past the handshake.
pub(crate) async fn handshake<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    role: Role,
    identity: &Identity,
) -> Result<(Peer, BytesMut), HandshakeFailure> {
    let codec = LengthDelimitedCodec::builder()
        .max_frame_length(MAX_HANDSHAKE_FRAME)
        .new_codec();
    let mut framed = Framed::new(stream, codec);
    let mut nonce = [0; 32];
    getrandom::fill(&mut nonce).map_err(|e| std::io::Error::other(e.to_string()))?;
    let mut handshake = Handshake::new(role, identity.clone(), nonce);
    loop {
        while let Some(frame) = handshake.poll_frame() {
            framed.send(Bytes::from(frame)).await?;
        }
        if let Some(peer) = handshake.outcome() {
            let peer = peer.clone();
            return Ok((peer, framed.into_parts().read_buf));
        }
        let frame = framed.next().await.ok_or(HandshakeFailure::Closed)??;
        handshake.handle_frame(&frame)?;
    }
}

/// A random factor in `[0.5, 1.5)` to spread reconnect attempts. Seeded, not secret: the
/// spreading only needs members to differ, and a replay needs the same delays.
pub(crate) fn jitter(rng: &mut Rng) -> f64 {
    0.5 + (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}
