//! Frame encoding: one protocol-version byte, then the postcard encoding of an [`Envelope`].
//! Decoding arbitrary bytes never panics; anything unexpected is a [`CodecError`].

use crate::error::CodecError;
use crate::message::ClusterMessage;
use crate::message::{Body, Envelope, Message};

/// The protocol version this build speaks; the first byte of every frame.
/// Version 2 added `Envelope::seq` (link sequence numbers); version 3 the entity types each
/// member hosts (in `Join` and in gossip); version 4 member addresses (in `InitJoin`, `Join`
/// and gossip) and application messages (`Message::App`); version 5 the dead-letter reasons
/// `OutboundQueueFull` and `MailboxFull` (in `StartOutcome::Dropped`); version 7 digest-only
/// gossip rounds (`ClusterMessage::GossipStatus`); version 8 the coordinator's decisions
/// (`Body::Explain`, `Body::Explanation`).
pub const PROTOCOL_VERSION: u8 = 8;

/// Largest frame accepted or produced (16 MiB). Larger frames are refused before decoding so a
/// peer cannot make a node allocate without bound.
pub const MAX_FRAME_LEN: usize = 16 * 1024 * 1024;

/// Typical size of a frame without its payload (version, members, entity type and id).
const FRAME_OVERHEAD: usize = 96;

/// Encodes an envelope into a frame.
///
/// # Errors
/// [`CodecError::TooLarge`] if the frame would exceed [`MAX_FRAME_LEN`] (an oversized payload);
/// nothing is sent.
pub fn encode(envelope: &Envelope) -> Result<Vec<u8>, CodecError> {
    // Room for the headers and the payload up front, so the frame is not regrown while written.
    let payload = match envelope.message.body() {
        Some(Body::Forward { payload, .. }) => payload.0.len(),
        _ => 0,
    };
    let mut frame = Vec::with_capacity(FRAME_OVERHEAD + payload);
    frame.push(PROTOCOL_VERSION);
    let frame =
        postcard::to_extend(envelope, frame).map_err(|e| CodecError::Malformed(e.to_string()))?;
    if frame.len() > MAX_FRAME_LEN {
        return Err(CodecError::TooLarge(frame.len()));
    }
    Ok(frame)
}

/// The length of `envelope`'s frame, without building it (what [`encode`] would return, the
/// bytes not written anywhere).
///
/// # Errors
/// As [`encode`]: [`CodecError::TooLarge`] if the frame would exceed [`MAX_FRAME_LEN`].
pub fn frame_len(envelope: &Envelope) -> Result<usize, CodecError> {
    // A message that knows the length of its large part is measured around it: the envelope
    // with a bodiless message in its place (both variant tags take one byte), then its other
    // fields (fields encode one after another).
    let around = || {
        measured(&Envelope {
            message: Message::Cluster(ClusterMessage::InitJoinAck),
            ..*envelope
        })
    };
    let len = 1 + match &envelope.message {
        // A full gossip whose digest is known knows its length.
        Message::Cluster(ClusterMessage::Gossip(gossip) | ClusterMessage::Welcome(gossip))
            if gossip.encoded_len().is_some() =>
        {
            around()? + gossip.encoded_len().unwrap_or_default()
        }
        // A seen set keeps its length.
        Message::Cluster(ClusterMessage::GossipSeen {
            state,
            seen,
            answer,
        }) => around()? + measured(&(state, answer))? + seen.encoded_len(),
        _ => measured(envelope)?,
    };
    if len > MAX_FRAME_LEN {
        return Err(CodecError::TooLarge(len));
    }
    Ok(len)
}

/// The bytes `value` encodes to, not written anywhere.
fn measured<T: serde::Serialize + ?Sized>(value: &T) -> Result<usize, CodecError> {
    postcard::serialize_with_flavor(value, postcard::ser_flavors::Size::default())
        .map_err(|e| CodecError::Malformed(e.to_string()))
}

/// Decodes one frame.
///
/// # Errors
/// Empty, oversized, wrong-version, malformed or over-long frames; see [`CodecError`].
pub fn decode(frame: &[u8]) -> Result<Envelope, CodecError> {
    if frame.len() > MAX_FRAME_LEN {
        return Err(CodecError::TooLarge(frame.len()));
    }
    let (&version, body) = frame.split_first().ok_or(CodecError::Empty)?;
    if version != PROTOCOL_VERSION {
        return Err(CodecError::UnsupportedVersion {
            found: version,
            expected: PROTOCOL_VERSION,
        });
    }
    let (envelope, rest) = postcard::take_from_bytes::<Envelope>(body)
        .map_err(|e| CodecError::Malformed(e.to_string()))?;
    if !rest.is_empty() {
        return Err(CodecError::TrailingBytes(rest.len()));
    }
    Ok(envelope)
}
