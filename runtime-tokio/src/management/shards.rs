//! `/cluster/shards/{type}` and `/cluster/shards/{type}/entities/{id}`.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Json, Response};
use serde_json::{Value, json};
use shoal_core::explain::Explanation;
use shoal_core::{Command, EntityId, EntityType, MemberId, RegionStats, Reply};

use super::{Served, Shared, failed};
use crate::error::QueryError;

/// The type's regions, their shards and entity counts.
pub(super) async fn shards(State(served): Shared, Path(entity_type): Path<String>) -> Response {
    let entity_type = EntityType::new(entity_type);
    let command = Command::GetClusterShardingStats {
        entity_type: entity_type.clone(),
    };
    match served.node.command(command).await {
        Ok(Reply::ClusterShardingStats { regions, failed }) => {
            // Addresses from this member's view, where it knows them (a view it cannot get
            // leaves them out rather than failing the answer).
            let view = served.node.view().await.ok();
            let address = |id: MemberId| {
                let member = view.as_ref().and_then(|v| v.member(id));
                member
                    .and_then(|m| m.address.as_ref())
                    .map(ToString::to_string)
            };
            let entities: u64 = regions.iter().map(region_entities).sum();
            let shards: usize = regions.iter().map(|r| r.shards.len()).sum();
            let regions: Vec<Value> = regions
                .iter()
                .map(|r| region(r, address(r.region)))
                .collect();
            Json(json!({
                "entityType": entity_type.as_str(),
                "shards": shards,
                "entities": entities,
                "regions": regions,
                "failed": failed.iter().map(ToString::to_string).collect::<Vec<_>>(),
            }))
            .into_response()
        }
        Ok(_) => failed(&QueryError::Unexpected),
        Err(error) => failed(&error),
    }
}

/// Where an entity lives, whether it runs, and why (the decisions behind it, see
/// `Command::Explain`).
pub(super) async fn entity(
    State(served): Shared,
    Path((entity_type, entity)): Path<(String, String)>,
) -> Response {
    let mut answer = match location(&served, &entity_type, &entity).await {
        Ok(answer) => answer,
        Err(failure) => return failure,
    };
    let command = Command::Explain {
        entity_type: EntityType::new(entity_type.as_str()),
        entity: EntityId::new(entity.as_str()),
    };
    answer["why"] = match served.node.command(command).await {
        Ok(Reply::Explanation(explanation)) => why(&explanation),
        // The location stands without it (a coordinator that does not answer in time).
        Ok(_) => json!({ "error": QueryError::Unexpected.to_string() }),
        Err(error) => json!({ "error": error.to_string() }),
    };
    Json(answer).into_response()
}

/// An explanation as JSON: each decision in words, oldest first, and how far back the logs
/// reach where they are full.
fn why(explanation: &Explanation) -> Value {
    let forgotten: Vec<Value> = (explanation.forgotten_before.iter())
        .map(|(by, age)| json!({ "member": by.to_string(), "olderThanSeconds": age.as_secs_f64() }))
        .collect();
    json!({
        "coordinator": explanation.coordinator.map(|c| c.to_string()),
        "decisions": explanation.records.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "forgotten": forgotten,
    })
}

/// Where an entity lives and whether it runs, as JSON; a failed query as its response.
async fn location(served: &Served, entity_type: &str, entity: &str) -> Result<Value, Response> {
    let command = Command::GetEntityLocation {
        entity_type: EntityType::new(entity_type),
        entity: EntityId::new(entity),
    };
    let (shard, region, alive) = match served.node.command(command).await {
        Ok(Reply::EntityLocation {
            shard,
            region,
            alive,
            ..
        }) => (shard, region, alive),
        Ok(_) => return Err(failed(&QueryError::Unexpected)),
        Err(error) => return Err(failed(&error)),
    };
    let (region, alive) = match region {
        Some(region) => (Some(region.to_string()), Value::Bool(alive)),
        None => {
            // This member has not routed to the shard, so it knows no home for it: the
            // coordinator's statistics say which region hosts it, if any. Whether the entity
            // runs there is then not known.
            let stats = Command::GetClusterShardingStats {
                entity_type: EntityType::new(entity_type),
            };
            let host = match served.node.command(stats).await {
                Ok(Reply::ClusterShardingStats { regions, .. }) => (regions.iter())
                    .find(|r| r.shards.iter().any(|(s, _)| *s == shard))
                    .map(|r| r.region.to_string()),
                Ok(_) => return Err(failed(&QueryError::Unexpected)),
                Err(error) => return Err(failed(&error)),
            };
            let alive = if host.is_some() {
                Value::Null
            } else {
                Value::Bool(false)
            };
            (host, alive)
        }
    };
    Ok(json!({
        "entityType": entity_type,
        "entity": entity,
        "shard": shard.0,
        "region": region,
        "alive": alive,
    }))
}

fn region_entities(region: &RegionStats) -> u64 {
    region.shards.iter().map(|(_, n)| u64::from(*n)).sum()
}

fn region(region: &RegionStats, address: Option<String>) -> Value {
    let shards: Vec<Value> = (region.shards.iter())
        .map(|(shard, n)| json!({ "shardId": shard.0, "numberOfEntities": n }))
        .collect();
    json!({
        "region": region.region.to_string(),
        "address": address,
        "entities": region_entities(region),
        "shards": shards,
    })
}
