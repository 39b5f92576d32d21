//! `handshake`: one side of a connection handshake (the input's first byte picks dialer or
//! acceptor) fed the peer frames the rest of the input holds, each prefixed with a two-byte
//! little-endian length. Checks: no input panics; the handshake never establishes, since the
//! input cannot hold a proof made with a secret it does not know; once failed it stays failed
//! and sends nothing more.

use shoal::transport::handshake::{Handshake, HandshakeError, Identity, Role};
use shoal_core::{Address, MemberId};

/// Runs the harness on one input.
pub fn run(data: &[u8]) {
    let Some((&first, mut rest)) = data.split_first() else {
        return;
    };
    let role = if first & 1 == 0 {
        Role::Dialer
    } else {
        Role::Acceptor
    };
    let identity = Identity {
        cluster_name: "fuzz".to_owned(),
        member: MemberId::new(1, 1),
        address: Address::new("127.0.0.1:7355"),
        secret: b"a secret the input does not know".to_vec(),
    };
    let mut handshake = Handshake::new(role, identity, [first; 32]);
    while handshake.poll_frame().is_some() {}
    while let [lo, hi, tail @ ..] = rest {
        let len = usize::from(u16::from_le_bytes([*lo, *hi])).min(tail.len());
        let (frame, next) = tail.split_at(len);
        rest = next;
        let failed_before = handshake.has_failed();
        let result = handshake.handle_frame(frame);
        if failed_before {
            assert_eq!(result, Err(HandshakeError::Failed), "failed stays failed");
        }
        if handshake.has_failed() {
            assert!(
                handshake.poll_frame().is_none(),
                "a failed handshake sends nothing"
            );
        }
        assert!(
            handshake.outcome().is_none(),
            "established without the secret"
        );
        while handshake.poll_frame().is_some() {}
    }
}
