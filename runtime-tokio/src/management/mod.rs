//! The management endpoint (cargo feature `management`): a node's readiness, liveness and
//! membership over HTTP, for load balancers, orchestrators and operators, in the shape of Akka
//! Management's where it fits.
//!
//! - `GET /alive`: 200 while the node's host loop answers, 503 otherwise.
//! - `GET /ready`: 200 when the member is ready for traffic ([`crate::Node::readiness`]), 503
//!   with what it waits for otherwise.
//! - `GET /cluster/members`: this member, the leader, the oldest, and every member with its
//!   status, roles, app version and reachability.
//!
//! Every answer is JSON. Unknown paths get a 404 and other methods a 405, each with a JSON
//! error; a node that has stopped answers 503. Nothing a request carries reaches the node's
//! core.

mod json;

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::node::Node;

/// How long `/alive` waits for the host loop to answer.
const ALIVE_WITHIN: Duration = Duration::from_secs(2);

/// A running management endpoint; it stops when dropped.
#[derive(Debug)]
pub struct Endpoint {
    address: SocketAddr,
    task: JoinHandle<()>,
}

impl Endpoint {
    /// Serves `node`'s management endpoint on `bind` (port 0 picks a free one).
    ///
    /// # Errors
    /// The address cannot be bound.
    pub async fn start(node: Node, bind: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind(bind).await?;
        let address = listener.local_addr()?;
        let app = router(node);
        let task = tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, app).await {
                tracing::warn!(%error, "the management endpoint stopped");
            }
        });
        tracing::info!(%address, "management endpoint listening");
        Ok(Self { address, task })
    }

    /// Where it listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn router(node: Node) -> Router {
    Router::new()
        .route("/alive", get(alive))
        .route("/ready", get(ready))
        .route("/cluster/members", get(members))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(node)
}

async fn alive(State(node): State<Node>) -> Response {
    let alive = node.is_alive(ALIVE_WITHIN).await;
    let status = if alive {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(json!({ "alive": alive }))).into_response()
}

async fn ready(State(node): State<Node>) -> Response {
    match node.readiness().await {
        Ok(readiness) => {
            let status = if readiness.is_ready() {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            (status, Json(json::readiness(&readiness))).into_response()
        }
        Err(error) => stopped(&error),
    }
}

async fn members(State(node): State<Node>) -> Response {
    match node.view().await {
        Ok(view) => Json(json::members(node.member(), &view)).into_response(),
        Err(error) => stopped(&error),
    }
}

fn stopped(error: &crate::error::QueryError) -> Response {
    let body = json!({ "error": error.to_string() });
    (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
}

async fn not_found() -> Response {
    let body = json!({ "error": "no such resource" });
    (StatusCode::NOT_FOUND, Json(body)).into_response()
}

async fn method_not_allowed() -> Response {
    let body = json!({ "error": "method not allowed" });
    (StatusCode::METHOD_NOT_ALLOWED, Json(body)).into_response()
}
