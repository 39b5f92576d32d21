//! The management endpoint, asked by a real HTTP client (hyper's) on loopback: readiness and
//! liveness with their status codes, the cluster's members as a member sees them, shards and
//! entities, member operations behind a token, and clear errors for what it does not serve.

mod common;

use std::time::Duration;

use common::{Op, builder, cluster, counter, eventually, logs};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use shoal::management::{Endpoint, ManagementSettings};

type Http = Client<hyper_util::client::legacy::connect::HttpConnector, Full<bytes::Bytes>>;

fn client() -> Http {
    Client::builder(TokioExecutor::new()).build_http()
}

/// An endpoint for `node` on a free loopback port, with member operations behind `token`.
async fn endpoint(node: &shoal::Node, token: Option<&str>) -> Endpoint {
    let mut settings = ManagementSettings::new("127.0.0.1:0".parse().unwrap());
    settings.token = token.map(String::from);
    Endpoint::start(node.clone(), settings).await.unwrap()
}

/// `method path` on `endpoint`: the status and the JSON body.
async fn call(http: &Http, endpoint: &Endpoint, method: &str, path: &str) -> (u16, Value) {
    send(http, endpoint, (method, path), None, "").await
}

/// `method path` with a bearer `token` and a `body`.
async fn send(
    http: &Http,
    endpoint: &Endpoint,
    (method, path): (&str, &str),
    token: Option<&str>,
    body: &str,
) -> (u16, Value) {
    let uri = format!("http://{}{path}", endpoint.address());
    let mut request = hyper::Request::builder().method(method).uri(uri);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let request = request
        .body(Full::new(bytes::Bytes::from(body.to_string())))
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
    let endpoint = endpoint(&nodes[1], None).await;
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
    let endpoint = endpoint(&node, None).await;
    let (status, body) = call(&client(), &endpoint, "GET", "/ready").await;
    assert_eq!(status, 503);
    assert_eq!(body["ready"], false);
    assert!(body["waitingFor"].is_string(), "{body}");
    node.abort().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_and_entities_are_answered_for_the_whole_cluster() {
    logs();
    let nodes = cluster(2).await;
    // A member that never routed to an entity's shard finds its region in the coordinator's
    // statistics; whether the entity runs there it does not know.
    // (A proxy: it hosts nothing, so its joining moves no shard.)
    let quiet = shoal::NodeBuilder::new("test")
        .secret("test secret")
        .seed_nodes([nodes[0].address().to_string()])
        .membership(common::fast_membership())
        .settings(common::fast_settings())
        .proxy::<common::Counter>(shoal::EntityTypeConfig::new("counter"))
        .start()
        .await
        .unwrap();
    let quiet_endpoint = endpoint(&quiet, None).await;
    let http = client();
    eventually(Duration::from_secs(10), Duration::from_millis(100), || {
        let (http, quiet_endpoint) = (&http, &quiet_endpoint);
        async move {
            let (status, body) = call(http, quiet_endpoint, "GET", "/ready").await;
            (status == 200)
                .then_some(())
                .ok_or_else(|| format!("{status} {body}"))
        }
    })
    .await;
    for i in 0..40 {
        let id = format!("c{i}");
        assert_eq!(counter(&nodes[0], &id).ask(&Op::Add(1), ASK).await, Ok(1));
    }
    let endpoint = endpoint(&nodes[1], None).await;
    let (status, body) = call(&http, &endpoint, "GET", "/cluster/shards/counter").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["entityType"], "counter");
    assert_eq!(body["entities"], 40, "{body}");
    let regions = body["regions"].as_array().unwrap();
    assert_eq!(regions.len(), 2, "both regions answered: {body}");
    let per_shard: u64 = (regions.iter())
        .flat_map(|r| r["shards"].as_array().unwrap())
        .map(|s| s["numberOfEntities"].as_u64().unwrap())
        .sum();
    assert_eq!(per_shard, 40);
    let mut addresses: Vec<&str> = regions
        .iter()
        .map(|r| r["address"].as_str().unwrap())
        .collect();
    addresses.sort_unstable();
    let mut expected: Vec<String> = nodes.iter().map(|n| n.address().to_string()).collect();
    expected.sort_unstable();
    assert_eq!(addresses, expected, "each region with its member's address");

    let regions = nodes[0].region::<common::Counter>("counter").unwrap();
    let location = regions.location("c7").await.unwrap();
    let (status, body) = call(
        &http,
        &endpoint,
        "GET",
        "/cluster/shards/counter/entities/c7",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["alive"], true);
    assert_eq!(body["shard"], location.shard.0, "{body}");
    let hosting = location.region.unwrap().to_string();
    assert_eq!(body["region"], hosting, "{body}");
    // Why: the coordinator's allocation of c7's shard, to the region hosting it.
    let decisions = body["why"]["decisions"].as_array().expect("decisions");
    let allocated = format!("allocated shard {} to {hosting}", location.shard.0);
    assert!(
        decisions
            .iter()
            .any(|d| d.as_str().unwrap().contains(&allocated)),
        "{body}"
    );

    // It registered before the shards were allocated, and never routed to them: it finds
    // c7's region in the coordinator's statistics, and does not know whether c7 runs.
    eventually(Duration::from_secs(10), Duration::from_millis(100), || {
        let (http, quiet_endpoint, hosting) = (&http, &quiet_endpoint, &hosting);
        async move {
            let path = "/cluster/shards/counter/entities/c7";
            let (status, body) = call(http, quiet_endpoint, "GET", path).await;
            let found = status == 200 && body["region"] == *hosting && body["alive"].is_null();
            found
                .then_some(())
                .ok_or_else(|| format!("{status} {body}"))
        }
    })
    .await;
    let path = "/cluster/shards/counter/entities/nobody-here";
    let (status, body) = call(&http, &quiet_endpoint, "GET", path).await;
    assert_eq!(status, 200, "{body}");
    if body["region"].is_null() {
        assert_eq!(body["alive"], false, "no region hosts its shard: {body}");
    }
    quiet.abort().await;

    let (status, body) = call(&http, &endpoint, "GET", "/cluster/shards/nosuchtype").await;
    assert_eq!(status, 404, "{body}");
    assert!(body["error"].as_str().unwrap().contains("nosuchtype"));
    for node in &nodes {
        node.abort().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn member_operations_need_the_token_and_make_a_member_leave() {
    logs();
    let nodes = cluster(2).await;
    let http = client();
    let leave = r#"{"operation": "Leave"}"#;
    let second = nodes[1].address().to_string();
    let path = format!("/cluster/members/{second}");
    let open = endpoint(&nodes[0], None).await;
    let (status, _) = send(&http, &open, ("PUT", &path), Some("x"), leave).await;
    assert_eq!(status, 403, "off without a token");

    let guarded = endpoint(&nodes[0], Some("s3cret")).await;
    let put = ("PUT", path.as_str());
    assert_eq!(send(&http, &guarded, put, None, leave).await.0, 401);
    assert_eq!(
        send(&http, &guarded, put, Some("wrong"), leave).await.0,
        401
    );
    let (status, body) = send(&http, &guarded, put, Some("s3cret"), "{}").await;
    assert_eq!(status, 400, "{body}");
    let dance = r#"{"operation": "Dance"}"#;
    assert_eq!(
        send(&http, &guarded, put, Some("s3cret"), dance).await.0,
        400
    );
    let nobody = ("PUT", "/cluster/members/127.0.0.1:1");
    assert_eq!(
        send(&http, &guarded, nobody, Some("s3cret"), leave).await.0,
        404
    );

    let (status, body) = send(&http, &guarded, put, Some("s3cret"), leave).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["member"], nodes[1].member().to_string());
    eventually(
        Duration::from_secs(20),
        Duration::from_millis(50),
        || async {
            let (_, members) = call(&http, &guarded, "GET", "/cluster/members").await;
            match members["members"].as_array().map(Vec::len) {
                Some(1) => Ok(()),
                _ => Err(format!("the member has not left: {members}")),
            }
        },
    )
    .await;
    nodes[0].abort().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_without_a_recorder_are_a_clear_404() {
    let node = builder(&[]).start().await.unwrap();
    let endpoint = endpoint(&node, None).await;
    let (status, body) = call(&client(), &endpoint, "GET", "/metrics").await;
    assert_eq!(status, 404);
    assert!(body["error"].as_str().unwrap().contains("metrics are off"));
    node.abort().await;
}

const ASK: Duration = Duration::from_secs(5);
