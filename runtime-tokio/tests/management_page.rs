//! The management page, checked as served and in a real browser: headless Chromium renders
//! it from the endpoint on loopback, and its screenshot must show one green (Up) status row
//! per member of the cluster, before and after a member joins.
//!
//! Without Chromium the browser half is skipped with a message, unless `SHOAL_REQUIRE_BROWSER`
//! is set (`.ci/run` sets it after installing Chromium), which makes a missing browser a failure.

// The simulator's picture test drives the same browser the same way.
#[path = "../../sim/tests/browser/mod.rs"]
mod browser;
mod common;

use std::time::Duration;

use browser::{chromium, decode, screenshot};
use common::{Op, builder, cluster, counter, eventually, logs};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use shoal::management::{Endpoint, ManagementSettings};

const ASK: Duration = Duration::from_secs(5);

/// The page as served.
async fn page(endpoint: &Endpoint) -> String {
    let client: Client<_, Empty<bytes::Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let uri = format!("http://{}/", endpoint.address()).parse().unwrap();
    let response = client.get(uri).await.unwrap();
    assert_eq!(response.status(), 200);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(body.to_vec()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_the_cluster_and_a_browser_renders_a_row_per_member() {
    logs();
    let nodes = cluster(2).await;
    for i in 0..10 {
        let id = format!("p{i}");
        counter(&nodes[0], &id).ask(&Op::Add(1), ASK).await.unwrap();
    }
    let settings = ManagementSettings::new("127.0.0.1:0".parse().unwrap());
    let endpoint = Endpoint::start(nodes[0].clone(), settings).await.unwrap();
    let html = page(&endpoint).await;
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(
        !html.contains("src=") && !html.contains("href="),
        "self-contained"
    );
    assert!(html.contains("http-equiv=\"refresh\""), "it reloads itself");
    assert_eq!(html.matches("class=\"member\"").count(), 2);
    for node in &nodes {
        assert!(html.contains(&node.address().to_string()));
    }
    assert!(html.contains("ready for traffic"), "{html}");
    assert!(html.contains("Shards of counter"));
    assert_eq!(
        up_rows(&endpoint).await,
        Some(2),
        "two members, two green rows"
    );

    // A third member joins: the page follows.
    let seeds = vec![nodes[0].address().to_string()];
    let joiner = builder(&seeds).start().await.unwrap();
    eventually(
        Duration::from_secs(20),
        Duration::from_millis(100),
        || async {
            let html = page(&endpoint).await;
            match html.matches("class=\"status up\"").count() {
                3 => Ok(()),
                n => Err(format!("{n} members Up on the page")),
            }
        },
    )
    .await;
    let html = page(&endpoint).await;
    assert!(
        html.contains(&format!("{} is Up", joiner.member())),
        "a recent event: {html}"
    );
    assert_eq!(
        up_rows(&endpoint).await,
        Some(3),
        "three members, three green rows"
    );
    for node in nodes.iter().chain([&joiner]) {
        node.abort().await;
    }
}

/// How many green (Up) status cells a screenshot of the page shows, counted down a line
/// through the status column; `None` without a browser (allowed only when
/// `SHOAL_REQUIRE_BROWSER` is not set).
async fn up_rows(endpoint: &Endpoint) -> Option<usize> {
    let browser = chromium()?;
    let dir = std::env::temp_dir().join(format!("shoal-page-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let shot = dir.join("page.png");
    let url = format!("http://{}/", endpoint.address());
    let profile = dir.join("profile");
    let shot_path = shot.clone();
    tokio::task::spawn_blocking(move || screenshot(&browser, &url, &shot_path, &profile))
        .await
        .unwrap();
    let (width, height, pixels) = decode(&shot);
    let _ = std::fs::remove_dir_all(&dir);
    // The status cells span x = 16..126 (body margin, 90 px and padding); x = 118 is right of
    // the status's text, which would cut a cell's colour into short pieces.
    let green = |y: usize| {
        let p = &pixels[(y * width + 118.min(width - 1)) * 3..][..3];
        p[0].abs_diff(0xa9) < 8 && p[1].abs_diff(0xdf) < 8 && p[2].abs_diff(0xa0) < 8
    };
    let (mut rows, mut run) = (0, 0);
    for y in 0..height {
        if green(y) {
            run += 1;
        } else {
            rows += usize::from(run >= 10);
            run = 0;
        }
    }
    Some(rows + usize::from(run >= 10))
}
