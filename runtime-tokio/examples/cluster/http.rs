//! The harness's HTTP client for the nodes' management endpoints (hyper's client, as the
//! endpoint's own tests use).

use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

/// A client for the endpoints, shared by the harness's tasks.
#[derive(Clone)]
pub(crate) struct Http(Client<HttpConnector, Empty<bytes::Bytes>>);

impl Http {
    pub(crate) fn new() -> Self {
        Self(Client::builder(TokioExecutor::new()).build_http())
    }

    /// `GET base + path` within `limit`: the status and the JSON document answered.
    pub(crate) async fn get(
        &self,
        base: &str,
        path: &str,
        limit: Duration,
    ) -> Result<(u16, Value), String> {
        let url = format!("{}{}", base.trim_end_matches('/'), path);
        let uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
        let call = async {
            let response = self.0.get(uri).await.map_err(|e| format!("{url}: {e}"))?;
            let status = response.status().as_u16();
            let body = response.into_body().collect().await;
            let body = body.map_err(|e| format!("{url}: {e}"))?.to_bytes();
            let json = serde_json::from_slice(&body).map_err(|e| format!("{url}: {e}"))?;
            Ok((status, json))
        };
        tokio::time::timeout(limit, call)
            .await
            .map_err(|_| format!("{url}: no answer within {limit:?}"))?
    }

    /// Whether the node behind `base` says it is ready (`/ready` answers 200); `None` if it
    /// does not answer.
    pub(crate) async fn ready(&self, base: &str) -> Option<bool> {
        let answer = self.get(base, "/ready", Duration::from_millis(500)).await;
        answer.ok().map(|(status, _)| status == 200)
    }
}
