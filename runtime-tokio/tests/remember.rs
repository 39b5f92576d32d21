//! Remembering entities on loopback, with nodes sharing one SQLite file: remembered entities
//! of a crashed node run again elsewhere without a message, a whole cluster restarted on the
//! same store starts every remembered entity, and a passivated one stays forgotten.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Counter, Op, eventually, fast_membership, fast_settings, logs};
use shoal::store::SqliteStore;
use shoal::{EntityId, EntityTypeConfig, Node, NodeBuilder, RememberSettings, StartError};
use tokio::sync::mpsc;

const ASK: Duration = Duration::from_secs(5);
const COUNTERS: usize = 100;

/// Entity starts, as `(node index, entity)`.
type Starts = mpsc::UnboundedSender<(usize, EntityId)>;

fn remembering() -> EntityTypeConfig {
    let mut config = EntityTypeConfig::new("counter");
    config.number_of_shards = 20;
    config.remember = Some(RememberSettings::default());
    config
}

/// Node `index` of a remembering cluster on the store at `path`, joining through `seeds`.
async fn node(index: usize, seeds: &[String], path: &Path, starts: &Starts) -> Node {
    node_of(remembering(), (index, seeds), path, starts).await
}

/// Node `index`, joining through `seeds`, serving `config` on the store at `path`.
async fn node_of(
    config: EntityTypeConfig,
    (index, seeds): (usize, &[String]),
    path: &Path,
    starts: &Starts,
) -> Node {
    let starts = starts.clone();
    NodeBuilder::new("test")
        .secret("test secret")
        .seed_nodes(seeds.iter().cloned())
        .membership(fast_membership())
        .settings(fast_settings())
        .remember_store(SqliteStore::open(path).expect("the store opens"))
        .entity(config, move |id| {
            let _ = starts.send((index, id.clone()));
            Counter {
                total: 0,
                stops: None,
            }
        })
        .start()
        .await
        .expect("node starts")
}

/// `n` nodes on the store at `path`; waits until every one sees them all.
async fn cluster(n: usize, path: &Path, starts: &Starts) -> Vec<Node> {
    let first = node(0, &[], path, starts).await;
    let seeds = vec![first.address().to_string()];
    let mut nodes = vec![first];
    for index in 1..n {
        nodes.push(node(index, &seeds, path, starts).await);
    }
    for node in &nodes {
        common::await_regions(node, n).await;
    }
    nodes
}

/// The entities running on each node (by its local region state).
async fn running(nodes: &[&Node]) -> BTreeMap<EntityId, usize> {
    let mut lives = BTreeMap::new();
    for node in nodes {
        let region = node.region::<Counter>("counter").unwrap();
        if let Ok(state) = region.local_state().await {
            for entity in state.into_iter().flat_map(|(_, entities)| entities) {
                *lives.entry(entity).or_insert(0) += 1;
            }
        }
    }
    lives
}

/// Waits (at most `secs`) until exactly `expected` run on `nodes`, each once.
async fn await_running(nodes: &[&Node], expected: &BTreeSet<EntityId>, secs: u64) {
    eventually(
        Duration::from_secs(secs),
        Duration::from_millis(100),
        || async {
            let lives = running(nodes).await;
            let ids: BTreeSet<EntityId> = lives.keys().cloned().collect();
            if ids == *expected && lives.values().all(|n| *n == 1) {
                return Ok(());
            }
            Err(format!(
                "{} of {} running; missing {:?}",
                ids.len(),
                expected.len(),
                expected.difference(&ids).take(5).collect::<Vec<_>>()
            ))
        },
    )
    .await;
}

/// Waits (at most `secs`) until the store at `path` remembers exactly `expected`.
async fn await_remembered(path: &Path, expected: &BTreeSet<EntityId>, secs: u64) {
    eventually(
        Duration::from_secs(secs),
        Duration::from_millis(100),
        || async {
            let remembered = remembered_ids(path);
            if remembered == *expected {
                return Ok(());
            }
            Err(format!(
                "the store remembers {} of {}; extra {:?}",
                remembered.len(),
                expected.len(),
                remembered.difference(expected).take(5).collect::<Vec<_>>()
            ))
        },
    )
    .await;
}

/// The counter ids the SQLite store at `path` remembers, read beside the nodes' own handles.
fn remembered_ids(path: &Path) -> BTreeSet<EntityId> {
    let db = rusqlite::Connection::open(path).expect("the store opens for reading");
    db.busy_timeout(Duration::from_secs(5))
        .expect("a busy timeout");
    let mut query = db
        .prepare("SELECT entity_id FROM shoal_remembered_entities WHERE entity_type = 'counter'")
        .expect("the query prepares");
    let rows = query
        .query_map([], |row| row.get::<_, String>(0))
        .expect("the query runs");
    rows.map(|id| EntityId::from(id.expect("an id"))).collect()
}

fn temp_store(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("shoal-remember-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("remember.db")
}

fn ids(range: std::ops::Range<usize>) -> BTreeSet<EntityId> {
    range.map(|i| EntityId::from(format!("c{i}"))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remembered_entities_of_a_crashed_node_run_again_elsewhere_without_a_message() {
    logs();
    let path = temp_store("crash");
    let (starts, mut started) = mpsc::unbounded_channel();
    let nodes = cluster(3, &path, &starts).await;
    let counters = nodes[0].region::<Counter>("counter").unwrap();
    for i in 0..COUNTERS {
        let entity = counters.entity_ref(format!("c{i}"));
        assert_eq!(entity.ask(&Op::Add(1), ASK).await, Ok(1));
    }
    let on_crashed: BTreeSet<EntityId> = running(&[&nodes[2]]).await.into_keys().collect();
    assert!(!on_crashed.is_empty(), "the crashing node hosts counters");
    while started.try_recv().is_ok() {}

    nodes[2].abort().await;
    let crashed = tokio::time::Instant::now();
    // No message is sent: remembering alone starts them on the survivors.
    await_running(&[&nodes[0], &nodes[1]], &ids(0..COUNTERS), 30).await;
    eprintln!(
        "{} remembered counters of the crashed node running again after {:?}",
        on_crashed.len(),
        crashed.elapsed()
    );
    let mut restarted = BTreeMap::new();
    while let Ok((index, id)) = started.try_recv() {
        assert_ne!(index, 2, "started on the crashed node");
        *restarted.entry(id).or_insert(0) += 1;
    }
    let restarted_ids: BTreeSet<EntityId> = restarted.keys().cloned().collect();
    assert_eq!(
        restarted_ids, on_crashed,
        "exactly the crashed node's counters restarted"
    );
    assert!(restarted.values().all(|n| *n == 1), "{restarted:?}");
    for node in &nodes[..2] {
        node.abort().await;
    }
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_cluster_starts_every_remembered_entity_and_none_that_was_passivated() {
    logs();
    let path = temp_store("restart");
    let (starts, _started) = mpsc::unbounded_channel();
    let nodes = cluster(2, &path, &starts).await;
    let counters = nodes[0].region::<Counter>("counter").unwrap();
    for i in 0..COUNTERS {
        let entity = counters.entity_ref(format!("c{i}"));
        assert_eq!(entity.ask(&Op::Add(1), ASK).await, Ok(1));
    }
    // The first ten ask to be passivated: they are forgotten.
    for i in 0..10 {
        counters
            .entity_ref(format!("c{i}"))
            .tell(&Op::Passivate)
            .await
            .unwrap();
    }
    await_running(&[&nodes[0], &nodes[1]], &ids(10..COUNTERS), 10).await;
    // A passivated entity is gone from its shard before the store has forgotten it; a crash
    // in between would rightly start it again. Crash only once the store agrees.
    await_remembered(&path, &ids(10..COUNTERS), 10).await;
    for node in &nodes {
        node.abort().await;
    }

    // A new cluster (new addresses, new incarnations) on the same store.
    let nodes = cluster(2, &path, &starts).await;
    await_running(&[&nodes[0], &nodes[1]], &ids(10..COUNTERS), 30).await;
    for node in &nodes {
        node.abort().await;
    }
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[tokio::test]
async fn a_remembering_type_needs_a_store() {
    let refused = NodeBuilder::new("test")
        .entity(remembering(), |_| Counter {
            total: 0,
            stops: None,
        })
        .start()
        .await;
    assert!(
        matches!(&refused, Err(StartError::Builder(why)) if why.contains("remember store")),
        "{:?}",
        refused.err()
    );
}

/// The `dormant` flag of each counter id the SQLite store at `path` remembers.
fn dormancy(path: &Path) -> BTreeMap<EntityId, bool> {
    let db = rusqlite::Connection::open(path).expect("the store opens for reading");
    db.busy_timeout(Duration::from_secs(5))
        .expect("a busy timeout");
    let mut query = db
        .prepare(
            "SELECT entity_id, dormant FROM shoal_remembered_entities \
             WHERE entity_type = 'counter'",
        )
        .expect("the query prepares");
    let rows = query
        .query_map([], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, bool>(1)?))
        })
        .expect("the query runs");
    rows.map(|row| row.expect("a row"))
        .map(|(id, dormant)| (EntityId::from(id), dormant))
        .collect()
}

/// A remembering node of one shard under an active-entity limit of `limit`.
async fn limited_node(path: &Path, limit: usize, starts: &Starts) -> Node {
    let mut config = remembering();
    config.number_of_shards = 1;
    config.active_entity_limit = Some(shoal::passivation::ActiveEntityLimit {
        per_region: limit,
        policy: shoal::passivation::ReplacementPolicy::LeastRecentlyUsed,
    });
    node_of(config, (0, &[]), path, starts).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entities_the_limit_passivates_stay_remembered_dormant_and_return_on_their_next_message() {
    logs();
    let path = temp_store("dormant");
    let (starts, mut started) = mpsc::unbounded_channel();
    let node = limited_node(&path, 4, &starts).await;
    common::await_regions(&node, 1).await;
    let counters = node.region::<Counter>("counter").unwrap();
    for i in 0..10 {
        let entity = counters.entity_ref(format!("c{i}"));
        assert_eq!(entity.ask(&Op::Add(1), ASK).await, Ok(1));
    }
    // The four used last run; the six before them were passivated by the limit, and the
    // store keeps them, dormant.
    await_running(&[&node], &ids(6..10), 10).await;
    let expected: BTreeMap<EntityId, bool> = (0..10)
        .map(|i| (EntityId::from(format!("c{i}")), i < 6))
        .collect();
    eventually(
        Duration::from_secs(10),
        Duration::from_millis(100),
        || async {
            let stored = dormancy(&path);
            (stored == expected)
                .then_some(())
                .ok_or_else(|| format!("the store holds {stored:?}"))
        },
    )
    .await;
    node.abort().await;
    while started.try_recv().is_ok() {}

    // Started again on the same store: only the four that ran come back without a message.
    let node = limited_node(&path, 4, &starts).await;
    await_running(&[&node], &ids(6..10), 30).await;
    let mut recovered = BTreeSet::new();
    while let Ok((_, id)) = started.try_recv() {
        recovered.insert(id);
    }
    assert_eq!(recovered, ids(6..10), "dormant entities are not recovered");
    // A dormant one's next message starts it (and passivates the least recently used).
    let counters = node.region::<Counter>("counter").unwrap();
    let woken = counters.entity_ref("c0");
    assert_eq!(woken.ask(&Op::Add(1), ASK).await, Ok(1));
    let mut expected = ids(7..10);
    expected.insert(EntityId::from("c0"));
    await_running(&[&node], &expected, 10).await;
    eventually(
        Duration::from_secs(10),
        Duration::from_millis(100),
        || async {
            let stored = dormancy(&path);
            let awake = stored.get(&EntityId::from("c0")) == Some(&false);
            let asleep = stored.get(&EntityId::from("c6")) == Some(&true);
            (awake && asleep)
                .then_some(())
                .ok_or_else(|| format!("the store holds {stored:?}"))
        },
    )
    .await;
    node.abort().await;
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}
