//! One test-suite for every lease store, run against SQLite (a file of its own), a private
//! PostgreSQL server and a private etcd server this test starts: one holder at a time, an
//! extension keeps the token, a new holder's token is larger, holders racing on two
//! connections, a paused holder's grant running out on the store's clock, and the server
//! going away (every call then fails within a bound instead of hanging or granting).

mod common;

use std::time::Duration;

use common::etcd::EtcdServer;
use common::postgres::PgServer;
use common::scratch;
use shoal::store::{LeaseStore, SqliteStore};

const TTL: Duration = Duration::from_secs(30);

/// One holder at a time; an extension keeps the token; a release by anyone but the holder
/// changes nothing; a new holder gets a larger token.
async fn one_holder_at_a_time(store: &dyn LeaseStore) {
    let a = store.acquire("s1", "a", TTL).await.unwrap();
    assert!(a.is_some(), "granted");
    assert_eq!(
        store.acquire("s1", "b", TTL).await.unwrap(),
        None,
        "held by a"
    );
    assert_eq!(
        store.acquire("s1", "a", TTL).await.unwrap(),
        a,
        "extended, same token"
    );
    store.release("s1", "b", a.unwrap()).await.unwrap();
    assert_eq!(
        store.acquire("s1", "b", TTL).await.unwrap(),
        None,
        "b could not release it"
    );
    store.release("s1", "a", a.unwrap()).await.unwrap();
    let b = store.acquire("s1", "b", TTL).await.unwrap();
    assert!(b > a, "a new holder's token is larger: {b:?} after {a:?}");
    // a's old token releases nothing of b's grant.
    store.release("s1", "a", a.unwrap()).await.unwrap();
    assert_eq!(store.acquire("s1", "a", TTL).await.unwrap(), None);
    // Leases are independent of one another.
    assert!(store.acquire("s1-other", "a", TTL).await.unwrap().is_some());
}

/// A holder that stops renewing (paused) keeps its grant until the grant's ttl has run out on
/// the store's clock, not longer: then it goes to whoever asks, under a larger token, the old
/// holder's extension is refused and its release changes nothing.
async fn a_paused_holders_grant_runs_out(store: &dyn LeaseStore) {
    let short = Duration::from_secs(1);
    let c = store
        .acquire("s2", "c", short)
        .await
        .unwrap()
        .expect("granted");
    let granted_at = std::time::Instant::now();
    assert_eq!(
        store.acquire("s2", "d", TTL).await.unwrap(),
        None,
        "still c's"
    );
    let d = loop {
        if let Some(d) = store.acquire("s2", "d", TTL).await.unwrap() {
            break d;
        }
        assert!(
            granted_at.elapsed() < Duration::from_secs(15),
            "an expired grant must go to the next holder"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // The store's clock, not ours, ends the grant: allow it a little less than the ttl.
    assert!(
        granted_at.elapsed() >= short - Duration::from_millis(150),
        "granted again after {:?}, before the ttl ran out",
        granted_at.elapsed()
    );
    assert!(d > c, "{d:?} after {c:?}");
    assert_eq!(store.acquire("s2", "c", TTL).await.unwrap(), None);
    store.release("s2", "c", c).await.unwrap();
    assert_eq!(
        store.acquire("s2", "d", TTL).await.unwrap(),
        Some(d),
        "still d's"
    );
}

/// Holders racing for a free lease on two connections: exactly one wins, and while it holds
/// the lease, nobody else gets it.
async fn racing_holders(store: &dyn LeaseStore, other: &dyn LeaseStore) {
    for round in 0..5 {
        let name = format!("race-{round}");
        let owners = ["e", "f", "g", "h"];
        let racers = owners.iter().enumerate().map(|(i, owner)| {
            let on = if i % 2 == 0 { store } else { other };
            on.acquire(&name, owner, TTL)
        });
        let won = futures_util::future::join_all(racers).await;
        let winners: Vec<_> = (owners.iter().zip(&won))
            .filter(|(_, w)| matches!(w, Ok(Some(_))))
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: {won:?}");
        let (winner, token) = winners[0];
        for owner in owners.iter().filter(|o| *o != winner) {
            assert_eq!(other.acquire(&name, owner, TTL).await.unwrap(), None);
        }
        assert_eq!(
            &store.acquire(&name, winner, TTL).await.unwrap(),
            token.as_ref().unwrap()
        );
    }
}

async fn suite(store: &dyn LeaseStore, other: &dyn LeaseStore) {
    one_holder_at_a_time(store).await;
    a_paused_holders_grant_runs_out(store).await;
    racing_holders(store, other).await;
}

/// With its server gone, a store's calls fail within a bound: none hangs, none grants.
async fn calls_fail_once_the_server_is_gone(store: &dyn LeaseStore) {
    for name in ["s1", "gone"] {
        let call = store.acquire(name, "a", TTL);
        let outcome = tokio::time::timeout(Duration::from_secs(20), call).await;
        let outcome = outcome.expect("an acquire must not hang when the server is gone");
        assert!(outcome.is_err(), "{outcome:?}");
    }
    let release = store.release("s1", "a", shoal_core::lease::FencingToken(1));
    let outcome = tokio::time::timeout(Duration::from_secs(20), release).await;
    assert!(outcome.expect("a release must not hang").is_err());
}

/// The suite on two connections to a private `server`, then, the server stopped (dropped),
/// the calls that must fail.
async fn suite_then_gone(server: impl Sized, store: &dyn LeaseStore, other: &dyn LeaseStore) {
    suite(store, other).await;
    drop(server);
    calls_fail_once_the_server_is_gone(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_leases_pass_the_suite() {
    let dir = scratch("sqlite-leases");
    let path = dir.join("leases.db");
    let store = SqliteStore::open(&path).unwrap();
    let other = SqliteStore::open(&path).unwrap();
    suite(&store, &other).await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_leases_pass_the_suite_on_a_private_server() {
    let server = PgServer::start();
    let (store, other) = (server.connect().await, server.connect().await);
    suite_then_gone(server, &store, &other).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_leases_pass_the_suite_on_a_private_server() {
    let server = EtcdServer::start();
    let (store, other) = (server.connect().await, server.connect().await);
    suite_then_gone(server, &store, &other).await;
}
