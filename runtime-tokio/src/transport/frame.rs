//! Frames on a connection: a 4-byte big-endian length, then `shoal_core::codec`'s encoding of
//! one envelope (its protocol-version byte first). Lengths above the core's frame cap are
//! refused before anything is buffered, so a peer cannot make a node allocate more than that.

use bytes::{Bytes, BytesMut};
use shoal_core::CodecError;
use shoal_core::Envelope;
use shoal_core::codec::{self, MAX_FRAME_LEN};
use tokio_util::codec::{Decoder, Encoder, LengthDelimitedCodec};

/// Why a frame was refused; the connection is closed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum FrameError {
    /// Reading or writing the socket failed, or a length prefix exceeded the cap.
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    /// The frame's bytes are not an envelope of this protocol version.
    #[error("frame: {0}")]
    Codec(#[from] CodecError),
}

/// Encodes and decodes envelopes as length-delimited frames.
#[derive(Debug)]
pub(crate) struct EnvelopeCodec {
    frames: LengthDelimitedCodec,
}

impl Default for EnvelopeCodec {
    fn default() -> Self {
        Self {
            frames: LengthDelimitedCodec::builder()
                .max_frame_length(MAX_FRAME_LEN)
                .new_codec(),
        }
    }
}

impl Decoder for EnvelopeCodec {
    type Item = Envelope;
    type Error = FrameError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Envelope>, FrameError> {
        match self.frames.decode(src)? {
            Some(frame) => Ok(Some(codec::decode(&frame)?)),
            None => Ok(None),
        }
    }
}

impl Encoder<&Envelope> for EnvelopeCodec {
    type Error = FrameError;

    fn encode(&mut self, envelope: &Envelope, dst: &mut BytesMut) -> Result<(), FrameError> {
        let frame = codec::encode(envelope)?;
        self.frames.encode(Bytes::from(frame), dst)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use shoal_core::{MemberId, Message, Payload};

    use super::*;

    fn envelope(seq: u64) -> Envelope {
        Envelope {
            from: MemberId::new(1, 1),
            to: MemberId::new(2, 1),
            seq,
            message: Message::App {
                payload: Payload(b"hello".to_vec()),
            },
        }
    }

    #[test]
    fn envelopes_round_trip_across_partial_reads() {
        let mut codec = EnvelopeCodec::default();
        let mut wire = BytesMut::new();
        for seq in 1..=3 {
            codec.encode(&envelope(seq), &mut wire).expect("encodes");
        }
        // Fed one byte at a time, as a slow socket would.
        let mut buffer = BytesMut::new();
        let mut decoded = Vec::new();
        for byte in wire {
            buffer.extend_from_slice(&[byte]);
            while let Some(e) = codec.decode(&mut buffer).expect("decodes") {
                decoded.push(e);
            }
        }
        assert_eq!(decoded, [envelope(1), envelope(2), envelope(3)]);
    }

    #[test]
    fn oversized_lengths_and_garbage_are_refused() {
        let mut codec = EnvelopeCodec::default();
        let too_long = u32::try_from(MAX_FRAME_LEN + 1).expect("fits");
        let mut src = BytesMut::from(&too_long.to_be_bytes()[..]);
        assert!(matches!(codec.decode(&mut src), Err(FrameError::Io(_))));

        let mut codec = EnvelopeCodec::default();
        let mut src = BytesMut::from(&[0, 0, 0, 3, 0xff, 0xff, 0xff][..]);
        assert!(matches!(codec.decode(&mut src), Err(FrameError::Codec(_))));
    }
}
