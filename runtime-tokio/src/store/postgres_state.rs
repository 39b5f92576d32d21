//! The PostgreSQL store as a [`StateStore`]: a recovery and a group of writes are one
//! transaction each. The group locks the claim rows of its shards first, in order, so that
//! two nodes' groups never deadlock, and every check and write of the group runs under them.

use std::collections::BTreeSet;

use futures_util::future::BoxFuture;
use shoal_core::{EntityId, EntityType, FencingClaim};
use tokio_postgres::Transaction;

use super::StoreError;
use super::postgres::{PostgresStore, Prepared, claim_verdict, set_claim};
use super::sql::unavailable;
use super::state_sql::{
    DELETE_TYPE, delivered_values, epoch_i64, newest, record_delivered, rows_of, stored, value_i64,
};
use super::{Recovered, StateKey, StateStore, StateWrite, Versioned};

impl StateStore for PostgresStore {
    fn recover<'a>(&'a self, key: &'a StateKey) -> BoxFuture<'a, Result<Recovered, StoreError>> {
        Box::pin(async move {
            let mut guard = self.client().await?;
            let connected = guard.as_mut().expect("connected above");
            let tx = connected.client.transaction().await.map_err(unavailable)?;
            let prepared = &connected.prepared;
            let (entity_type, shard) = (key.entity_type.as_str(), i64::from(key.shard.0));
            let changed = claim_verdict((&tx, prepared), entity_type, shard, key.claim()).await?;
            set_claim((&tx, prepared), entity_type, shard, changed).await?;
            let recovered = read((&tx, prepared), key).await?;
            tx.commit().await.map_err(unavailable)?;
            Ok(recovered)
        })
    }

    fn events<'a>(
        &'a self,
        entity_type: &'a EntityType,
        entity: &'a EntityId,
    ) -> BoxFuture<'a, Result<Vec<(u64, Versioned)>, StoreError>> {
        Box::pin(async move {
            let mut guard = self.client().await?;
            let connected = guard.as_mut().expect("connected above");
            let (entity_type, entity) = (entity_type.as_str(), entity.as_str());
            let rows = (connected.client)
                .query(
                    &connected.prepared.events_after,
                    &[&entity_type, &entity, &0i64],
                )
                .await
                .map_err(unavailable)?;
            rows.iter()
                .map(|row| stored(row.get(0), row.get(1), row.get(2)))
                .collect()
        })
    }

    fn write<'a>(
        &'a self,
        writes: &'a [(StateKey, StateWrite)],
    ) -> BoxFuture<'a, Result<Vec<Result<(), StoreError>>, StoreError>> {
        Box::pin(async move {
            let mut guard = self.client().await?;
            let connected = guard.as_mut().expect("connected above");
            let tx = connected.client.transaction().await.map_err(unavailable)?;
            let prepared = &connected.prepared;
            let shards: BTreeSet<(&str, i64)> = writes
                .iter()
                .map(|(key, _)| (key.entity_type.as_str(), i64::from(key.shard.0)))
                .collect();
            for (entity_type, shard) in shards {
                // Locks the row; the verdict for epoch 0 is of no interest (and writes
                // nothing), only a failure to lock is.
                let lock = claim_verdict(
                    (&tx, prepared),
                    entity_type,
                    shard,
                    FencingClaim::unleased(shoal_core::Epoch(0), 0),
                )
                .await;
                if let Err(StoreError::Unavailable(reason)) = lock {
                    return Err(StoreError::Unavailable(reason));
                }
            }
            let mut outcomes = Vec::with_capacity(writes.len());
            for (key, write) in writes {
                match write_one((&tx, prepared), key, write).await {
                    Err(StoreError::Unavailable(reason)) => {
                        return Err(StoreError::Unavailable(reason));
                    }
                    outcome => outcomes.push(outcome),
                }
            }
            tx.commit().await.map_err(unavailable)?;
            Ok(outcomes)
        })
    }

    fn delete_type<'a>(
        &'a self,
        entity_type: &'a EntityType,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(async move {
            let entity_type = entity_type.as_str();
            let mut guard = self.client().await?;
            let connected = guard.as_mut().expect("connected above");
            let tx = connected.client.transaction().await.map_err(unavailable)?;
            let mut deleted = 0;
            for statement in DELETE_TYPE {
                deleted += tx
                    .execute(statement, &[&entity_type])
                    .await
                    .map_err(unavailable)?;
            }
            tx.commit().await.map_err(unavailable)?;
            Ok(deleted)
        })
    }
}

/// One write inside the group's transaction: refused (fenced, or out of sequence) without
/// changing anything, or made.
async fn write_one(
    (tx, prepared): (&Transaction<'_>, &Prepared),
    key: &StateKey,
    write: &StateWrite,
) -> Result<(), StoreError> {
    let (entity_type, entity) = (key.entity_type.as_str(), key.entity.as_str());
    let shard = i64::from(key.shard.0);
    let changed = claim_verdict((tx, prepared), entity_type, shard, key.claim()).await?;
    let rows = rows_of(write, newest_of((tx, prepared), entity_type, entity).await?)?;
    set_claim((tx, prepared), entity_type, shard, changed).await?;
    let epoch = epoch_i64(key.epoch)?;
    for row in rows {
        let statement = if row.snapshot {
            &prepared.set_snapshot
        } else {
            &prepared.append
        };
        let values: [&(dyn tokio_postgres::types::ToSql + Sync); 6] = [
            &entity_type,
            &entity,
            &row.seq,
            &row.version,
            &row.payload,
            &epoch,
        ];
        tx.execute(statement, &values).await.map_err(unavailable)?;
    }
    if let Some((producer, session, seq)) = delivered_values(write)? {
        let values: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
            [&entity_type, &entity, &producer, &session, &seq];
        (tx.execute(&prepared.set_delivered, &values).await).map_err(unavailable)?;
    }
    Ok(())
}

/// The entity's newest sequence number (or revision).
async fn newest_of(
    (tx, prepared): (&Transaction<'_>, &Prepared),
    entity_type: &str,
    entity: &str,
) -> Result<u64, StoreError> {
    let last_event: i64 = tx
        .query_one(&prepared.last_event, &[&entity_type, &entity])
        .await
        .map_err(unavailable)?
        .get(0);
    let snapshot: Option<i64> = tx
        .query_opt(&prepared.snapshot_of, &[&entity_type, &entity])
        .await
        .map_err(unavailable)?
        .map(|row| row.get(0));
    newest(last_event, snapshot)
}

/// The entity's snapshot and the events after it.
async fn read(
    (tx, prepared): (&Transaction<'_>, &Prepared),
    key: &StateKey,
) -> Result<Recovered, StoreError> {
    let (entity_type, entity) = (key.entity_type.as_str(), key.entity.as_str());
    let snapshot = tx
        .query_opt(&prepared.snapshot_of, &[&entity_type, &entity])
        .await
        .map_err(unavailable)?
        .map(|row| stored(row.get(0), row.get(1), row.get(2)))
        .transpose()?;
    let after = value_i64(snapshot.as_ref().map_or(0, |(seq, _)| *seq), "seq")?;
    let rows = tx
        .query(&prepared.events_after, &[&entity_type, &entity, &after])
        .await
        .map_err(unavailable)?;
    let events = rows
        .iter()
        .map(|row| stored(row.get(0), row.get(1), row.get(2)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut delivered = shoal_core::delivery::HighWater::default();
    let marks = tx
        .query(&prepared.delivered_of, &[&entity_type, &entity])
        .await
        .map_err(unavailable)?;
    for row in &marks {
        record_delivered(&mut delivered, (row.get(0), row.get(1), row.get(2)))?;
    }
    Ok(Recovered {
        snapshot,
        events,
        delivered,
    })
}
