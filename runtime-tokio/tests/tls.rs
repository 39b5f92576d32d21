//! Mutual TLS on loopback (feature `tls`): members with certificates from the cluster's CA
//! form a cluster and answer asks; a node whose certificate comes from another CA, and a node
//! without TLS, are refused before the member handshake and never join.

mod common;

use std::time::Duration;

use common::{Op, await_regions, builder, counter};
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair, KeyUsagePurpose};
use shoal::{MutualTls, Node, Tcp, TlsSettings};

/// A throwaway certificate authority.
struct Authority {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Authority {
    fn new() -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).unwrap();
        Self { cert, key }
    }

    /// Settings for a member on loopback, signed by this authority.
    fn member(&self) -> TlsSettings {
        let key = KeyPair::generate().unwrap();
        let params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        TlsSettings {
            ca_pem: self.cert.pem().into_bytes(),
            cert_pem: cert.pem().into_bytes(),
            key_pem: key.serialize_pem().into_bytes(),
        }
    }
}

async fn tls_node(seeds: &[String], settings: &TlsSettings) -> Node {
    builder(seeds)
        .network(MutualTls::new(Tcp, settings).expect("valid TLS settings"))
        .start()
        .await
        .expect("node")
}

/// Waits `for_` and returns how many members `node` sees.
async fn members_after(node: &Node, for_: Duration) -> usize {
    tokio::time::sleep(for_).await;
    let region = node.region::<common::Counter>("counter").unwrap();
    region.current_regions().await.map_or(0, |r| r.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_with_the_clusters_certificates_form_a_cluster() {
    common::logs();
    let ca = Authority::new();
    let first = tls_node(&[], &ca.member()).await;
    let seeds = vec![first.address().to_string()];
    let second = tls_node(&seeds, &ca.member()).await;
    await_regions(&first, 2).await;
    await_regions(&second, 2).await;
    for i in 0..10 {
        let total = counter(&second, &format!("tls-{i}"))
            .ask(&Op::Add(2), Duration::from_secs(5))
            .await
            .expect("an ask over TLS");
        assert_eq!(total, 2);
    }
    let stats = first.stats().await.unwrap().transport;
    assert!(stats.accepted >= 1, "{stats:?}");
    assert_eq!(stats.handshakes_failed, 0, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_from_another_authority_or_none_is_refused() {
    common::logs();
    let ca = Authority::new();
    let first = tls_node(&[], &ca.member()).await;
    let seeds = vec![first.address().to_string()];
    await_regions(&first, 1).await;

    let intruder = tls_node(&seeds, &Authority::new().member()).await;
    let plaintext = builder(&seeds).start().await.expect("plain node");
    assert_eq!(members_after(&first, Duration::from_secs(3)).await, 1);
    let failed = first.stats().await.unwrap().transport.handshakes_failed;
    // Both were turned away more than once (they retry); neither joined.
    assert!(failed >= 2, "handshakes failed: {failed}");
    assert_eq!(
        intruder.stats().await.unwrap().transport.dialed,
        0,
        "the intruder completed a handshake"
    );
    assert_eq!(plaintext.stats().await.unwrap().transport.dialed, 0);
}
