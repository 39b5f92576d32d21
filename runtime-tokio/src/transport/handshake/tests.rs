use shoal_core::{Address, MemberId};

use super::{Handshake, HandshakeError, Identity, MAGIC, Peer, Role};

fn identity(node: u64, cluster: &str, secret: &[u8]) -> Identity {
    Identity {
        cluster_name: cluster.to_owned(),
        member: MemberId::new(node, 1),
        address: Address::new(format!("127.0.0.1:{}", 7000 + node)),
        secret: secret.to_vec(),
    }
}

/// Runs both sides to the end, frame by frame; returns what each side's last step said.
fn run(
    dialer: &mut Handshake,
    acceptor: &mut Handshake,
) -> (Result<(), HandshakeError>, Result<(), HandshakeError>) {
    let (mut d, mut a) = (Ok(()), Ok(()));
    for _ in 0..4 {
        while let Some(frame) = dialer.poll_frame() {
            a = a.and_then(|()| acceptor.handle_frame(&frame));
        }
        while let Some(frame) = acceptor.poll_frame() {
            d = d.and_then(|()| dialer.handle_frame(&frame));
        }
    }
    (d, a)
}

#[test]
fn members_of_one_cluster_with_one_secret_connect() {
    let mut dialer = Handshake::new(Role::Dialer, identity(1, "prod", b"s3cret"), [1; 32]);
    let mut acceptor = Handshake::new(Role::Acceptor, identity(2, "prod", b"s3cret"), [2; 32]);
    assert_eq!(run(&mut dialer, &mut acceptor), (Ok(()), Ok(())));
    let peer = |n: u64| Peer {
        member: MemberId::new(n, 1),
        address: Address::new(format!("127.0.0.1:{}", 7000 + n)),
    };
    assert_eq!(dialer.outcome(), Some(&peer(2)));
    assert_eq!(acceptor.outcome(), Some(&peer(1)));
}

#[test]
fn a_wrong_secret_is_refused_by_both_sides() {
    let mut dialer = Handshake::new(Role::Dialer, identity(1, "prod", b"s3cret"), [1; 32]);
    let mut acceptor = Handshake::new(Role::Acceptor, identity(2, "prod", b"guess"), [2; 32]);
    let (d, _) = run(&mut dialer, &mut acceptor);
    // The dialer checks first (the acceptor's proof follows its hello) and closes; the
    // acceptor never gets a proof and never establishes.
    assert_eq!(d, Err(HandshakeError::BadProof));
    assert!(dialer.has_failed());
    assert_eq!((dialer.outcome(), acceptor.outcome()), (None, None));

    // The acceptor refuses a wrong proof as well.
    let mut dialer = Handshake::new(Role::Dialer, identity(1, "prod", b"guess"), [1; 32]);
    let mut acceptor = Handshake::new(Role::Acceptor, identity(2, "prod", b"s3cret"), [2; 32]);
    acceptor
        .handle_frame(&dialer.poll_frame().expect("hello"))
        .expect("hello accepted");
    dialer
        .handle_frame(&acceptor.poll_frame().expect("hello"))
        .expect("hello accepted");
    let proof = dialer.poll_frame().expect("proof");
    assert_eq!(acceptor.handle_frame(&proof), Err(HandshakeError::BadProof));
    assert!(acceptor.has_failed());
}

#[test]
fn another_cluster_is_refused_before_any_proof() {
    let mut dialer = Handshake::new(Role::Dialer, identity(1, "prod", b"s"), [1; 32]);
    let mut acceptor = Handshake::new(Role::Acceptor, identity(2, "staging", b"s"), [2; 32]);
    let hello = dialer.poll_frame().expect("hello");
    let refused = acceptor.handle_frame(&hello);
    assert_eq!(
        refused,
        Err(HandshakeError::ClusterMismatch {
            ours: "staging".to_owned(),
            theirs: "prod".to_owned(),
        })
    );
    assert_eq!(
        acceptor.poll_frame(),
        None,
        "a failed handshake sends nothing more"
    );
    assert_eq!(acceptor.handle_frame(&hello), Err(HandshakeError::Failed));
}

/// A hello as a peer of another build would send it: postcard of the frame enum's first
/// variant (index 0) followed by the hello's fields.
fn foreign_hello(magic: [u8; 4], version: u8) -> Vec<u8> {
    let mut frame = vec![0];
    frame.extend(magic);
    frame.push(version);
    frame.extend([4]);
    frame.extend(b"prod");
    frame.extend([1, 1]); // member n1#1
    frame.extend([5]);
    frame.extend(b"n1:70");
    frame.extend([7; 32]);
    frame
}

#[test]
fn wrong_magic_version_and_garbage_are_refused() {
    let acceptor = || Handshake::new(Role::Acceptor, identity(2, "prod", b"s"), [2; 32]);
    // The hand-built hello is what this build sends, field for field.
    let mut a = acceptor();
    assert_eq!(
        a.handle_frame(&foreign_hello(MAGIC, shoal_core::codec::PROTOCOL_VERSION)),
        Ok(())
    );
    let cases: [(Vec<u8>, HandshakeError); 4] = [
        (
            foreign_hello(*b"HTTP", 5),
            HandshakeError::BadMagic(*b"HTTP"),
        ),
        (
            foreign_hello(MAGIC, 200),
            HandshakeError::VersionMismatch {
                ours: shoal_core::codec::PROTOCOL_VERSION,
                theirs: 200,
            },
        ),
        (b"GET / HTTP/1.1\r\n".to_vec(), HandshakeError::Malformed),
        (vec![0; 5000], HandshakeError::Malformed),
    ];
    for (frame, error) in cases {
        assert_eq!(acceptor().handle_frame(&frame), Err(error));
    }
}

#[test]
fn proofs_are_neither_replayable_nor_reflectable() {
    let secret = b"s3cret";
    // A proof recorded on one connection...
    let mut dialer = Handshake::new(Role::Dialer, identity(1, "prod", secret), [1; 32]);
    let mut acceptor = Handshake::new(Role::Acceptor, identity(2, "prod", secret), [2; 32]);
    let hello = dialer.poll_frame().expect("hello");
    acceptor.handle_frame(&hello).expect("accepted");
    let acceptor_hello = acceptor.poll_frame().expect("hello");
    dialer.handle_frame(&acceptor_hello).expect("accepted");
    let recorded_proof = dialer.poll_frame().expect("proof");

    // ...replayed with the same hello on a new connection (a fresh acceptor nonce) fails.
    let mut fresh = Handshake::new(Role::Acceptor, identity(2, "prod", secret), [3; 32]);
    fresh.handle_frame(&hello).expect("hello accepted");
    assert_eq!(
        fresh.handle_frame(&recorded_proof),
        Err(HandshakeError::BadProof)
    );

    // Our own proof sent back to us fails too.
    let mut reflected = Handshake::new(Role::Acceptor, identity(2, "prod", secret), [4; 32]);
    reflected.handle_frame(&hello).expect("hello accepted");
    let _hello = reflected.poll_frame();
    let own_proof = reflected.poll_frame().expect("proof");
    assert_eq!(
        reflected.handle_frame(&own_proof),
        Err(HandshakeError::BadProof)
    );
}

#[test]
fn frames_out_of_order_are_refused() {
    let mut dialer = Handshake::new(Role::Dialer, identity(1, "prod", b"s"), [1; 32]);
    let mut acceptor = Handshake::new(Role::Acceptor, identity(2, "prod", b"s"), [2; 32]);
    let hello = dialer.poll_frame().expect("hello");
    acceptor.handle_frame(&hello).expect("accepted");
    assert_eq!(
        acceptor.handle_frame(&hello),
        Err(HandshakeError::OutOfOrder),
        "a second hello"
    );

    let mut early = Handshake::new(Role::Dialer, identity(1, "prod", b"s"), [1; 32]);
    let _ = early.poll_frame();
    let proof_first = [vec![1], vec![0; 32]].concat();
    assert_eq!(
        early.handle_frame(&proof_first),
        Err(HandshakeError::OutOfOrder)
    );
}
