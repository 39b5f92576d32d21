//! `/metrics` with the process's Prometheus recorder: in a test binary of its own, since a
//! process has one recorder and every node in it records into it.

mod common;

use std::time::Duration;

use common::{Op, builder, counter, logs};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use shoal::management::{Endpoint, ManagementSettings};

const ASK: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_served_in_prometheus_text_with_latency_histograms() {
    logs();
    // The process's one recorder: only this test of the binary installs it.
    let handle = shoal::management::install_prometheus().expect("the first recorder");
    let node = builder(&[]).start().await.unwrap();
    for i in 0..20 {
        let entity = counter(&node, &format!("m{}", i % 5));
        entity.ask(&Op::Add(1), ASK).await.unwrap();
    }
    let mut settings = ManagementSettings::new("127.0.0.1:0".parse().unwrap());
    settings.metrics = Some(handle);
    let endpoint = Endpoint::start(node.clone(), settings).await.unwrap();
    let uri = format!("http://{}/metrics", endpoint.address());
    let client: Client<_, Empty<bytes::Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let response = client.get(uri.parse().unwrap()).await.unwrap();
    assert_eq!(response.status(), 200);
    let kind = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8(body.to_vec()).unwrap();
    let count = |path: &str| {
        let prefix = format!("shoal_ask_seconds_count{{path=\"{path}\"}} ");
        let line = text.lines().find(|l| l.starts_with(&prefix));
        line.map_or(0, |l| l[prefix.len()..].trim().parse::<u64>().unwrap())
    };
    assert_eq!(count("direct") + count("node"), 20, "{text}");
    assert!(
        count("node") >= 5,
        "each entity's first ask went through the node"
    );
    assert!(
        text.contains("shoal_ask_seconds_bucket{path=\"direct\",le=\"0.0001\"}"),
        "a histogram with the latency buckets"
    );
    assert!(text.contains("shoal_entities_started_total 5"), "{text}");
    // Each shard of the five entities had its home asked for once, and answered.
    let prefix = "shoal_coordinator_round_trip_seconds_count ";
    let line = text.lines().find(|l| l.starts_with(prefix));
    let answered = line.map_or(0, |l| l[prefix.len()..].trim().parse::<u64>().unwrap());
    assert!((1..=5).contains(&answered), "{text}");
    node.abort().await;
}
