//! Persistent entities: events persisted per second by one node (event-sourced entities answering
//! asks, the node grouping their writes into transactions) against raw batched inserts of the
//! same bytes into the same table; and the recovery of many entities, with and without
//! snapshots, against reading the same rows. SQLite always; PostgreSQL when a server is given
//! (`--postgres URL`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use serde::{Deserialize, Serialize};
use shoal::state::{StateKey, StateStore, StateWrite, Versioned};
use shoal::store::SqliteStore;
use shoal::{
    EntityContext, EntityTypeConfig, EventSourced, EventSourcedEntity, NodeBuilder, Persist,
    Snapshots,
};
use shoal_core::{EntityId, EntityType, Epoch, ShardId};

use crate::ROUNDS;
use crate::nodes::ASK;
use crate::table::{Row, Target};

/// A counter whose every increment is an event.
#[derive(Default, Deserialize, Serialize)]
struct Counter(u64);

impl EventSourced for Counter {
    type Command = u64;
    type Event = u64;
    type Reply = u64;

    fn decide(&self, _: &mut EntityContext, add: u64) -> Persist<u64, u64> {
        Persist::events(vec![add], self.0 + add)
    }

    fn apply(&mut self, add: &u64) {
        self.0 += add;
    }
}

/// Asks in flight at once.
const IN_FLIGHT: usize = 512;

/// The sizes: entities, and events per entity (persist rows); entities and events each
/// (recovery rows).
fn sizes(quick: bool) -> ((usize, u64), (usize, u64)) {
    if quick {
        ((200, 20), (1_000, 100))
    } else {
        ((1_000, 50), (10_000, 100))
    }
}

/// The rows.
pub(crate) async fn rows(quick: bool, postgres: Option<&str>) -> Vec<Row> {
    let mut rows = Vec::new();
    let dir = scratch();
    let (persist, recovery) = sizes(quick);
    let (mut best_raw, mut best_shoal) = (0f64, 0f64);
    for round in 0..ROUNDS {
        let path = dir.join(format!("persist-{round}.db"));
        best_raw = best_raw.max(raw_sqlite_inserts(
            &dir.join(format!("raw-{round}.db")),
            persist,
        ));
        best_shoal =
            best_shoal.max(persisted_rate(SqliteStore::open(&path).expect("opens"), persist).await);
    }
    rows.push(Row::ratio(
        "persisted events/s, one node, SQLite (asks to event-sourced entities, group commit)",
        format!("{best_shoal:.0}/s"),
        format!("{best_raw:.0}/s raw batched inserts"),
        best_shoal / best_raw,
        Target::None,
    ));
    let path = dir.join("recovery.db");
    let store = SqliteStore::open(&path).expect("opens");
    rows.extend(
        recovery_rows("SQLite", &store, recovery, || {
            raw_sqlite_reads(&path, recovery)
        })
        .await,
    );
    if let Some(url) = postgres {
        rows.extend(postgres_rows(url, persist, recovery).await);
    }
    let _ = std::fs::remove_dir_all(dir);
    rows
}

/// A fresh directory for this run's files.
fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("shoal-bench-state-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// Events per second: `entities` event-sourced counters on one node, each asked `per_entity`
/// increments (in order), [`IN_FLIGHT`] asks at a time.
async fn persisted_rate(store: impl StateStore, (entities, per_entity): (usize, u64)) -> f64 {
    let mut config = EntityTypeConfig::new("counter");
    config.number_of_shards = 100;
    let node = NodeBuilder::new("bench-state")
        .secret("bench")
        .state_store(store)
        .event_sourced(config, Snapshots::Every(100), |_| Counter::default())
        .start()
        .await
        .expect("node starts");
    let region = node
        .region::<EventSourcedEntity<Counter>>("counter")
        .expect("hosted");
    let refs: Vec<_> = (0..entities)
        .map(|e| region.entity_ref(format!("c{e}")))
        .collect();
    // Started (and recovered) first: recovery is measured apart.
    for r in &refs {
        r.ask(&0, ASK).await.expect("answers").expect("persists");
    }
    let start = Instant::now();
    let mut pending = FuturesUnordered::new();
    let mut next = (0..per_entity).flat_map(|_| 0..entities);
    loop {
        while pending.len() < IN_FLIGHT {
            let Some(e) = next.next() else { break };
            let r = &refs[e];
            pending.push(async move { r.ask(&1, ASK).await });
        }
        match pending.next().await {
            Some(answer) => {
                answer.expect("answers").expect("persists");
            }
            None => break,
        }
    }
    let rate = (entities as u64 * per_entity) as f64 / start.elapsed().as_secs_f64();
    node.leave().await;
    rate
}

/// The same rows (an 8-byte postcard event each) inserted into the same table by one writer
/// in transactions of 64 (about the groups the node commits under this load): rows per second.
fn raw_sqlite_inserts(path: &Path, (entities, per_entity): (usize, u64)) -> f64 {
    let mut connection = raw_connection(path);
    let payload = postcard::to_allocvec(&1u64).expect("encodes");
    let start = Instant::now();
    let mut written = 0u64;
    let rows: Vec<(usize, u64)> = (1..=per_entity)
        .flat_map(|seq| (0..entities).map(move |e| (e, seq)))
        .collect();
    for batch in rows.chunks(64) {
        let tx = connection.transaction().expect("begins");
        {
            let mut insert = tx
                .prepare_cached(
                    "INSERT INTO shoal_journal (entity_type, entity_id, seq, version, payload, \
                     epoch) VALUES ('counter', ?1, ?2, 1, ?3, 1)",
                )
                .expect("prepares");
            for (e, seq) in batch {
                insert
                    .execute(rusqlite::params![format!("c{e}"), *seq as i64, payload])
                    .expect("inserts");
                written += 1;
            }
        }
        tx.commit().expect("commits");
    }
    written as f64 / start.elapsed().as_secs_f64()
}

/// A connection set up as the SQLite store sets up its own, with the same schema.
fn raw_connection(path: &Path) -> rusqlite::Connection {
    drop(SqliteStore::open(path).expect("the schema"));
    let connection = rusqlite::Connection::open(path).expect("opens");
    connection
        .execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;")
        .expect("WAL");
    connection
}

/// Writes `entities` journals of `events` events each (a snapshot at the end of those of
/// type `snapshotted`), then times their recovery through the store against `raw` reading
/// the same rows: two rows, without and with snapshots.
async fn recovery_rows(
    store_name: &str,
    store: &dyn StateStore,
    (entities, events): (usize, u64),
    raw: impl Fn() -> f64,
) -> Vec<Row> {
    let payload = Versioned {
        version: 1,
        bytes: postcard::to_allocvec(&1u64).expect("encodes"),
    };
    for (kind, snapshot) in [("plain", false), ("snapshotted", true)] {
        let writes: Vec<(StateKey, StateWrite)> = (0..entities)
            .map(|e| {
                let write = StateWrite::Events {
                    first_seq: 1,
                    events: vec![payload.clone(); events as usize],
                    snapshot: snapshot.then(|| payload.clone()),
                    delivered: None,
                };
                (key(kind, e), write)
            })
            .collect();
        for chunk in writes.chunks(500) {
            let outcomes = store.write(chunk).await.expect("writes");
            assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
        }
    }
    let mut rows = Vec::new();
    let mut best_raw = 0f64;
    let (mut plain, mut snapshotted) = (0f64, 0f64);
    for _ in 0..ROUNDS {
        best_raw = best_raw.max(raw());
        plain = plain.max(recover_all(store, "plain", entities).await);
        snapshotted = snapshotted.max(recover_all(store, "snapshotted", entities).await);
    }
    let label = |what: &str| {
        format!("recovery of {entities} entities with {events} events each, {what}, {store_name}")
    };
    rows.push(Row::ratio(
        &label("no snapshot"),
        format!("{plain:.0} entities/s"),
        format!("{best_raw:.0} entities/s reading their rows"),
        plain / best_raw,
        Target::None,
    ));
    rows.push(Row::ratio(
        &label("from a snapshot"),
        format!("{snapshotted:.0} entities/s"),
        format!("{best_raw:.0} entities/s reading their rows"),
        snapshotted / best_raw,
        Target::None,
    ));
    rows
}

fn key(kind: &str, e: usize) -> StateKey {
    StateKey {
        entity_type: EntityType::from(kind),
        entity: EntityId::from(format!("c{e}")),
        shard: ShardId((e % 100) as u32),
        epoch: Epoch(1),
        lease_token: None,
    }
}

/// Recovers every entity of `kind` through the store, 64 at a time: entities per second.
async fn recover_all(store: &dyn StateStore, kind: &str, entities: usize) -> f64 {
    let start = Instant::now();
    let keys: Vec<StateKey> = (0..entities).map(|e| key(kind, e)).collect();
    let mut recovered =
        futures_util::stream::iter(keys.iter().map(|k| store.recover(k))).buffer_unordered(64);
    while let Some(r) = recovered.next().await {
        r.expect("recovers");
    }
    entities as f64 / start.elapsed().as_secs_f64()
}

/// Reads every plain entity's rows with one prepared query each: entities per second.
fn raw_sqlite_reads(path: &Path, (entities, _): (usize, u64)) -> f64 {
    let connection = raw_connection(path);
    let start = Instant::now();
    let mut query = connection
        .prepare_cached(
            "SELECT seq, version, payload FROM shoal_journal \
             WHERE entity_type = 'plain' AND entity_id = ?1 ORDER BY seq",
        )
        .expect("prepares");
    for e in 0..entities {
        let rows = query
            .query_map([format!("c{e}")], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, i64>(1)?,
                    row.get::<_, Vec<u8>>(2)?,
                ))
            })
            .expect("reads");
        for row in rows {
            row.expect("a row");
        }
    }
    entities as f64 / start.elapsed().as_secs_f64()
}

/// The PostgreSQL rows, against the server at `url`.
async fn postgres_rows(url: &str, persist: (usize, u64), recovery: (usize, u64)) -> Vec<Row> {
    let connect = || shoal::store::PostgresStore::connect(url.to_owned());
    let mut rows = Vec::new();
    let reset = async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .expect("connects");
        tokio::spawn(connection);
        client
    };
    let client = reset.await;
    let clear = "DELETE FROM shoal_journal; DELETE FROM shoal_snapshots; \
                 DELETE FROM shoal_remembered_shards;";
    let (mut best_raw, mut best_shoal) = (0f64, 0f64);
    for _ in 0..ROUNDS {
        let store = connect().await.expect("the store connects");
        client.batch_execute(clear).await.expect("clears");
        best_raw = best_raw.max(raw_postgres_inserts(&client, persist).await);
        client.batch_execute(clear).await.expect("clears");
        best_shoal = best_shoal.max(persisted_rate(store, persist).await);
    }
    rows.push(Row::ratio(
        "persisted events/s, one node, PostgreSQL (asks to event-sourced entities, group commit)",
        format!("{best_shoal:.0}/s"),
        format!("{best_raw:.0}/s raw batched inserts"),
        best_shoal / best_raw,
        Target::None,
    ));
    client.batch_execute(clear).await.expect("clears");
    let store = connect().await.expect("the store connects");
    let raw = || {
        let url = url.to_owned();
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime")
                .block_on(raw_postgres_reads(&url, recovery))
        })
        .join()
        .expect("reads")
    };
    rows.extend(recovery_rows("PostgreSQL", &store, recovery, raw).await);
    rows
}

/// The same rows inserted into the same table in transactions of 64: rows per second.
async fn raw_postgres_inserts(
    client: &tokio_postgres::Client,
    (entities, per_entity): (usize, u64),
) -> f64 {
    let payload = postcard::to_allocvec(&1u64).expect("encodes");
    let insert = client
        .prepare(
            "INSERT INTO shoal_journal (entity_type, entity_id, seq, version, payload, epoch) \
             VALUES ('counter', $1, $2, 1, $3, 1)",
        )
        .await
        .expect("prepares");
    let rows: Vec<(usize, u64)> = (1..=per_entity)
        .flat_map(|seq| (0..entities).map(move |e| (e, seq)))
        .collect();
    let start = Instant::now();
    for batch in rows.chunks(64) {
        client.batch_execute("BEGIN").await.expect("begins");
        for (e, seq) in batch {
            let id = format!("c{e}");
            client
                .execute(&insert, &[&id, &(*seq as i64), &payload])
                .await
                .expect("inserts");
        }
        client.batch_execute("COMMIT").await.expect("commits");
    }
    rows.len() as f64 / start.elapsed().as_secs_f64()
}

/// Reads every plain entity's rows with one prepared query each: entities per second.
async fn raw_postgres_reads(url: &str, (entities, _): (usize, u64)) -> f64 {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connects");
    tokio::spawn(connection);
    let query = client
        .prepare(
            "SELECT seq, version, payload FROM shoal_journal \
             WHERE entity_type = 'plain' AND entity_id = $1 ORDER BY seq",
        )
        .await
        .expect("prepares");
    let start = Instant::now();
    for e in 0..entities {
        let id = format!("c{e}");
        let rows = client.query(&query, &[&id]).await.expect("reads");
        for row in rows {
            let _: (i64, i64, Vec<u8>) = (row.get(0), row.get(1), row.get(2));
        }
    }
    entities as f64 / start.elapsed().as_secs_f64()
}
