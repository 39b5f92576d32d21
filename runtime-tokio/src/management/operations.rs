//! `PUT /cluster/members/{member}`: make a member leave, or mark it Down. Off unless the
//! endpoint has a token; then only a request bearing it may operate.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use serde::Deserialize;
use serde_json::json;
use shoal_core::{MemberId, MembershipView};

use super::{Shared, error, failed};

/// What to do to the member.
#[derive(Debug, Deserialize)]
pub(super) struct Operation {
    operation: String,
}

pub(super) async fn operate(
    State(served): Shared,
    Path(member): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let Some(token) = &served.token else {
        let off = "member operations are off: the endpoint has no token";
        return error(StatusCode::FORBIDDEN, off);
    };
    let bearer = (headers.get(header::AUTHORIZATION))
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if !bearer.is_some_and(|b| constant_time_eq(b.as_bytes(), token.as_bytes())) {
        return error(StatusCode::UNAUTHORIZED, "a valid bearer token is required");
    }
    let operation = match serde_json::from_slice::<Operation>(&body) {
        Ok(operation) => operation.operation,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("expected {{\"operation\": \"Leave\" | \"Down\"}}: {e}"),
            );
        }
    };
    let node = &served.node;
    let view = match node.view().await {
        Ok(view) => view,
        Err(e) => return failed(&e),
    };
    let Some(target) = find(&view, &member) else {
        return error(StatusCode::NOT_FOUND, format!("{member} is not a member"));
    };
    let done = match operation.as_str() {
        "Leave" => node.leave_member(target).await,
        "Down" => node.down(target).await,
        other => {
            let message = format!("unknown operation {other:?}: Leave or Down");
            return error(StatusCode::BAD_REQUEST, message);
        }
    };
    match done {
        Ok(()) => {
            Json(json!({ "member": target.to_string(), "operation": operation })).into_response()
        }
        Err(e) => failed(&e),
    }
}

/// The member named by `name`: its id (`n2#1`), or its address (the newest incarnation there).
fn find(view: &MembershipView, name: &str) -> Option<MemberId> {
    let members = view.members();
    let by_id = members.iter().find(|m| m.id.to_string() == name);
    let by_address = || {
        (members.iter())
            .filter(|m| m.address.as_ref().is_some_and(|a| a.to_string() == name))
            .max_by_key(|m| m.id.incarnation)
    };
    by_id.or_else(by_address).map(|m| m.id)
}

/// Compares without leaking where the first difference is.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
