//! `/cluster/shards/{type}` and `/cluster/shards/{type}/entities/{id}`.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Json, Response};
use serde_json::{Value, json};
use shoal_core::{Command, EntityId, EntityType, MemberId, RegionStats, Reply};

use super::{Shared, failed};
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

/// Where an entity lives and whether it runs.
pub(super) async fn entity(
    State(served): Shared,
    Path((entity_type, entity)): Path<(String, String)>,
) -> Response {
    let command = Command::GetEntityLocation {
        entity_type: EntityType::new(entity_type.as_str()),
        entity: EntityId::new(entity.as_str()),
    };
    match served.node.command(command).await {
        Ok(Reply::EntityLocation {
            shard,
            region: Some(region),
            alive,
            ..
        }) => Json(json!({
            "entityType": entity_type,
            "entity": entity,
            "shard": shard.0,
            "region": region.to_string(),
            "alive": alive,
        }))
        .into_response(),
        Ok(Reply::EntityLocation {
            shard,
            region: None,
            ..
        }) => {
            // This member has not routed to the shard, so it knows no home for it: the
            // coordinator's statistics say which region hosts it, if any. Whether the entity
            // runs there is then not known.
            let stats = Command::GetClusterShardingStats {
                entity_type: EntityType::new(entity_type.as_str()),
            };
            let host = match served.node.command(stats).await {
                Ok(Reply::ClusterShardingStats { regions, .. }) => (regions.iter())
                    .find(|r| r.shards.iter().any(|(s, _)| *s == shard))
                    .map(|r| r.region.to_string()),
                Ok(_) => return failed(&QueryError::Unexpected),
                Err(error) => return failed(&error),
            };
            Json(json!({
                "entityType": entity_type,
                "entity": entity,
                "shard": shard.0,
                "region": host,
                "alive": if host.is_some() { Value::Null } else { Value::Bool(false) },
            }))
            .into_response()
        }
        Ok(_) => failed(&QueryError::Unexpected),
        Err(error) => failed(&error),
    }
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
