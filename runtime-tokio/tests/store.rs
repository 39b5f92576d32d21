//! One test-suite for every remember store, run against SQLite (a file of its own) and against
//! a private PostgreSQL server this test starts (initdb in a temporary directory, a free
//! loopback port, as the `postgres` user when run as root): remembering and forgetting,
//! fencing by epoch, two writers racing with different epochs, and what each store adds
//! (SQLite: WAL mode, reopening the file).

use std::path::Path;
use std::time::Duration;

mod common;

use common::postgres::{PgServer, free_port};
use common::scratch;
use shoal::store::{
    PostgresStore, RememberStore, SqliteStore, StateKey, StateStore, StoreError, Update,
};
use shoal_core::lease::FencingToken;
use shoal_core::{EntityId, EntityType, Epoch, FencingCase, ShardId};

fn ids(names: &[&str]) -> Vec<EntityId> {
    names.iter().map(|n| EntityId::from(*n)).collect()
}

async fn update(
    store: &dyn RememberStore,
    kind: &EntityType,
    shard: u32,
    epoch: u64,
    started: &[&str],
    stopped: &[&str],
) -> Result<(), StoreError> {
    // Each write of the tests is newer than the one before (as an instance's writes are).
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    write(store, kind, (shard, epoch, seq), started, stopped).await
}

async fn write(
    store: &dyn RememberStore,
    kind: &EntityType,
    (shard, epoch, seq): (u32, u64, u64),
    started: &[&str],
    stopped: &[&str],
) -> Result<(), StoreError> {
    write_dormant(store, kind, (shard, epoch, seq), [started, stopped, &[]]).await
}

/// A write that also keeps ids dormant: `[started, stopped, dormant]`.
async fn write_dormant(
    store: &dyn RememberStore,
    kind: &EntityType,
    (shard, epoch, seq): (u32, u64, u64),
    [started, stopped, dormant]: [&[&str]; 3],
) -> Result<(), StoreError> {
    let (started, stopped, dormant) = (ids(started), ids(stopped), ids(dormant));
    store
        .update(Update {
            entity_type: kind,
            shard: ShardId(shard),
            epoch: Epoch(epoch),
            seq,
            started: &started,
            stopped: &stopped,
            dormant: &dormant,
        })
        .await
}

/// Ids passivated by an active-entity limit stay remembered, dormant: a load leaves them out
/// (their shard does not start them), a later start wakes one, a stop forgets one.
async fn dormant_ids_are_kept_but_not_loaded_until_started(
    store: &dyn RememberStore,
    kind: &EntityType,
) {
    let seq = |n| (20, 1, n);
    assert_eq!(store.load(kind, ShardId(20), Epoch(1)).await, Ok(vec![]));
    let started: &[&str] = &["a", "b", "c"];
    write(store, kind, seq(1), started, &[]).await.unwrap();
    let asleep: [&[&str]; 3] = [&[], &[], &["b", "c", "z"]];
    write_dormant(store, kind, seq(2), asleep).await.unwrap();
    let loaded = store.load(kind, ShardId(20), Epoch(1)).await;
    assert_eq!(loaded, Ok(ids(&["a"])), "dormant ids are not loaded");
    write(store, kind, seq(3), &["b", "z"], &["c"])
        .await
        .unwrap();
    let loaded = store.load(kind, ShardId(20), Epoch(2)).await;
    assert_eq!(
        loaded,
        Ok(ids(&["a", "b", "z"])),
        "a start wakes a dormant id"
    );
    // Asleep again, and forgotten while asleep: neither comes back.
    let asleep: [&[&str]; 3] = [&[], &[], &["b", "z"]];
    write_dormant(store, kind, (20, 2, 1), asleep)
        .await
        .unwrap();
    write(store, kind, (20, 2, 2), &[], &["z"]).await.unwrap();
    write(store, kind, (20, 2, 3), &["z"], &[]).await.unwrap();
    let loaded = store.load(kind, ShardId(20), Epoch(3)).await;
    assert_eq!(loaded, Ok(ids(&["a", "z"])));
}

/// The core's table of fencing cases, each on a shard of its own: the store's verdicts are
/// `shoal_core::FencingVerdict`'s, as the simulator's store's are. A step with a lease token is
/// a state store's recovery (which claims the shard as an entity's write does), one without a
/// remember store's load or write: both share the shard's claim.
async fn fencing_cases(store: &dyn StateStore) {
    let kind = EntityType::from("fencing-cases");
    for (n, case) in shoal_core::FENCING_CASES.iter().enumerate() {
        let shard = 100 + u32::try_from(n).expect("a few cases");
        for (i, &step) in case.steps.iter().enumerate() {
            let (epoch, seq, token, expected) = step;
            let answer = match (token, seq) {
                (1.., _) => {
                    let key = StateKey {
                        entity_type: kind.clone(),
                        entity: EntityId::from("e"),
                        shard: ShardId(shard),
                        epoch: Epoch(epoch),
                        lease_token: FencingCase::claim(step).token,
                    };
                    store.recover(&key).await.map(drop)
                }
                (0, 0) => store
                    .load(&kind, ShardId(shard), Epoch(epoch))
                    .await
                    .map(drop),
                (0, _) => write(store, &kind, (shard, epoch, seq), &[], &[]).await,
            };
            let got = match answer {
                Ok(()) => None,
                Err(StoreError::Fenced { refused, current }) => {
                    assert_eq!(refused, Epoch(epoch), "{}: step {i}", case.name);
                    Some(current.0)
                }
                Err(other) => panic!("{}: step {i}: {other}", case.name),
            };
            assert_eq!(got, expected, "{}: step {i}", case.name);
        }
    }
}

/// A claim table as stores made it before shard-lease tokens fenced writes, with shard 40 of
/// `older` claimed at epoch 4.
const OLDER_CLAIM_TABLE: &str = "
CREATE TABLE shoal_remembered_shards (
    entity_type TEXT NOT NULL,
    shard BIGINT NOT NULL,
    epoch BIGINT NOT NULL,
    seq BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (entity_type, shard)
);
INSERT INTO shoal_remembered_shards (entity_type, shard, epoch, seq) VALUES ('older', 40, 4, 2);
CREATE TABLE shoal_remembered_entities (
    entity_type TEXT NOT NULL,
    shard BIGINT NOT NULL,
    entity_id TEXT NOT NULL,
    PRIMARY KEY (entity_type, shard, entity_id)
);
INSERT INTO shoal_remembered_entities (entity_type, shard, entity_id) VALUES ('older', 41, 'kept');
";

/// A store opened on an `OLDER_CLAIM_TABLE` added the token and dormant columns: the claim
/// and the entries read as they were, and tokens fence from then on.
async fn an_older_claim_table_is_read_and_fenced_by_tokens(store: &dyn StateStore) {
    let kind = EntityType::from("older");
    let loaded = store.load(&kind, ShardId(41), Epoch(1)).await;
    assert_eq!(loaded, Ok(ids(&["kept"])), "an older entry is not dormant");
    assert_eq!(
        store.load(&kind, ShardId(40), Epoch(3)).await,
        Err(StoreError::Fenced {
            refused: Epoch(3),
            current: Epoch(4)
        })
    );
    let key = |token| StateKey {
        entity_type: kind.clone(),
        entity: EntityId::from("e"),
        shard: ShardId(40),
        epoch: Epoch(4),
        lease_token: Some(FencingToken(token)),
    };
    assert_eq!(store.recover(&key(5)).await.map(drop), Ok(()));
    assert_eq!(
        store.recover(&key(4)).await.map(drop),
        Err(StoreError::Fenced {
            refused: Epoch(4),
            current: Epoch(4)
        }),
        "an older holder of the shard's lease is refused"
    );
}

/// An instance's write that timed out and lands after its newer one changes nothing.
async fn late_writes_of_an_instance_are_refused(store: &dyn RememberStore, kind: &EntityType) {
    assert_eq!(store.load(kind, ShardId(11), Epoch(3)).await, Ok(vec![]));
    write(store, kind, (11, 3, 5), &["a"], &[]).await.unwrap();
    assert_eq!(
        write(store, kind, (11, 3, 4), &[], &["a"]).await,
        Err(StoreError::Fenced {
            refused: Epoch(3),
            current: Epoch(3)
        })
    );
    // A load at the instance's own epoch reads, and does not reset the sequence.
    assert_eq!(
        store.load(kind, ShardId(11), Epoch(3)).await,
        Ok(ids(&["a"]))
    );
    assert!(write(store, kind, (11, 3, 4), &[], &["a"]).await.is_err());
    write(store, kind, (11, 3, 6), &["b"], &[]).await.unwrap();
    assert_eq!(
        store.load(kind, ShardId(11), Epoch(4)).await,
        Ok(ids(&["a", "b"])),
        "the late stop undid nothing; a newer epoch reads both"
    );
}

/// The shard count the suite's type is filed under (its ids are not where the hash puts them:
/// the store leaves them where instances write them, and refiles only when the count changes).
const COUNT: u32 = 12;

/// Every id of `kind` in shards below `n`, with the shard whose entry holds it, read by loads
/// at `epoch`.
async fn filing(
    store: &dyn RememberStore,
    kind: &EntityType,
    n: u32,
    epoch: u64,
) -> Vec<(u32, EntityId)> {
    let mut held = Vec::new();
    for shard in 0..n {
        let ids = store
            .load(kind, ShardId(shard), Epoch(epoch))
            .await
            .unwrap();
        held.extend(ids.into_iter().map(|id| (shard, id)));
    }
    held
}

/// A full restart with another number of shards: the coordinator's read of the shards refiles
/// every id where the hash now puts it, once, above every epoch, so an instance of the old
/// count can no longer write.
async fn another_count_refiles_every_id_once(store: &dyn RememberStore, other: &dyn RememberStore) {
    let kind = EntityType::from("refiled");
    assert_eq!(store.shards(&kind, 8).await, Ok(vec![]));
    let names: Vec<String> = (0..40).map(|i| format!("e{i}")).collect();
    for shard in 0..8 {
        let mine: Vec<&str> = (names.iter())
            .filter(|n| shoal_core::shard_of(&EntityId::from(n.as_str()), 8).0 == shard)
            .map(String::as_str)
            .collect();
        store.load(&kind, ShardId(shard), Epoch(3)).await.unwrap();
        write(store, &kind, (shard, 3, 1), &mine, &[])
            .await
            .unwrap();
        // One dormant id per shard, which the refile must move dormant.
        let asleep = format!("asleep{shard}");
        let dormant: [&[&str]; 3] = [&[], &[], &[asleep.as_str()]];
        write_dormant(store, &kind, (shard, 3, 2), dormant)
            .await
            .unwrap();
    }
    let listed = other.shards(&kind, 5).await.unwrap();
    assert_eq!(
        listed.len(),
        8,
        "entries above the new count stay listed: {listed:?}"
    );
    assert!(
        listed.iter().all(|(_, epoch)| *epoch == Epoch(4)),
        "{listed:?}"
    );
    assert_eq!(
        write(store, &kind, (1, 3, 3), &["late"], &[]).await,
        Err(StoreError::Fenced {
            refused: Epoch(3),
            current: Epoch(4)
        }),
        "an instance of the old count is fenced"
    );
    let held = filing(store, &kind, 8, 10).await;
    assert_eq!(
        held.len(),
        names.len(),
        "nothing lost or doubled, no dormant id woken: {held:?}"
    );
    assert!(
        (held.iter()).all(|(shard, id)| shoal_core::shard_of(id, 5).0 == *shard),
        "{held:?}"
    );
    assert_eq!(
        store.shards(&kind, 5).await.unwrap(),
        (0..8).map(|s| (ShardId(s), Epoch(10))).collect::<Vec<_>>(),
        "filed under 5 already: nothing moves, no epoch changes"
    );
    store.shards(&kind, 13).await.unwrap();
    let held = filing(store, &kind, 13, 20).await;
    assert_eq!(held.len(), names.len());
    assert!((held.iter()).all(|(shard, id)| shoal_core::shard_of(id, 13).0 == *shard));
}

/// The behaviour every store shares; `kind` keeps runs in one database apart.
async fn suite<S: StateStore>(store: &S, other: &S, kind: &str) {
    fencing_cases(store).await;
    another_count_refiles_every_id_once(store, other).await;
    let kind = EntityType::from(kind);
    // The coordinator reads first (nothing to refile), as it does before any shard starts.
    assert_eq!(store.shards(&kind, COUNT).await, Ok(vec![]));
    late_writes_of_an_instance_are_refused(store, &kind).await;
    dormant_ids_are_kept_but_not_loaded_until_started(store, &EntityType::from("dormant")).await;
    // Remembering and forgetting.
    assert_eq!(store.load(&kind, ShardId(1), Epoch(1)).await, Ok(vec![]));
    update(store, &kind, 1, 1, &["c", "a", "b"], &[])
        .await
        .unwrap();
    update(store, &kind, 1, 1, &["a"], &["b"]).await.unwrap();
    assert_eq!(
        store.load(&kind, ShardId(1), Epoch(1)).await,
        Ok(ids(&["a", "c"]))
    );
    update(store, &kind, 7, 1, &["x"], &[]).await.unwrap();
    update(store, &kind, 9, 1, &["y"], &[]).await.unwrap();
    update(store, &kind, 9, 1, &[], &["y"]).await.unwrap();
    assert_eq!(
        store.shards(&kind, COUNT).await,
        Ok(vec![
            (ShardId(1), Epoch(1)),
            (ShardId(7), Epoch(1)),
            (ShardId(9), Epoch(1)),
            (ShardId(11), Epoch(4))
        ]),
        "every shard with an epoch, remembering something or not (9 forgot its only entity)"
    );

    // Fencing: a newer load claims the shard; older writers and loaders are refused.
    assert_eq!(
        store.load(&kind, ShardId(1), Epoch(5)).await,
        Ok(ids(&["a", "c"]))
    );
    let refused = update(store, &kind, 1, 4, &["stale"], &["a"]).await;
    assert_eq!(
        refused,
        Err(StoreError::Fenced {
            refused: Epoch(4),
            current: Epoch(5)
        })
    );
    assert_eq!(
        other.load(&kind, ShardId(1), Epoch(3)).await,
        Err(StoreError::Fenced {
            refused: Epoch(3),
            current: Epoch(5)
        })
    );
    update(other, &kind, 1, 6, &["d"], &[]).await.unwrap();
    assert!(matches!(
        update(store, &kind, 1, 5, &["late"], &[]).await,
        Err(StoreError::Fenced { .. })
    ));
    assert_eq!(
        store.load(&kind, ShardId(1), Epoch(6)).await,
        Ok(ids(&["a", "c", "d"]))
    );
    // Other shards have epochs of their own.
    update(store, &kind, 7, 2, &["z"], &[]).await.unwrap();

    // Two writers race, the second always one epoch ahead: the newer write always lands; the
    // older lands only if it committed first, and never after the newer one. At least 40
    // races, and more (at most 400) until both outcomes occurred: on a loaded machine one
    // writer can win 40 in a row, and the test must see both to show it checks a race.
    let (mut older_landed, mut older_fenced) = (0, 0);
    let mut round = 0u64;
    while round < 40 || ((older_landed == 0 || older_fenced == 0) && round < 400) {
        let (old, new) = (10 + 2 * round, 11 + 2 * round);
        let (a, b) = (format!("old{round}"), format!("new{round}"));
        let (older, newer) = ([a.as_str()], [b.as_str()]);
        let older_write = update(store, &kind, 2, old, &older, &[]);
        let newer_write = update(other, &kind, 2, new, &newer, &[]);
        // Either writer may start first.
        let (first, second) = if round % 2 == 0 {
            tokio::join!(older_write, newer_write)
        } else {
            let (second, first) = tokio::join!(newer_write, older_write);
            (first, second)
        };
        second.unwrap();
        let remembered = store.load(&kind, ShardId(2), Epoch(new)).await.unwrap();
        assert!(remembered.contains(&EntityId::from(b.as_str())));
        match first {
            Ok(()) => {
                older_landed += 1;
                assert!(remembered.contains(&EntityId::from(a.as_str())));
            }
            Err(StoreError::Fenced { refused, current }) => {
                older_fenced += 1;
                assert_eq!((refused, current), (Epoch(old), Epoch(new)));
                assert!(!remembered.contains(&EntityId::from(a.as_str())));
            }
            Err(other) => panic!("round {round}: {other}"),
        }
        // Whatever the race did, the older epoch is fenced from now on.
        assert!(update(store, &kind, 2, old, &["after"], &[]).await.is_err());
        round += 1;
    }
    eprintln!("the older writer landed first in {older_landed} of {round} races");
    assert!(
        older_landed > 0 && older_fenced > 0,
        "both outcomes of the race should occur: the older landed in {older_landed} of {round}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_store_passes_the_suite_and_is_one_shared_wal_file() {
    let dir = scratch("sqlite");
    let path = dir.join("remember.db");
    // Two handles on one file, as two processes of a node set on one machine would have.
    let store = SqliteStore::open(&path).unwrap();
    let other = SqliteStore::open(&path).unwrap();
    suite(&store, &other, "counter").await;
    drop((store, other));
    assert!(dir.join("remember.db-wal").exists() || wal_mode(&path));
    let reopened = SqliteStore::open(&path).unwrap();
    let kind = EntityType::from("counter");
    let listed = reopened.shards(&kind, COUNT).await.unwrap();
    let shards: Vec<ShardId> = listed.iter().map(|(shard, _)| *shard).collect();
    assert_eq!(
        shards,
        [ShardId(1), ShardId(2), ShardId(7), ShardId(9), ShardId(11)]
    );
    assert!(
        listed.iter().all(|(_, epoch)| *epoch >= Epoch(1)),
        "each shard is listed with the epoch it was claimed at: {listed:?}"
    );
    assert!(matches!(
        reopened.load(&kind, ShardId(1), Epoch(1)).await,
        Err(StoreError::Fenced { .. })
    ));
    let older = dir.join("older.db");
    let connection = rusqlite::Connection::open(&older).unwrap();
    connection.execute_batch(OLDER_CLAIM_TABLE).unwrap();
    drop(connection);
    an_older_claim_table_is_read_and_fenced_by_tokens(&SqliteStore::open(&older).unwrap()).await;
    // Opened again, the column is there already.
    an_older_claim_table_is_read_and_fenced_by_tokens(&SqliteStore::open(&older).unwrap()).await;
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn sqlite_store_reports_a_path_it_cannot_open() {
    let error = SqliteStore::open("/proc/shoal/no/such/dir/remember.db").err();
    assert!(
        matches!(error, Some(StoreError::Unavailable(_))),
        "{error:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_store_passes_the_suite_on_a_private_server() {
    let server = PgServer::start();
    let store = server.connect().await;
    let other = server.connect().await;
    suite(&store, &other, "counter").await;
    let (client, connection) = tokio_postgres::connect(&server.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let older = format!(
        "DROP TABLE shoal_remembered_shards; DROP TABLE shoal_remembered_entities; \
         {OLDER_CLAIM_TABLE}"
    );
    client.batch_execute(&older).await.unwrap();
    an_older_claim_table_is_read_and_fenced_by_tokens(&server.connect().await).await;
    // A store that cannot reach its server says so.
    let closed = format!("host=127.0.0.1 port={} user=shoal", free_port());
    assert!(matches!(
        PostgresStore::connect(closed).await.err(),
        Some(StoreError::Unavailable(_))
    ));
}

fn wal_mode(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|bytes| bytes.len() > 19 && bytes[18] == 2)
}

/// A store that never answers.
struct Silent;

/// A store whose every request panics.
struct Panicking;

impl RememberStore for Panicking {
    fn load<'a>(
        &'a self,
        _: &'a EntityType,
        _: ShardId,
        _: Epoch,
    ) -> futures_util::future::BoxFuture<'a, Result<Vec<EntityId>, StoreError>> {
        Box::pin(async { panic!("the store broke") })
    }
    fn update<'a>(
        &'a self,
        _: Update<'a>,
    ) -> futures_util::future::BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async { panic!("the store broke") })
    }
    fn shards<'a>(
        &'a self,
        _: &'a EntityType,
        _: u32,
    ) -> futures_util::future::BoxFuture<'a, Result<Vec<(ShardId, Epoch)>, StoreError>> {
        Box::pin(async { panic!("the store broke") })
    }
}

impl RememberStore for Silent {
    fn load<'a>(
        &'a self,
        _: &'a EntityType,
        _: ShardId,
        _: Epoch,
    ) -> futures_util::future::BoxFuture<'a, Result<Vec<EntityId>, StoreError>> {
        Box::pin(std::future::pending())
    }
    fn update<'a>(
        &'a self,
        _: Update<'a>,
    ) -> futures_util::future::BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(std::future::pending())
    }
    fn shards<'a>(
        &'a self,
        _: &'a EntityType,
        _: u32,
    ) -> futures_util::future::BoxFuture<'a, Result<Vec<(ShardId, Epoch)>, StoreError>> {
        Box::pin(std::future::pending())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cores_requests_are_carried_out_and_every_outcome_is_a_completion() {
    use shoal::store::execute;
    use shoal_core::{StoreCompletion, StoreRequest};
    let dir = scratch("execute");
    let store = SqliteStore::open(dir.join("remember.db")).unwrap();
    let kind = EntityType::from("counter");
    let load = |epoch| StoreRequest::Load {
        entity_type: kind.clone(),
        shard: ShardId(4),
        epoch: Epoch(epoch),
    };
    let write = |epoch| StoreRequest::Update {
        entity_type: kind.clone(),
        shard: ShardId(4),
        epoch: Epoch(epoch),
        seq: 1,
        started: ids(&["a"]),
        stopped: vec![],
        dormant: vec![],
    };
    let limit = Duration::from_secs(5);
    let shards = StoreRequest::Shards {
        entity_type: kind.clone(),
        number_of_shards: 8,
    };
    assert_eq!(
        execute(&store, &shards, limit).await,
        StoreCompletion::Shards(vec![])
    );
    assert_eq!(
        execute(&store, &load(2), limit).await,
        StoreCompletion::Loaded(vec![])
    );
    assert_eq!(
        execute(&store, &write(2), limit).await,
        StoreCompletion::Written
    );
    assert_eq!(
        execute(&store, &load(2), limit).await,
        StoreCompletion::Loaded(ids(&["a"]))
    );
    assert_eq!(
        execute(&store, &write(1), limit).await,
        StoreCompletion::Fenced(Epoch(2))
    );
    assert_eq!(
        execute(&store, &shards, limit).await,
        StoreCompletion::Shards(vec![(ShardId(4), Epoch(2))])
    );
    let broken = execute(&Panicking, &write(3), limit).await;
    assert!(
        matches!(&broken, StoreCompletion::Failed(why) if why.contains("panicked")),
        "{broken:?}"
    );
    let silent = execute(&Silent, &write(3), Duration::from_millis(50)).await;
    assert!(
        matches!(&silent, StoreCompletion::Failed(why) if why.contains("timed out")),
        "{silent:?}"
    );
    let _ = std::fs::remove_dir_all(dir);
}
