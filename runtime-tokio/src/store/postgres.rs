//! The production store: PostgreSQL through tokio-postgres, one connection per store (made
//! again when it breaks). A write is one transaction whose first statement claims the epoch:
//! that row lock orders concurrent writers of one shard, and a writer that waited re-checks
//! the epoch the other committed, so an older epoch is refused even in a race.

use std::time::Duration;

use futures_util::future::BoxFuture;
use shoal_core::{EntityId, EntityType, Epoch, FencingClaim, ShardId};
use tokio::sync::Mutex;
use tokio_postgres::{Client, NoTls, Statement, Transaction};

use super::sql::{
    CLAIM_OF_LOCKED, CLAIM_ROW, COPY_ENTRY, ClaimRow, ENTRIES, FILED_UNDER, FORGET, LOAD, Refile,
    SET_CLAIM, SET_EPOCH, SET_FILED_UNDER, SHARDS, TOP_EPOCH, count_value, shard_epoch,
    unavailable, verdict,
};
use super::{RememberStore, SCHEMA, StoreError, Update};

/// A remember store and state store in a PostgreSQL database.
pub struct PostgresStore {
    url: String,
    client: Mutex<Option<Connected>>,
}

/// A live connection, with the statements of the hot paths prepared on it once (preparing one
/// per call costs a round trip to the server each time).
pub(super) struct Connected {
    pub(super) client: Client,
    pub(super) prepared: Prepared,
}

/// The statements every claim, recovery and state write runs.
pub(super) struct Prepared {
    claim_of: Statement,
    claim_row: Statement,
    set_claim: Statement,
    pub(super) last_event: Statement,
    pub(super) snapshot_of: Statement,
    pub(super) events_after: Statement,
    pub(super) append: Statement,
    pub(super) set_snapshot: Statement,
    pub(super) set_delivered: Statement,
    pub(super) delivered_of: Statement,
}

impl Prepared {
    /// Prepares them on `client`.
    async fn on(client: &Client) -> Result<Self, StoreError> {
        use crate::store::state_sql::{
            APPEND, DELIVERED_OF, EVENTS_AFTER, LAST_EVENT, SET_DELIVERED, SET_SNAPSHOT,
            SNAPSHOT_OF,
        };
        let prepare =
            |sql: &'static str| async move { client.prepare(sql).await.map_err(unavailable) };
        Ok(Self {
            claim_of: prepare(CLAIM_OF_LOCKED).await?,
            claim_row: prepare(CLAIM_ROW).await?,
            set_claim: prepare(SET_CLAIM).await?,
            last_event: prepare(LAST_EVENT).await?,
            snapshot_of: prepare(SNAPSHOT_OF).await?,
            events_after: prepare(EVENTS_AFTER).await?,
            append: prepare(APPEND).await?,
            set_snapshot: prepare(SET_SNAPSHOT).await?,
            set_delivered: prepare(SET_DELIVERED).await?,
            delivered_of: prepare(DELIVERED_OF).await?,
        })
    }
}

/// A connect gives up after this (a server dropping packets would otherwise hold every shard's
/// request for the OS's connect timeout).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

async fn connect(url: &str) -> Result<Client, StoreError> {
    let mut config: tokio_postgres::Config = url.parse().map_err(unavailable)?;
    config
        .connect_timeout(CONNECT_TIMEOUT)
        .keepalives(true)
        .keepalives_idle(Duration::from_secs(10));
    let (client, connection) = config.connect(NoTls).await.map_err(unavailable)?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::warn!(%error, "remember store connection ended");
        }
    });
    Ok(client)
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user@host:port/db`) and creates the
    /// schema if it is missing.
    pub async fn connect(url: impl Into<String>) -> Result<Self, StoreError> {
        let url = url.into();
        let client = connect(&url).await?;
        client.batch_execute(SCHEMA).await.map_err(unavailable)?;
        for (table, column, definition) in super::ADDED_COLUMNS {
            let add = format!("ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {definition}");
            client.batch_execute(&add).await.map_err(unavailable)?;
        }
        (client.batch_execute(super::STATE_SCHEMA).await).map_err(unavailable)?;
        (client.batch_execute(super::QUEUE_SCHEMA).await).map_err(unavailable)?;
        (client.batch_execute(super::LEASE_SCHEMA).await).map_err(unavailable)?;
        let prepared = Prepared::on(&client).await?;
        Ok(Self {
            url,
            client: Mutex::new(Some(Connected { client, prepared })),
        })
    }

    /// The live connection, connecting again if the last one broke.
    pub(super) async fn client(
        &self,
    ) -> Result<tokio::sync::MutexGuard<'_, Option<Connected>>, StoreError> {
        let mut connected = self.client.lock().await;
        if connected.as_ref().is_none_or(|c| c.client.is_closed()) {
            let client = connect(&self.url).await?;
            let prepared = Prepared::on(&client).await?;
            *connected = Some(Connected { client, prepared });
        }
        Ok(connected)
    }
}

/// Claims `epoch` for the shard inside `tx`, or says why not: `shoal_core::FencingVerdict`
/// decides. The claim row's lock, taken first, orders concurrent requests of one shard: one
/// that waited reads the claim the other committed.
async fn claim(
    (tx, prepared): (&Transaction<'_>, &Prepared),
    entity_type: &str,
    shard: i64,
    epoch: Epoch,
    seq: u64,
) -> Result<(), StoreError> {
    let request = FencingClaim::unleased(epoch, seq);
    let changed = claim_verdict((tx, prepared), entity_type, shard, request).await?;
    set_claim((tx, prepared), entity_type, shard, changed).await
}

/// Locks the shard's claim row inside `tx` (making it first if there is none) and returns the
/// claim `request` would leave, if it changes it, or why it is refused; nothing is written
/// yet.
pub(super) async fn claim_verdict(
    (tx, prepared): (&Transaction<'_>, &Prepared),
    entity_type: &str,
    shard: i64,
    request: FencingClaim,
) -> Result<Option<ClaimRow>, StoreError> {
    let read = || async {
        let row = tx
            .query_opt(&prepared.claim_of, &[&entity_type, &shard])
            .await;
        let row = row.map_err(unavailable)?;
        Ok::<_, StoreError>(row.map(|row| (row.get(0), row.get(1), row.get(2))))
    };
    // Nearly always the row exists and this one statement locks it; before a shard's first
    // load, the row is made first so that there is something to lock.
    let mut stored = read().await?;
    if stored.is_none() {
        tx.execute(&prepared.claim_row, &[&entity_type, &shard])
            .await
            .map_err(unavailable)?;
        stored = read().await?;
    }
    verdict(stored, request)
}

/// Writes the claim [`claim_verdict`] found changed.
pub(super) async fn set_claim(
    (tx, prepared): (&Transaction<'_>, &Prepared),
    entity_type: &str,
    shard: i64,
    changed: Option<ClaimRow>,
) -> Result<(), StoreError> {
    if let Some((epoch, seq, token)) = changed {
        tx.execute(
            &prepared.set_claim,
            &[&entity_type, &shard, &epoch, &seq, &token],
        )
        .await
        .map_err(unavailable)?;
    }
    Ok(())
}

impl RememberStore for PostgresStore {
    fn load<'a>(
        &'a self,
        entity_type: &'a EntityType,
        shard: ShardId,
        epoch: Epoch,
    ) -> BoxFuture<'a, Result<Vec<EntityId>, StoreError>> {
        Box::pin(async move {
            let (entity_type, shard) = (entity_type.as_str(), i64::from(shard.0));
            let mut guard = self.client().await?;
            let connected = guard.as_mut().expect("connected above");
            let tx = connected.client.transaction().await.map_err(unavailable)?;
            claim((&tx, &connected.prepared), entity_type, shard, epoch, 0).await?;
            let rows = tx
                .query(LOAD, &[&entity_type, &shard])
                .await
                .map_err(unavailable)?;
            tx.commit().await.map_err(unavailable)?;
            Ok(rows
                .iter()
                .map(|row| EntityId::from(row.get::<_, String>(0)))
                .collect())
        })
    }

    fn update<'a>(&'a self, update: Update<'a>) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let entity_type = update.entity_type.as_str();
            let shard = i64::from(update.shard.0);
            let started: Vec<&str> = update.started.iter().map(EntityId::as_str).collect();
            let stopped: Vec<&str> = update.stopped.iter().map(EntityId::as_str).collect();
            let dormant: Vec<&str> = update.dormant.iter().map(EntityId::as_str).collect();
            let mut guard = self.client().await?;
            let connected = guard.as_mut().expect("connected above");
            let tx = connected.client.transaction().await.map_err(unavailable)?;
            let prepared = &connected.prepared;
            claim(
                (&tx, prepared),
                entity_type,
                shard,
                update.epoch,
                update.seq,
            )
            .await?;
            if !stopped.is_empty() {
                tx.execute(
                    "DELETE FROM shoal_remembered_entities
                     WHERE entity_type = $1 AND shard = $2 AND entity_id = ANY($3)",
                    &[&entity_type, &shard, &stopped],
                )
                .await
                .map_err(unavailable)?;
            }
            // Started ids run (woken if dormant); dormant ones are kept, not loaded.
            for (ids, dormant) in [(&dormant, true), (&started, false)] {
                if ids.is_empty() {
                    continue;
                }
                tx.execute(
                    "INSERT INTO shoal_remembered_entities (entity_type, shard, entity_id, dormant)
                     SELECT $1, $2, id, $4 FROM unnest($3::text[]) AS id
                     ON CONFLICT (entity_type, shard, entity_id) DO UPDATE SET dormant = $4",
                    &[&entity_type, &shard, ids, &dormant],
                )
                .await
                .map_err(unavailable)?;
            }
            tx.commit().await.map_err(unavailable)
        })
    }

    fn shards<'a>(
        &'a self,
        entity_type: &'a EntityType,
        number_of_shards: u32,
    ) -> BoxFuture<'a, Result<Vec<(ShardId, Epoch)>, StoreError>> {
        Box::pin(async move {
            let entity_type = entity_type.as_str();
            let mut guard = self.client().await?;
            let client = &mut guard.as_mut().expect("connected above").client;
            let filed: Option<i64> = client
                .query_opt(FILED_UNDER, &[&entity_type])
                .await
                .map_err(unavailable)?
                .map(|row| row.get(0));
            if filed != Some(count_value(number_of_shards)) {
                refile(client, entity_type, number_of_shards).await?;
            }
            let rows = client
                .query(SHARDS, &[&entity_type])
                .await
                .map_err(unavailable)?;
            rows.iter()
                .map(|row| shard_epoch(row.get(0), row.get(1)))
                .collect()
        })
    }
}

/// Files the type's ids under `number_of_shards` in one transaction (see
/// [`RememberStore::shards`]), unless another coordinator has done it meanwhile: the type's row
/// is locked first, so refiles run one at a time, and every shard row of the type next, so
/// writes in flight finish before the ids are read, and wait (then are fenced) after.
async fn refile(
    client: &mut Client,
    entity_type: &str,
    number_of_shards: u32,
) -> Result<(), StoreError> {
    let count = count_value(number_of_shards);
    let tx = client.transaction().await.map_err(unavailable)?;
    tx.execute(
        "INSERT INTO shoal_remembered_types (entity_type, number_of_shards) VALUES ($1, -1)
         ON CONFLICT DO NOTHING",
        &[&entity_type],
    )
    .await
    .map_err(unavailable)?;
    let filed: i64 = tx
        .query_one(&format!("{FILED_UNDER} FOR UPDATE"), &[&entity_type])
        .await
        .map_err(unavailable)?
        .get(0);
    if filed == count {
        return tx.commit().await.map_err(unavailable);
    }
    tx.execute(
        "SELECT 1 FROM shoal_remembered_shards WHERE entity_type = $1 FOR UPDATE",
        &[&entity_type],
    )
    .await
    .map_err(unavailable)?;
    let entries = tx
        .query(ENTRIES, &[&entity_type])
        .await
        .map_err(unavailable)?
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    let top: i64 = tx
        .query_one(TOP_EPOCH, &[&entity_type])
        .await
        .map_err(unavailable)?
        .get(0);
    let plan = Refile::plan(entries, number_of_shards, top)?;
    for (from, to, id) in &plan.moves {
        tx.execute(COPY_ENTRY, &[&entity_type, from, id, to])
            .await
            .map_err(unavailable)?;
        tx.execute(FORGET, &[&entity_type, from, id])
            .await
            .map_err(unavailable)?;
    }
    for shard in &plan.touched {
        tx.execute(SET_EPOCH, &[&entity_type, shard, &plan.epoch])
            .await
            .map_err(unavailable)?;
    }
    tx.execute(SET_FILED_UNDER, &[&entity_type, &count])
        .await
        .map_err(unavailable)?;
    if !plan.moves.is_empty() {
        tracing::info!(
            entity_type,
            number_of_shards,
            moved = plan.moves.len(),
            "remembered ids refiled under a new number of shards"
        );
    }
    tx.commit().await.map_err(unavailable)
}
