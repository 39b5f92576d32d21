//! The endpoint's JSON documents.

use serde_json::{Value, json};
use shoal_core::{Member, MemberId, MembershipView, Readiness};

/// `/ready`'s document.
pub(super) fn readiness(readiness: &Readiness) -> Value {
    let types: Vec<Value> = readiness
        .types
        .iter()
        .map(|t| {
            json!({
                "entityType": t.entity_type.as_str(),
                "coordinator": t.coordinator.map(|c| c.to_string()),
                "registered": t.registered,
                "allocating": t.allocating,
            })
        })
        .collect();
    json!({
        "ready": readiness.is_ready(),
        "waitingFor": readiness.waiting_for(),
        "member": readiness.member.to_string(),
        "status": readiness.status.map(|s| format!("{s:?}")),
        "leaving": readiness.leaving,
        "entityTypes": types,
    })
}

/// `/cluster/members`' document, in the shape of Akka Management's `/cluster/members`.
pub(super) fn members(me: MemberId, view: &MembershipView) -> Value {
    let node = |id: MemberId| view.member(id).map_or_else(|| id.to_string(), name);
    let members: Vec<Value> = view.members().iter().map(member).collect();
    let unreachable: Vec<Value> = (view.members().iter())
        .filter(|m| !m.reachable)
        .map(|m| json!({ "node": name(m), "observedBy": [node(me)] }))
        .collect();
    json!({
        "selfNode": node(me),
        "leader": view.leader(me).map(node),
        "oldest": view.oldest_up(None).map(node),
        "members": members,
        "unreachable": unreachable,
    })
}

/// A member's name: its address where known, else its id.
fn name(m: &Member) -> String {
    m.address
        .as_ref()
        .map_or_else(|| m.id.to_string(), ToString::to_string)
}

fn member(m: &Member) -> Value {
    json!({
        "node": name(m),
        "member": m.id.to_string(),
        "nodeUid": m.id.incarnation.0.to_string(),
        "status": format!("{:?}", m.status),
        "roles": m.roles.iter().collect::<Vec<_>>(),
        "appVersion": m.app_version.to_string(),
        "reachable": m.reachable,
        "upNumber": m.up_number,
    })
}
