//! The embedded store: one SQLite file in WAL mode (readers never wait for the writer), which
//! the processes of a node set on one machine can share. Calls run on tokio's blocking pool;
//! each write is one `BEGIN IMMEDIATE` transaction (it takes the file's write lock first, so
//! two writers never deadlock upgrading), waiting up to `BUSY_TIMEOUT` for another process.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use shoal_core::{EntityId, EntityType, Epoch, FencingClaim, ShardId};

use super::sql::{
    CLAIM_OF, COPY_ENTRY, ClaimRow, ENTRIES, FILED_UNDER, FORGET, KEEP_DORMANT, LOAD, REMEMBER,
    Refile, SET_CLAIM, SET_EPOCH, SET_FILED_UNDER, SHARDS, TOP_EPOCH, count_value, shard_epoch,
    unavailable, verdict,
};
use super::{RememberStore, SCHEMA, StoreError, Update};

/// How long a write waits for another process holding the file's lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A remember store and state store in one SQLite file.
#[derive(Clone)]
pub struct SqliteStore {
    connection: Arc<Mutex<Connection>>,
}

/// The stores' SQL with SQLite's numbered parameters (`?1` for `$1`).
pub(super) fn sql(statement: &str) -> String {
    statement.replace('$', "?")
}

impl SqliteStore {
    /// Opens (creating if needed) the store in the file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let mut connection = Connection::open(path).map_err(unavailable)?;
        connection.busy_timeout(BUSY_TIMEOUT).map_err(unavailable)?;
        // WAL lets the processes sharing the file read while one writes.
        let mode: String = connection
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .map_err(unavailable)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Unavailable(format!(
                "SQLite refused WAL mode (journal mode {mode})"
            )));
        }
        connection
            .execute_batch("PRAGMA synchronous = NORMAL;")
            .map_err(unavailable)?;
        connection.execute_batch(SCHEMA).map_err(unavailable)?;
        add_missing_columns(&mut connection)?;
        (connection.execute_batch(super::STATE_SCHEMA)).map_err(unavailable)?;
        (connection.execute_batch(super::QUEUE_SCHEMA)).map_err(unavailable)?;
        (connection.execute_batch(super::LEASE_SCHEMA)).map_err(unavailable)?;
        Ok(Self {
            connection: Arc::new(Mutex::new(connection)),
        })
    }

    /// Runs `work` on the connection on the blocking pool. A request whose caller gave up
    /// before it got the connection does nothing: run later, it could land after a newer
    /// request for the same shard (waiters on the lock are not served in order).
    pub(super) fn with<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> BoxFuture<'static, Result<T, StoreError>> {
        let connection = Arc::clone(&self.connection);
        let abandoned = Arc::new(AtomicBool::new(false));
        let guard = Abandon(Arc::clone(&abandoned));
        Box::pin(async move {
            let done = tokio::task::spawn_blocking(move || {
                let mut connection = connection
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                if abandoned.load(Ordering::Acquire) {
                    return Err(StoreError::Unavailable("abandoned by its caller".into()));
                }
                work(&mut connection)
            })
            .await
            .map_err(unavailable)?;
            drop(guard);
            done
        })
    }
}

/// Marks a request abandoned when its future is dropped unfinished.
struct Abandon(Arc<AtomicBool>);

impl Drop for Abandon {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Adds the columns tables made by earlier versions lack, in an immediate transaction so
/// that two processes opening the file at once do not both add one.
fn add_missing_columns(connection: &mut Connection) -> Result<(), StoreError> {
    let tx = connection
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(unavailable)?;
    for (table, column, definition) in super::ADDED_COLUMNS {
        let present: i64 = tx
            .query_row(
                "SELECT COUNT(*) FROM pragma_table_info(?1) WHERE name = ?2",
                params![table, column],
                |row| row.get(0),
            )
            .map_err(unavailable)?;
        if present == 0 {
            let add = format!("ALTER TABLE {table} ADD COLUMN {column} {definition}");
            tx.execute_batch(&add).map_err(unavailable)?;
        }
    }
    tx.commit().map_err(unavailable)
}

/// Claims `epoch` for the shard inside `tx` (an immediate transaction: no other writer runs
/// until it ends), or says why not: `shoal_core::FencingVerdict` decides.
fn claim(
    tx: &rusqlite::Transaction<'_>,
    entity_type: &str,
    shard: i64,
    epoch: Epoch,
    seq: u64,
) -> Result<(), StoreError> {
    let request = FencingClaim::unleased(epoch, seq);
    let changed = claim_verdict(tx, entity_type, shard, request)?;
    set_claim(tx, entity_type, shard, changed)
}

/// The claim `request` would leave for the shard inside `tx`, if it changes it, or why it is
/// refused; nothing is written yet.
pub(super) fn claim_verdict(
    tx: &rusqlite::Transaction<'_>,
    entity_type: &str,
    shard: i64,
    request: FencingClaim,
) -> Result<Option<ClaimRow>, StoreError> {
    let stored: Option<ClaimRow> = tx
        .prepare_cached(&sql(CLAIM_OF))
        .map_err(unavailable)?
        .query_row(params![entity_type, shard], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .optional()
        .map_err(unavailable)?;
    verdict(stored, request)
}

/// Writes the claim [`claim_verdict`] found changed.
pub(super) fn set_claim(
    tx: &rusqlite::Transaction<'_>,
    entity_type: &str,
    shard: i64,
    changed: Option<ClaimRow>,
) -> Result<(), StoreError> {
    if let Some((epoch, seq, token)) = changed {
        tx.prepare_cached(&sql(SET_CLAIM))
            .map_err(unavailable)?
            .execute(params![entity_type, shard, epoch, seq, token])
            .map_err(unavailable)?;
    }
    Ok(())
}

impl RememberStore for SqliteStore {
    fn load<'a>(
        &'a self,
        entity_type: &'a EntityType,
        shard: ShardId,
        epoch: Epoch,
    ) -> BoxFuture<'a, Result<Vec<EntityId>, StoreError>> {
        let entity_type = entity_type.as_str().to_string();
        let shard = i64::from(shard.0);
        self.with(move |connection| {
            let tx = connection
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(unavailable)?;
            claim(&tx, &entity_type, shard, epoch, 0)?;
            let ids = {
                let mut query = tx.prepare_cached(&sql(LOAD)).map_err(unavailable)?;
                let rows = query
                    .query_map(params![entity_type, shard], |row| row.get::<_, String>(0))
                    .map_err(unavailable)?;
                rows.map(|id| id.map(EntityId::from))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(unavailable)?
            };
            tx.commit().map_err(unavailable)?;
            Ok(ids)
        })
    }

    fn update<'a>(&'a self, update: Update<'a>) -> BoxFuture<'a, Result<(), StoreError>> {
        let entity_type = update.entity_type.as_str().to_string();
        let shard = i64::from(update.shard.0);
        let (epoch, seq) = (update.epoch, update.seq);
        let started: Vec<String> = update.started.iter().map(|e| e.as_str().into()).collect();
        let stopped: Vec<String> = update.stopped.iter().map(|e| e.as_str().into()).collect();
        let dormant: Vec<String> = update.dormant.iter().map(|e| e.as_str().into()).collect();
        self.with(move |connection| {
            let tx = connection
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(unavailable)?;
            claim(&tx, &entity_type, shard, epoch, seq)?;
            let changes = [
                (FORGET, &stopped),
                (KEEP_DORMANT, &dormant),
                (REMEMBER, &started),
            ];
            for (statement, ids) in changes {
                let mut change = tx.prepare_cached(&sql(statement)).map_err(unavailable)?;
                for id in ids {
                    change
                        .execute(params![entity_type, shard, id])
                        .map_err(unavailable)?;
                }
            }
            tx.commit().map_err(unavailable)
        })
    }

    fn shards<'a>(
        &'a self,
        entity_type: &'a EntityType,
        number_of_shards: u32,
    ) -> BoxFuture<'a, Result<Vec<(ShardId, Epoch)>, StoreError>> {
        let entity_type = entity_type.as_str().to_string();
        let count = count_value(number_of_shards);
        self.with(move |connection| {
            if filed_under(connection, &entity_type)? != Some(count) {
                refile(connection, &entity_type, number_of_shards)?;
            }
            let mut query = connection.prepare(&sql(SHARDS)).map_err(unavailable)?;
            let rows = query
                .query_map(params![entity_type], |row| {
                    Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?))
                })
                .map_err(unavailable)?;
            rows.map(|row| {
                let (shard, epoch) = row.map_err(unavailable)?;
                shard_epoch(shard, epoch)
            })
            .collect()
        })
    }
}

/// The number of shards the type's ids are filed under, if recorded.
fn filed_under(connection: &Connection, entity_type: &str) -> Result<Option<i64>, StoreError> {
    connection
        .prepare_cached(&sql(FILED_UNDER))
        .map_err(unavailable)?
        .query_row(params![entity_type], |row| row.get(0))
        .optional()
        .map_err(unavailable)
}

/// Files the type's ids under `number_of_shards` in one write transaction (see
/// [`RememberStore::shards`]), unless another process has done it meanwhile.
fn refile(
    connection: &mut Connection,
    entity_type: &str,
    number_of_shards: u32,
) -> Result<(), StoreError> {
    let count = count_value(number_of_shards);
    let tx = connection
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(unavailable)?;
    if filed_under(&tx, entity_type)? == Some(count) {
        return Ok(());
    }
    let entries = {
        let mut query = tx.prepare_cached(&sql(ENTRIES)).map_err(unavailable)?;
        let rows = query
            .query_map(params![entity_type], |row| Ok((row.get(0)?, row.get(1)?)))
            .map_err(unavailable)?;
        rows.collect::<Result<Vec<(i64, String)>, _>>()
            .map_err(unavailable)?
    };
    let top: i64 = tx
        .prepare_cached(&sql(TOP_EPOCH))
        .map_err(unavailable)?
        .query_row(params![entity_type], |row| row.get(0))
        .map_err(unavailable)?;
    let plan = Refile::plan(entries, number_of_shards, top)?;
    {
        let mut forget = tx.prepare_cached(&sql(FORGET)).map_err(unavailable)?;
        let mut copy = tx.prepare_cached(&sql(COPY_ENTRY)).map_err(unavailable)?;
        for (from, to, id) in &plan.moves {
            copy.execute(params![entity_type, from, id, to])
                .map_err(unavailable)?;
            forget
                .execute(params![entity_type, from, id])
                .map_err(unavailable)?;
        }
        let mut set_epoch = tx.prepare_cached(&sql(SET_EPOCH)).map_err(unavailable)?;
        for shard in &plan.touched {
            set_epoch
                .execute(params![entity_type, shard, plan.epoch])
                .map_err(unavailable)?;
        }
    }
    tx.prepare_cached(&sql(SET_FILED_UNDER))
        .map_err(unavailable)?
        .execute(params![entity_type, count])
        .map_err(unavailable)?;
    if !plan.moves.is_empty() {
        tracing::info!(
            entity_type,
            number_of_shards,
            moved = plan.moves.len(),
            "remembered ids refiled under a new number of shards"
        );
    }
    tx.commit().map_err(unavailable)
}
