//! The management endpoint, asked by a real HTTP client (hyper's) on loopback: readiness and
//! liveness with their status codes, the cluster's members as a member sees them, and clear
//! errors for what it does not serve.

mod common;

use std::time::Duration;

use common::{builder, cluster, eventually, logs};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use shoal::management::Endpoint;

type Http = Client<hyper_util::client::legacy::connect::HttpConnector, Empty<bytes::Bytes>>;

fn client() -> Http {
    Client::builder(TokioExecutor::new()).build_http()
}

/// `method path` on `endpoint`: the status and the JSON body.
async fn call(http: &Http, endpoint: &Endpoint, method: &str, path: &str) -> (u16, Value) {
    let uri = format!("http://{}{path}", endpoint.address());
    let request = hyper::Request::builder()
        .method(method)
        .uri(uri)
        .body(Empty::new())
        .unwrap();
    let response = http.request(request).await.expect("an answer");
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let json = serde_json::from_slice(&body).expect("a JSON body");
    (status, json)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_answers_readiness_liveness_and_members() {
    logs();
    let nodes = cluster(2).await;
    let loopback = "127.0.0.1:0".parse().unwrap();
    let endpoint = Endpoint::start(nodes[1].clone(), loopback).await.unwrap();
    let http = client();
    eventually(
        Duration::from_secs(20),
        Duration::from_millis(50),
        || async {
            match call(&http, &endpoint, "GET", "/ready").await {
                (200, body) if body["ready"] == true => Ok(()),
                (status, body) => Err(format!("{status}: {body}")),
            }
        },
    )
    .await;
    let (_, ready) = call(&http, &endpoint, "GET", "/ready").await;
    assert_eq!(ready["member"], nodes[1].member().to_string());
    assert_eq!(ready["status"], "Up");
    assert_eq!(ready["entityTypes"][0]["entityType"], "counter");
    assert_eq!(ready["entityTypes"][0]["allocating"], true);
    assert_eq!(
        call(&http, &endpoint, "GET", "/alive").await,
        (200, serde_json::json!({ "alive": true }))
    );

    let (status, members) = call(&http, &endpoint, "GET", "/cluster/members").await;
    assert_eq!(status, 200);
    assert_eq!(members["selfNode"], nodes[1].address().to_string());
    let oldest = nodes[0].address().to_string();
    assert_eq!(
        members["oldest"], oldest,
        "the first node formed the cluster"
    );
    assert_eq!(members["leader"], members["members"][0]["node"]);
    let listed: Vec<&str> = (members["members"].as_array().unwrap().iter())
        .map(|m| m["node"].as_str().unwrap())
        .collect();
    assert_eq!(listed.len(), 2);
    for node in &nodes {
        assert!(listed.contains(&node.address().to_string().as_str()));
    }
    for m in members["members"].as_array().unwrap() {
        assert_eq!(m["status"], "Up");
        assert_eq!(m["reachable"], true);
    }
    assert_eq!(members["unreachable"], serde_json::json!([]));

    let (status, body) = call(&http, &endpoint, "GET", "/no/such/thing").await;
    assert_eq!(
        (status, body["error"].as_str()),
        (404, Some("no such resource"))
    );
    let (status, body) = call(&http, &endpoint, "POST", "/ready").await;
    assert_eq!(
        (status, body["error"].as_str()),
        (405, Some("method not allowed"))
    );

    // A node that has stopped is neither alive nor ready, and the endpoint says so.
    nodes[1].abort().await;
    assert_eq!(call(&http, &endpoint, "GET", "/alive").await.0, 503);
    let (status, body) = call(&http, &endpoint, "GET", "/ready").await;
    assert_eq!(status, 503, "{body}");
    nodes[0].abort().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_cannot_join_is_not_ready_over_http() {
    logs();
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let seeds = vec![silent.local_addr().unwrap().to_string()];
    let node = builder(&seeds).start().await.unwrap();
    let endpoint = Endpoint::start(node.clone(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let (status, body) = call(&client(), &endpoint, "GET", "/ready").await;
    assert_eq!(status, 503);
    assert_eq!(body["ready"], false);
    assert!(body["waitingFor"].is_string(), "{body}");
    node.abort().await;
}
