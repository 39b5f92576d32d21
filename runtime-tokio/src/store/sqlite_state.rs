//! The SQLite store as a [`StateStore`]: a recovery and a group of writes are one immediate
//! transaction each, so the fence and sequence checks and the writes they allow are atomic.

use futures_util::future::BoxFuture;
use rusqlite::{OptionalExtension, Transaction, TransactionBehavior, params};
use shoal_core::{EntityId, EntityType};

use super::StoreError;
use super::sql::unavailable;
use super::sqlite::{SqliteStore, claim_verdict, set_claim, sql};
use super::state_sql::{
    APPEND, DELETE_TYPE, DELIVERED_OF, EVENTS_AFTER, LAST_EVENT, SET_DELIVERED, SET_SNAPSHOT,
    SNAPSHOT_OF, delivered_values, epoch_i64, newest, record_delivered, rows_of, stored,
};
use super::{Recovered, StateKey, StateStore, StateWrite, Versioned};

impl StateStore for SqliteStore {
    fn recover<'a>(&'a self, key: &'a StateKey) -> BoxFuture<'a, Result<Recovered, StoreError>> {
        let key = key.clone();
        self.with(move |connection| {
            let tx = connection
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(unavailable)?;
            let (entity_type, shard) = (key.entity_type.as_str(), i64::from(key.shard.0));
            let changed = claim_verdict(&tx, entity_type, shard, key.claim())?;
            set_claim(&tx, entity_type, shard, changed)?;
            let recovered = read(&tx, &key)?;
            tx.commit().map_err(unavailable)?;
            Ok(recovered)
        })
    }

    fn events<'a>(
        &'a self,
        entity_type: &'a EntityType,
        entity: &'a EntityId,
    ) -> BoxFuture<'a, Result<Vec<(u64, Versioned)>, StoreError>> {
        let (entity_type, entity) = (entity_type.as_str().to_owned(), entity.as_str().to_owned());
        self.with(move |connection| {
            let tx = connection.transaction().map_err(unavailable)?;
            events_after(&tx, (&entity_type, &entity), 0)
        })
    }

    fn write<'a>(
        &'a self,
        writes: &'a [(StateKey, StateWrite)],
    ) -> BoxFuture<'a, Result<Vec<Result<(), StoreError>>, StoreError>> {
        let writes = writes.to_vec();
        self.with(move |connection| {
            let tx = connection
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(unavailable)?;
            let mut outcomes = Vec::with_capacity(writes.len());
            for (key, write) in &writes {
                match write_one(&tx, key, write) {
                    Err(StoreError::Unavailable(reason)) => {
                        return Err(StoreError::Unavailable(reason));
                    }
                    outcome => outcomes.push(outcome),
                }
            }
            tx.commit().map_err(unavailable)?;
            Ok(outcomes)
        })
    }

    fn delete_type<'a>(
        &'a self,
        entity_type: &'a EntityType,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        let entity_type = entity_type.as_str().to_string();
        self.with(move |connection| {
            let tx = connection
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(unavailable)?;
            let mut deleted = 0;
            for statement in DELETE_TYPE {
                let rows = tx
                    .execute(&sql(statement), params![entity_type])
                    .map_err(unavailable)?;
                deleted += rows as u64;
            }
            tx.commit().map_err(unavailable)?;
            Ok(deleted)
        })
    }
}

/// One write inside the group's transaction: refused (fenced, or out of sequence) without
/// changing anything, or made.
fn write_one(tx: &Transaction<'_>, key: &StateKey, write: &StateWrite) -> Result<(), StoreError> {
    let (entity_type, entity) = (key.entity_type.as_str(), key.entity.as_str());
    let shard = i64::from(key.shard.0);
    let changed = claim_verdict(tx, entity_type, shard, key.claim())?;
    let rows = rows_of(write, newest_of(tx, entity_type, entity)?)?;
    set_claim(tx, entity_type, shard, changed)?;
    let epoch = epoch_i64(key.epoch)?;
    for row in rows {
        let statement = if row.snapshot { SET_SNAPSHOT } else { APPEND };
        let values = params![
            entity_type,
            entity,
            row.seq,
            row.version,
            row.payload,
            epoch
        ];
        tx.prepare_cached(&sql(statement))
            .map_err(unavailable)?
            .execute(values)
            .map_err(unavailable)?;
    }
    if let Some((producer, session, seq)) = delivered_values(write)? {
        tx.prepare_cached(&sql(SET_DELIVERED))
            .map_err(unavailable)?
            .execute(params![entity_type, entity, producer, session, seq])
            .map_err(unavailable)?;
    }
    Ok(())
}

/// The entity's newest sequence number (or revision).
fn newest_of(tx: &Transaction<'_>, entity_type: &str, entity: &str) -> Result<u64, StoreError> {
    let last_event: i64 = tx
        .prepare_cached(&sql(LAST_EVENT))
        .map_err(unavailable)?
        .query_row(params![entity_type, entity], |row| row.get(0))
        .map_err(unavailable)?;
    let snapshot: Option<i64> = tx
        .prepare_cached(&sql(SNAPSHOT_OF))
        .map_err(unavailable)?
        .query_row(params![entity_type, entity], |row| row.get(0))
        .optional()
        .map_err(unavailable)?;
    newest(last_event, snapshot)
}

/// The entity's snapshot and the events after it.
fn read(tx: &Transaction<'_>, key: &StateKey) -> Result<Recovered, StoreError> {
    let (entity_type, entity) = (key.entity_type.as_str(), key.entity.as_str());
    let snapshot = tx
        .prepare_cached(&sql(SNAPSHOT_OF))
        .map_err(unavailable)?
        .query_row(params![entity_type, entity], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .optional()
        .map_err(unavailable)?
        .map(|(seq, version, payload)| stored(seq, version, payload))
        .transpose()?;
    let after = snapshot.as_ref().map_or(0, |(seq, _)| *seq);
    let events = events_after(tx, (entity_type, entity), after)?;
    let mut delivered = shoal_core::delivery::HighWater::default();
    let mut marks = tx.prepare_cached(&sql(DELIVERED_OF)).map_err(unavailable)?;
    let rows = marks
        .query_map(params![entity_type, entity], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .map_err(unavailable)?;
    for row in rows {
        record_delivered(&mut delivered, row.map_err(unavailable)?)?;
    }
    Ok(Recovered {
        snapshot,
        events,
        delivered,
    })
}

/// The entity's events after sequence number `after`, in order.
fn events_after(
    tx: &Transaction<'_>,
    (entity_type, entity): (&str, &str),
    after: u64,
) -> Result<Vec<(u64, Versioned)>, StoreError> {
    let mut query = tx.prepare_cached(&sql(EVENTS_AFTER)).map_err(unavailable)?;
    let after = super::state_sql::value_i64(after, "seq")?;
    let rows = query
        .query_map(params![entity_type, entity, after], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .map_err(unavailable)?;
    let mut events = Vec::new();
    for row in rows {
        let (seq, version, payload) = row.map_err(unavailable)?;
        events.push(stored(seq, version, payload)?);
    }
    Ok(events)
}
