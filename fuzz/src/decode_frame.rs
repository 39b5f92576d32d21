//! `decode_frame`: arbitrary bytes into the wire decoder.
//!
//! * decoding never panics, and never holds more than [`MAX_FRAME_LEN`] bytes of heap at once
//!   (checked when [`PeakAlloc`] is the global allocator), whatever lengths the frame claims;
//! * whatever decodes re-encodes, and the re-encoding decodes to the same value and is stable
//!   (encoding it again gives the same bytes).
//!
//! The runtime's stream framing (length prefix + frame) gets its own check here once the tokio
//! host has a frame reader.

use shoal_core::codec::{self, MAX_FRAME_LEN};

use crate::peak_alloc::PeakAlloc;

/// Checks one input; panics on a broken property.
pub fn run(data: &[u8]) {
    let before = PeakAlloc::live();
    PeakAlloc::reset_peak();
    let decoded = codec::decode(data);
    let held = PeakAlloc::held_since(before);
    if PeakAlloc::is_installed() {
        assert!(
            held <= MAX_FRAME_LEN,
            "decoding a {}-byte frame held {held} bytes of heap (cap {MAX_FRAME_LEN})",
            data.len()
        );
    }
    let Ok(envelope) = decoded else { return };
    let frame = codec::encode(&envelope)
        .unwrap_or_else(|e| panic!("a decoded envelope does not re-encode: {e}: {envelope:?}"));
    let again = codec::decode(&frame)
        .unwrap_or_else(|e| panic!("a re-encoded frame does not decode: {e}: {envelope:?}"));
    assert_eq!(
        again, envelope,
        "the re-encoded frame decodes to another value"
    );
    let stable = codec::encode(&again).expect("encodes once, encodes twice");
    assert_eq!(stable, frame, "encoding is not stable");
}
