//! The management endpoint (cargo feature `management`): a node's readiness, liveness and
//! membership over HTTP, for load balancers, orchestrators and operators, in the shape of Akka
//! Management's where it fits.
//!
//! - `GET /`: a self-contained HTML page of the cluster as this member sees it, reloading
//!   itself: readiness, members, shards and entities per member and type, dead letters by
//!   reason, recent events.
//! - `GET /alive`: 200 while the node's host loop answers, 503 otherwise.
//! - `GET /ready`: 200 when the member is ready for traffic ([`crate::Node::readiness`]), 503
//!   with what it waits for otherwise.
//! - `GET /cluster/members`: this member, the leader, the oldest, and every member with its
//!   status, roles, app version and reachability.
//! - `GET /cluster/shards/{type}`: the type's regions, their shards and entity counts, as the
//!   coordinator gathers them (regions that did not answer in time are listed apart).
//! - `GET /cluster/shards/{type}/entities/{id}`: the entity's shard, the region hosting it,
//!   and whether it runs there (`null` when this member knows the shard's region only from
//!   the coordinator's statistics, not having routed to it).
//! - `GET /metrics`: every metric of the process in Prometheus' text format, when the
//!   endpoint was given the handle of a Prometheus recorder ([`install_prometheus`]); the
//!   names and labels are listed in `docs/metrics.md`.
//! - `PUT /cluster/members/{member}` with `{"operation": "Leave"}` or `{"operation": "Down"}`
//!   (the member by address or by id): off unless a token is configured, and then only with
//!   `Authorization: Bearer <token>`.
//!
//! Every answer is JSON. Unknown paths get a 404 and other methods a 405, each with a JSON
//! error; an unknown entity type or member a 404, a query the cluster could not answer in
//! time a 504, a node that has stopped a 503. Nothing a request carries can stop the node: at
//! worst it is a command the core refuses.

mod json;
mod metrics;
mod operations;
mod page;
mod recent;
mod shards;

pub use metrics::install_prometheus;
pub use metrics_exporter_prometheus::PrometheusHandle;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, put};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::error::QueryError;
use crate::node::Node;

/// How long `/alive` waits for the host loop to answer.
const ALIVE_WITHIN: Duration = Duration::from_secs(2);

/// Where the endpoint listens, and what it allows.
#[derive(Clone, Debug)]
pub struct ManagementSettings {
    /// The address to bind (port 0 picks a free one).
    pub bind: SocketAddr,
    /// The bearer token member operations (leave, down) require; `None` turns them off.
    pub token: Option<String>,
    /// The Prometheus recorder `/metrics` renders; `None` answers it with a 404.
    pub metrics: Option<PrometheusHandle>,
}

impl ManagementSettings {
    /// Listening on `bind`, member operations off, no metrics.
    pub fn new(bind: SocketAddr) -> Self {
        Self {
            bind,
            token: None,
            metrics: None,
        }
    }
}

/// What the handlers share.
struct Served {
    node: Node,
    token: Option<String>,
    metrics: Option<PrometheusHandle>,
    /// The node's recent events, for the page.
    recent: recent::Log,
}

type Shared = State<Arc<Served>>;

/// A running management endpoint; it stops when dropped.
#[derive(Debug)]
pub struct Endpoint {
    address: SocketAddr,
    task: JoinHandle<()>,
    /// Follows the node's events for the page.
    follower: JoinHandle<()>,
}

impl Endpoint {
    /// Serves `node`'s management endpoint as `settings` say.
    ///
    /// # Errors
    /// The address cannot be bound.
    pub async fn start(node: Node, settings: ManagementSettings) -> std::io::Result<Self> {
        let listener = TcpListener::bind(settings.bind).await?;
        let address = listener.local_addr()?;
        let token = settings.token.filter(|t| !t.is_empty());
        let metrics = settings.metrics;
        let (recent, follower) = recent::follow(&node);
        let app = router(Arc::new(Served {
            node,
            token,
            metrics,
            recent,
        }));
        let task = tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, app).await {
                tracing::warn!(%error, "the management endpoint stopped");
            }
        });
        tracing::info!(%address, "management endpoint listening");
        Ok(Self {
            address,
            task,
            follower,
        })
    }

    /// Where it listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.task.abort();
        self.follower.abort();
    }
}

fn router(served: Arc<Served>) -> Router {
    Router::new()
        .route("/", get(page::page))
        .route("/alive", get(alive))
        .route("/ready", get(ready))
        .route("/cluster/members", get(members))
        .route("/metrics", get(metrics::render))
        .route("/cluster/members/{member}", put(operations::operate))
        .route("/cluster/shards/{entity_type}", get(shards::shards))
        .route(
            "/cluster/shards/{entity_type}/entities/{entity}",
            get(shards::entity),
        )
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(served)
}

async fn alive(State(served): Shared) -> Response {
    let alive = served.node.is_alive(ALIVE_WITHIN).await;
    let status = if alive {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(json!({ "alive": alive }))).into_response()
}

async fn ready(State(served): Shared) -> Response {
    match served.node.readiness().await {
        Ok(readiness) => {
            let status = if readiness.is_ready() {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            (status, Json(json::readiness(&readiness))).into_response()
        }
        Err(error) => failed(&error),
    }
}

async fn members(State(served): Shared) -> Response {
    let node = &served.node;
    match node.view().await {
        Ok(view) => Json(json::members(node.member(), &view)).into_response(),
        Err(error) => failed(&error),
    }
}

/// A JSON error with `status`.
fn error(status: StatusCode, message: impl std::fmt::Display) -> Response {
    let body = json!({ "error": message.to_string() });
    (status, Json(body)).into_response()
}

/// A query that failed: the status says whose fault it is.
fn failed(query: &QueryError) -> Response {
    use shoal_core::CommandError as E;
    let status = match query {
        QueryError::Command(E::UnknownEntityType(_) | E::UnknownMember(_)) => StatusCode::NOT_FOUND,
        QueryError::Command(E::QueryTimedOut { .. }) | QueryError::Timeout => {
            StatusCode::GATEWAY_TIMEOUT
        }
        QueryError::Command(E::MembershipIsExternal) => StatusCode::CONFLICT,
        QueryError::Command(_) | QueryError::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
        QueryError::Unexpected => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error(status, query)
}

async fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "no such resource")
}

async fn method_not_allowed() -> Response {
    error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
}
