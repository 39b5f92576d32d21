//! A member that connected to this node is answered at the address it advertised, before
//! membership carries that address here; once its connection ends, it is forgotten.

use std::time::Duration;

use shoal_core::{ClusterMessage, Message};
use tokio::sync::mpsc;
use tokio::time::timeout;

use super::network::{Network, Tcp};
use super::*;

/// A transport listening on a free loopback port: it, its address and its control inbox.
async fn transport(member: MemberId) -> (Transport, Address, mpsc::Receiver<Box<Envelope>>) {
    let listener = Tcp.bind("127.0.0.1:0").await.expect("a loopback port");
    let address = Address::new(listener.local_addr().expect("bound").to_string());
    let (control, control_in) = mpsc::channel(16);
    // Only control envelopes are sent here; the data receiver may go.
    let (data, _) = mpsc::channel(16);
    let identity = Identity {
        cluster_name: "heard".into(),
        member,
        address: address.clone(),
        secret: b"heard secret".to_vec(),
    };
    let settings = TransportSettings::default();
    let (routes, _) = crate::entity::route::Routes::new();
    let inbox = Inbox {
        control,
        data,
        routes,
    };
    let transport = Transport::start(listener, Arc::new(Tcp), identity, settings, 7, inbox);
    (transport, address, control_in)
}

fn heartbeat(from: MemberId, to: MemberId) -> Box<Envelope> {
    Box::new(Envelope {
        from,
        to,
        seq: 0,
        message: Message::Cluster(ClusterMessage::Heartbeat { sequence: 1 }),
    })
}

async fn received(inbox: &mut mpsc::Receiver<Box<Envelope>>) -> Box<Envelope> {
    let wait = timeout(Duration::from_secs(5), inbox.recv()).await;
    wait.expect("delivered within 5 s")
        .expect("the inbox is open")
}

#[tokio::test]
async fn a_member_that_connected_is_answered_where_it_advertised() {
    let (a_id, b_id) = (MemberId::new(1, 1), MemberId::new(2, 1));
    let (mut a, a_address, mut a_inbox) = transport(a_id).await;
    let (mut b, b_address, mut b_inbox) = transport(b_id).await;
    assert_eq!(a.heard_from(b_id), None, "nobody connected yet");

    b.send(&a_address, heartbeat(b_id, a_id)).expect("queued");
    assert_eq!(received(&mut a_inbox).await.from, b_id);
    assert_eq!(a.heard_from(b_id), Some(b_address.clone()));
    assert_eq!(
        a.heard_from(MemberId::new(2, 2)),
        None,
        "not another incarnation"
    );
    a.send(&b_address, heartbeat(a_id, b_id)).expect("queued");
    assert_eq!(received(&mut b_inbox).await.from, a_id);

    // B's writer to A closes: A forgets where B was (membership says from then on).
    b.close().await;
    let mut forgotten = false;
    for _ in 0..250 {
        if a.heard_from(b_id).is_none() {
            forgotten = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(forgotten, "the ended connection's address is dropped");
}
