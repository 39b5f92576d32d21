//! Shard leases in the runtime: a shard runs its entities only once it holds its lease in the
//! node's lease store, holds it while it serves, and gives it up when it stops; a persistent
//! entity's writes carry the lease's fencing token, and a store that has seen a newer holder's
//! refuses them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{Counter, Op, fast_membership, fast_settings, scratch};
use serde::{Deserialize, Serialize};
use shoal::lease::{FencingToken, LeaseTerms};
use shoal::state::StateKey;
use shoal::store::{LeaseStore, SqliteStore};
use shoal::{
    DurableState, DurableStateEntity, EntityContext, EntityId, EntityTypeConfig, NodeBuilder,
    PersistError, StartError, StateStore,
};
use shoal_core::Epoch;

fn terms() -> LeaseTerms {
    LeaseTerms {
        ttl: Duration::from_secs(5),
        renew_every: Duration::from_millis(500),
        max_drift_ppm: 1_000,
        safety_margin: Duration::from_millis(200),
        retry_interval: Duration::from_millis(200),
        operation_timeout: Duration::from_secs(2),
    }
}

fn counters() -> EntityTypeConfig {
    let mut config = EntityTypeConfig::new("counter");
    config.number_of_shards = 4;
    config.shard_lease = Some(terms());
    config
}

fn node(store: Option<SqliteStore>) -> NodeBuilder {
    let builder = NodeBuilder::new("test")
        .secret("test secret")
        .membership(fast_membership())
        .settings(fast_settings())
        .entity(counters(), |_| Counter {
            total: 0,
            stops: None,
        });
    match store {
        Some(store) => builder.lease_store(store),
        None => builder,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_serves_while_it_holds_its_lease_and_gives_it_up_when_it_stops() {
    let dir = scratch("shard-leases");
    let path = dir.join("leases.db");
    let node = node(Some(SqliteStore::open(&path).unwrap()))
        .start()
        .await
        .expect("node starts");
    let region = node.region::<Counter>("counter").unwrap();
    let total = region
        .entity_ref("c1")
        .ask(&Op::Add(5), Duration::from_secs(10))
        .await;
    assert_eq!(total, Ok(5), "served once the lease was held");
    // The lease of c1's shard is held: nobody else is granted it.
    let shard = shoal::shard_of(&EntityId::from("c1"), 4);
    let name = format!("test-shard-counter-{}", shard.0);
    let other = SqliteStore::open(&path).unwrap();
    let ttl = Duration::from_secs(1);
    assert_eq!(
        other.acquire(&name, "someone else", ttl).await.unwrap(),
        None
    );
    // Still held after more than a ttl: renewed while the shard serves.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        other.acquire(&name, "someone else", ttl).await.unwrap(),
        None
    );
    node.leave().await;
    // Released on the way out (its call runs on a task of its own), not left to expire: the
    // last renewal was at most half a second before, the grant would run 5 s.
    let released = async {
        while other
            .acquire(&name, "someone else", ttl)
            .await
            .unwrap()
            .is_none()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(2), released)
        .await
        .expect("released when the shard stopped");
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_type_with_shard_leases_needs_a_lease_store() {
    let refused = node(None).start().await.err();
    let Some(StartError::Builder(reason)) = refused else {
        panic!("expected a builder error, got {refused:?}");
    };
    assert!(reason.contains("lease store"), "{reason}");
}

/// A durable-state register: each command replaces its text.
#[derive(Default, Deserialize, Serialize)]
struct Register {
    text: String,
}

impl DurableState for Register {
    type Command = String;
    type Reply = String;

    fn handle(&mut self, _: &mut EntityContext, text: String) -> String {
        self.text = text;
        self.text.clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_entitys_writes_carry_its_shards_lease_token_and_a_newer_holder_fences_them() {
    let dir = scratch("shard-lease-tokens");
    let path = dir.join("node.db");
    let mut config = EntityTypeConfig::new("register");
    config.number_of_shards = 4;
    config.shard_lease = Some(terms());
    let node = NodeBuilder::new("test")
        .secret("test secret")
        .membership(fast_membership())
        .settings(fast_settings())
        .state_store(SqliteStore::open(&path).unwrap())
        .lease_store(SqliteStore::open(&path).unwrap())
        .durable_state(config, |_| Register::default())
        .start()
        .await
        .expect("node starts");
    let registers = node
        .region::<DurableStateEntity<Register>>("register")
        .unwrap();
    let r1 = registers.entity_ref("r1");
    let ask = Duration::from_secs(10);
    assert_eq!(r1.ask(&"a".into(), ask).await.unwrap(), Ok("a".into()));
    // The shard's claim holds the token its lease was granted under.
    let shard = shoal::shard_of(&EntityId::from("r1"), 4);
    let (epoch, token): (i64, i64) = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row(
            "SELECT epoch, lease_token FROM shoal_remembered_shards \
             WHERE entity_type = 'register' AND shard = ?1",
            [i64::from(shard.0)],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    assert!(token > 0, "the write claimed the lease's token");
    let store = SqliteStore::open(&path).unwrap();
    let key = |token: i64| StateKey {
        entity_type: "register".into(),
        entity: EntityId::from("r1"),
        shard,
        epoch: Epoch(u64::try_from(epoch).unwrap()),
        lease_token: Some(FencingToken(u64::try_from(token).unwrap())),
    };
    assert!(
        store.recover(&key(token - 1)).await.is_err(),
        "an older holder of the lease is refused"
    );
    // A newer holder recovers at the same epoch (an instance the store granted the lease
    // to after this one's ran out): the running entity's next write is refused.
    store.recover(&key(token + 1)).await.unwrap();
    assert!(matches!(
        r1.ask(&"b".into(), ask).await.unwrap(),
        Err(PersistError::Fenced(_))
    ));
    node.leave().await;
    let _ = std::fs::remove_dir_all(dir);
}
