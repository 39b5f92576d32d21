//! Every bad handshake and frame closes its connection, is counted, and leaves the node
//! serving: garbage, oversized lengths, wrong magic, version, cluster and secret, and after a
//! good handshake oversized, undecodable and forged frames.

mod common;

use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use shoal::transport::handshake::{Handshake, Identity, MAX_HANDSHAKE_FRAME, Role};
use shoal_core::{Address, Envelope, MemberId, Message, codec};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

use common::{Op, builder, counter, logs};

/// Connects to `node` and runs a dialer's handshake as `cluster` with `secret`; the stream
/// if the node accepted.
async fn handshake(node: &shoal::Node, cluster: &str, secret: &[u8]) -> Option<TcpStream> {
    let mut stream = TcpStream::connect(node.address().to_string())
        .await
        .unwrap();
    let codec = LengthDelimitedCodec::builder()
        .max_frame_length(MAX_HANDSHAKE_FRAME)
        .new_codec();
    let mut framed = Framed::new(&mut stream, codec);
    let identity = Identity {
        cluster_name: cluster.into(),
        member: MemberId::new(99, 1),
        address: Address::new("127.0.0.1:9"),
        secret: secret.to_vec(),
    };
    let mut handshake = Handshake::new(Role::Dialer, identity, [7; 32]);
    loop {
        while let Some(frame) = handshake.poll_frame() {
            framed.send(Bytes::from(frame)).await.ok()?;
        }
        if handshake.outcome().is_some() {
            return Some(stream);
        }
        let frame = framed.next().await?.ok()?;
        handshake.handle_frame(&frame).ok()?;
    }
}

/// Whether the node closes `stream` within 5 s.
async fn closed(mut stream: TcpStream) -> bool {
    let mut buf = [0u8; 256];
    let read = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .is_ok()
}

/// Whether the node closes the connection after a good handshake and then `bytes`.
async fn closed_after_handshake(node: &shoal::Node, bytes: &[u8]) -> bool {
    let mut stream = handshake(node, "test", b"test secret")
        .await
        .expect("accepted");
    stream.write_all(bytes).await.unwrap();
    closed(stream).await
}

/// The node still answers asks.
async fn assert_still_serves(node: &shoal::Node) {
    let counter = counter(node, "still");
    assert_eq!(
        counter.ask(&Op::Add(1), Duration::from_secs(5)).await,
        Ok(1)
    );
}

async fn raw(node: &shoal::Node, bytes: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(node.address().to_string())
        .await
        .unwrap();
    stream.write_all(bytes).await.unwrap();
    stream
}

fn frame(bytes: &[u8]) -> Vec<u8> {
    let mut framed = (bytes.len() as u32).to_be_bytes().to_vec();
    framed.extend_from_slice(bytes);
    framed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_handshakes_are_closed_and_counted() {
    logs();
    let node = builder(&[]).start().await.unwrap();
    let failed = async || node.stats().await.unwrap().transport.handshakes_failed;

    assert!(
        closed(raw(&node, &frame(b"GET / HTTP/1.1\r\n\r\n")).await).await,
        "garbage"
    );
    assert!(
        closed(raw(&node, &u32::MAX.to_be_bytes()).await).await,
        "oversized length"
    );
    // A valid hello (postcard: variant tag, 4 magic bytes, version byte, ...) made wrong.
    let identity = Identity {
        cluster_name: "test".into(),
        member: MemberId::new(99, 1),
        address: Address::new("127.0.0.1:9"),
        secret: b"test secret".to_vec(),
    };
    let hello = Handshake::new(Role::Dialer, identity, [1; 32])
        .poll_frame()
        .unwrap();
    let mut bad_magic = hello.clone();
    bad_magic[1..5].copy_from_slice(b"HTTP");
    assert!(
        closed(raw(&node, &frame(&bad_magic)).await).await,
        "wrong magic"
    );
    let mut bad_version = hello;
    bad_version[5] = bad_version[5].wrapping_add(1);
    assert!(
        closed(raw(&node, &frame(&bad_version)).await).await,
        "wrong version"
    );
    assert!(
        handshake(&node, "other", b"test secret").await.is_none(),
        "wrong cluster"
    );
    assert!(
        handshake(&node, "test", b"guess").await.is_none(),
        "wrong secret"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(failed().await >= 6, "counted: {}", failed().await);

    assert_still_serves(&node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_frames_after_a_good_handshake_are_closed_and_counted() {
    logs();
    let node = builder(&[]).start().await.unwrap();
    let rejected = async || node.stats().await.unwrap().transport.frames_rejected;

    let oversized = (codec::MAX_FRAME_LEN as u32 + 1).to_be_bytes();
    assert!(
        closed_after_handshake(&node, &oversized).await,
        "oversized frame"
    );
    let undecodable = frame(&[0xff; 40]);
    assert!(
        closed_after_handshake(&node, &undecodable).await,
        "undecodable frame"
    );
    // An envelope claiming to come from a member other than the one that authenticated.
    let forged = Envelope {
        from: MemberId::new(1234, 1),
        to: node.member(),
        seq: 1,
        message: Message::App {
            payload: shoal_core::Payload(vec![1]),
        },
    };
    let forged = frame(&codec::encode(&forged).unwrap());
    assert!(
        closed_after_handshake(&node, &forged).await,
        "forged sender"
    );

    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(rejected().await, 3);
    assert_still_serves(&node).await;
}
