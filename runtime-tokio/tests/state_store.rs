//! One test-suite for every state store, run against SQLite (a file of its own) and against a
//! private PostgreSQL server this test starts: the journal's sequence rule (no gap, no
//! duplicate), fencing by the shard's epoch for recoveries and writes, snapshots, durable
//! states, a group of writes with mixed outcomes, two writers at different epochs racing on one
//! entity, deleting a type's data, delivery marks and reliable producers' durable queues (the
//! lease stores have a suite of their own, `lease_stores`).

mod common;

use common::postgres::PgServer;
use common::scratch;
use shoal::state::{Recovered, StateKey, StateStore, StateWrite, Versioned};

use shoal::store::{Delivered, ProducerQueue, QueueState, QueuedStream};
use shoal::store::{SqliteStore, StoreError};
use shoal_core::delivery::{Mark, ProducerId, Seq};
use shoal_core::{EntityId, EntityType, Epoch, ShardId};

fn key(kind: &str, entity: &str, epoch: u64) -> StateKey {
    StateKey {
        entity_type: EntityType::from(kind),
        entity: EntityId::from(entity),
        shard: ShardId(3),
        epoch: Epoch(epoch),
        lease_token: None,
    }
}

fn value(byte: u8) -> Versioned {
    Versioned {
        version: 1,
        bytes: vec![byte],
    }
}

fn events(first_seq: u64, bytes: &[u8], snapshot: Option<u8>) -> StateWrite {
    StateWrite::Events {
        first_seq,
        events: bytes.iter().map(|b| value(*b)).collect(),
        snapshot: snapshot.map(value),
        delivered: None,
    }
}

/// `write` as the effect of message `seq` of `producer`'s `session`.
fn delivered(mut write: StateWrite, producer: &str, session: u64, seq: u64) -> StateWrite {
    let mark = Some(Delivered {
        producer: ProducerId::new(producer),
        mark: Mark {
            session,
            seq: Seq(seq),
        },
    });
    match &mut write {
        StateWrite::Events { delivered, .. } | StateWrite::State { delivered, .. } => {
            *delivered = mark;
        }
    }
    write
}

async fn write_one(
    store: &dyn StateStore,
    key: StateKey,
    write: StateWrite,
) -> Result<(), StoreError> {
    let mut outcomes = store
        .write(&[(key, write)])
        .await
        .expect("the store answers");
    outcomes.pop().expect("one outcome")
}

/// A stored value as a sequence number and its first byte.
type Seen = (u64, u8);

/// The sequence numbers and first bytes of what a recovery read.
fn seqs(recovered: &Recovered) -> (Option<Seen>, Vec<Seen>) {
    let snapshot = (recovered.snapshot.as_ref()).map(|(seq, v)| (*seq, v.bytes[0]));
    let events = recovered
        .events
        .iter()
        .map(|(seq, v)| (*seq, v.bytes[0]))
        .collect();
    (snapshot, events)
}

async fn journal_rules(store: &dyn StateStore) {
    let k = key("journal", "a", 5);
    let empty = store.recover(&k).await.unwrap();
    assert_eq!(empty, Recovered::default());
    write_one(store, k.clone(), events(1, &[10, 11], None))
        .await
        .unwrap();
    write_one(store, k.clone(), events(3, &[12], None))
        .await
        .unwrap();
    let gap = write_one(store, k.clone(), events(5, &[14], None)).await;
    assert_eq!(
        gap,
        Err(StoreError::Conflict {
            expected: 4,
            found: 3
        })
    );
    // Listing the events claims nothing: a write at an older epoch still lands afterwards.
    let listed = store.events(&k.entity_type, &k.entity).await.unwrap();
    assert_eq!(
        listed.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    let duplicate = write_one(store, k.clone(), events(3, &[99], None)).await;
    assert!(
        matches!(duplicate, Err(StoreError::Conflict { .. })),
        "{duplicate:?}"
    );
    let read = store.recover(&k).await.unwrap();
    assert_eq!(seqs(&read), (None, vec![(1, 10), (2, 11), (3, 12)]));
    assert_eq!(read.last_seq(), 3);
    // A snapshot replaces the start of recovery; events after it follow.
    write_one(store, k.clone(), events(4, &[13, 14], Some(50)))
        .await
        .unwrap();
    write_one(store, k.clone(), events(6, &[15], None))
        .await
        .unwrap();
    let read = store.recover(&k).await.unwrap();
    assert_eq!(seqs(&read), (Some((5, 50)), vec![(6, 15)]));
    assert_eq!(read.last_seq(), 6);
}

async fn fencing(store: &dyn StateStore) {
    let old = key("fencing", "a", 5);
    write_one(store, old.clone(), events(1, &[1], None))
        .await
        .unwrap();
    // A newer incarnation recovers: from then on the old one cannot write, nor recover.
    let new = key("fencing", "a", 7);
    assert_eq!(store.recover(&new).await.unwrap().last_seq(), 1);
    let refused = write_one(store, old.clone(), events(2, &[2], None)).await;
    assert_eq!(
        refused,
        Err(StoreError::Fenced {
            refused: Epoch(5),
            current: Epoch(7)
        })
    );
    assert!(matches!(
        store.recover(&old).await,
        Err(StoreError::Fenced { .. })
    ));
    write_one(store, new.clone(), events(2, &[3], None))
        .await
        .unwrap();
    // The epoch is the shard's: another entity of the shard is fenced at 5 too.
    let sibling = key("fencing", "b", 5);
    assert!(matches!(
        write_one(store, sibling, events(1, &[1], None)).await,
        Err(StoreError::Fenced { .. })
    ));
    // A writer at a newer epoch than any recovery raises it.
    let newer = key("fencing", "b", 9);
    write_one(store, newer, events(1, &[4], None))
        .await
        .unwrap();
    assert!(matches!(
        write_one(store, new, events(3, &[5], None)).await,
        Err(StoreError::Fenced { .. })
    ));
}

async fn durable_states(store: &dyn StateStore) {
    let k = key("durable", "a", 5);
    let state = |revision, byte| StateWrite::State {
        revision,
        state: value(byte),
        delivered: None,
    };
    write_one(store, k.clone(), state(1, 1)).await.unwrap();
    write_one(store, k.clone(), state(2, 2)).await.unwrap();
    let stale = write_one(store, k.clone(), state(2, 9)).await;
    assert_eq!(
        stale,
        Err(StoreError::Conflict {
            expected: 1,
            found: 2
        })
    );
    let read = store.recover(&k).await.unwrap();
    assert_eq!(seqs(&read), (Some((2, 2)), vec![]));
}

async fn a_group_has_one_outcome_per_write(store: &dyn StateStore) {
    let fenced = key("group", "fenced", 3);
    store.recover(&key("group", "fenced", 4)).await.unwrap();
    let group = [
        (key("group", "a", 4), events(1, &[1], None)),
        (key("group", "b", 4), events(2, &[1], None)),
        (fenced, events(1, &[1], None)),
        (key("group", "a", 4), events(2, &[2], None)),
    ];
    let outcomes = store.write(&group).await.unwrap();
    assert!(outcomes[0].is_ok(), "{outcomes:?}");
    assert!(
        matches!(outcomes[1], Err(StoreError::Conflict { .. })),
        "{outcomes:?}"
    );
    assert!(
        matches!(outcomes[2], Err(StoreError::Fenced { .. })),
        "{outcomes:?}"
    );
    assert!(
        outcomes[3].is_ok(),
        "a later write of the group sees an earlier one"
    );
    let read = store.recover(&key("group", "a", 4)).await.unwrap();
    assert_eq!(seqs(&read), (None, vec![(1, 1), (2, 2)]));
    assert_eq!(
        store.recover(&key("group", "b", 4)).await.unwrap(),
        Recovered::default()
    );
}

/// Two incarnations of one entity, at epochs 5 and 7, write through two handles at once: every
/// write of the older after the newer recovered is refused, the newer's all land, and the
/// journal has no gap and no duplicate.
async fn two_writers_race(store: &dyn StateStore, other: &dyn StateStore) {
    for round in 0..20 {
        let entity = format!("race-{round}");
        let old = key("race", &entity, 5 + 10 * round);
        let new = key("race", &entity, 7 + 10 * round);
        store.recover(&old).await.unwrap();
        let older = async {
            let mut accepted = 0;
            for seq in 1..=20 {
                match write_one(store, old.clone(), events(seq, &[5], None)).await {
                    Ok(()) => accepted += 1,
                    Err(StoreError::Fenced { current, .. }) => {
                        assert_eq!(current, new.epoch);
                        break;
                    }
                    Err(other) => panic!("older writer: {other}"),
                }
            }
            accepted
        };
        let newer = async {
            let last = other.recover(&new).await.unwrap().last_seq();
            for seq in last + 1..=last + 10 {
                write_one(other, new.clone(), events(seq, &[7], None))
                    .await
                    .unwrap();
            }
            last
        };
        let (accepted, seen) = tokio::join!(older, newer);
        assert_eq!(
            accepted, seen,
            "the older wrote only before the newer recovered"
        );
        let read = store.recover(&new).await.unwrap();
        let (_, journal) = seqs(&read);
        let expected: Vec<Seen> = (1..=accepted)
            .map(|seq| (seq, 5))
            .chain((accepted + 1..=accepted + 10).map(|seq| (seq, 7)))
            .collect();
        assert_eq!(journal, expected);
    }
}

async fn deleting_a_type(store: &dyn StateStore) {
    let gone = key("deleted", "a", 5);
    write_one(store, gone.clone(), events(1, &[1, 2], Some(9)))
        .await
        .unwrap();
    let kept = key("kept", "a", 5);
    write_one(store, kept.clone(), events(1, &[1], None))
        .await
        .unwrap();
    let deleted = store.delete_type(&gone.entity_type).await.unwrap();
    assert!(
        deleted >= 3,
        "two events, a snapshot and the shard's epoch: {deleted}"
    );
    // The type starts over: its epochs went with it.
    let again = key("deleted", "a", 1);
    assert_eq!(store.recover(&again).await.unwrap(), Recovered::default());
    write_one(store, again, events(1, &[3], None))
        .await
        .unwrap();
    assert_eq!(store.recover(&kept).await.unwrap().last_seq(), 1);
}

/// Delivery marks ride in the write that carries the message's effect: recovered with the
/// state, moved only by a write that lands (not by a fenced or out-of-sequence one), one per
/// producer, and deleted with the type.
async fn delivery_marks(store: &dyn StateStore) {
    let k = key("marked", "a", 2);
    write_one(
        store,
        k.clone(),
        delivered(events(1, &[1], None), "p", 7, 1),
    )
    .await
    .unwrap();
    write_one(
        store,
        k.clone(),
        delivered(events(2, &[2], Some(2)), "p", 7, 2),
    )
    .await
    .unwrap();
    write_one(
        store,
        k.clone(),
        delivered(events(3, &[3], None), "q", 1, 5),
    )
    .await
    .unwrap();
    let refused = write_one(
        store,
        k.clone(),
        delivered(events(9, &[4], None), "p", 7, 3),
    )
    .await;
    assert!(matches!(refused, Err(StoreError::Conflict { .. })));
    let stale = key("marked", "a", 1);
    let fenced = write_one(store, stale, delivered(events(4, &[4], None), "p", 7, 3)).await;
    assert!(matches!(fenced, Err(StoreError::Fenced { .. })));
    let recovered = store.recover(&k).await.unwrap();
    let marks: Vec<(String, Mark)> = recovered
        .delivered
        .iter()
        .map(|(producer, mark)| (producer.to_string(), mark))
        .collect();
    let mark = |session, seq| Mark {
        session,
        seq: Seq(seq),
    };
    assert_eq!(
        marks,
        [("p".to_string(), mark(7, 2)), ("q".to_string(), mark(1, 5))]
    );
    // A durable state's write carries its mark the same way.
    let d = key("marked", "d", 2);
    let state = StateWrite::State {
        revision: 1,
        state: value(1),
        delivered: None,
    };
    write_one(store, d.clone(), delivered(state, "p", 8, 1))
        .await
        .unwrap();
    assert_eq!(
        store
            .recover(&d)
            .await
            .unwrap()
            .delivered
            .of(&ProducerId::new("p")),
        mark(8, 1)
    );
    store.delete_type(&k.entity_type).await.unwrap();
    let again = key("marked", "a", 1);
    assert!(store.recover(&again).await.unwrap().delivered.is_empty());
}

/// A producer's durable queue: its session kept from its first opening, what each entity
/// numbered, and the messages not yet confirmed, in order.
async fn producer_queues(queue: &dyn ProducerQueue) {
    let opened = queue.open("p", 41).await.unwrap();
    assert_eq!(
        opened,
        QueueState {
            session: 41,
            streams: Vec::new()
        }
    );
    let (a, b) = (EntityId::from("a"), EntityId::from("b"));
    let messages = [
        (a.clone(), 1, vec![1]),
        (a.clone(), 2, vec![2]),
        (b.clone(), 1, vec![9]),
        (a.clone(), 3, vec![3]),
    ];
    queue.push("p", &messages).await.unwrap();
    queue.confirm("p", &[(a.clone(), 2)]).await.unwrap();
    let again = queue.open("p", 77).await.unwrap();
    let stream = |entity: &EntityId, numbered, unconfirmed: &[u8]| QueuedStream {
        entity: entity.clone(),
        numbered,
        unconfirmed: unconfirmed.iter().map(|b| vec![*b]).collect(),
    };
    assert_eq!(
        again,
        QueueState {
            session: 41,
            streams: vec![stream(&a, 3, &[3]), stream(&b, 1, &[9])],
        },
        "the session stays; what was confirmed went"
    );
    queue
        .confirm("p", &[(a.clone(), 3), (b.clone(), 1)])
        .await
        .unwrap();
    let drained = queue.open("p", 78).await.unwrap();
    assert_eq!(
        drained.streams,
        vec![stream(&a, 3, &[]), stream(&b, 1, &[])]
    );
    // A message numbered twice is refused, with nothing of its transaction kept.
    let twice = [(b.clone(), 2, vec![5]), (b.clone(), 2, vec![6])];
    assert!(queue.push("p", &twice).await.is_err());
    assert_eq!(queue.open("p", 79).await.unwrap(), drained);
    assert_eq!(queue.open("q", 5).await.unwrap().session, 5, "per producer");
}

async fn suite(store: &dyn StateStore, other: &dyn StateStore) {
    journal_rules(store).await;
    fencing(store).await;
    durable_states(store).await;
    a_group_has_one_outcome_per_write(store).await;
    two_writers_race(store, other).await;
    deleting_a_type(store).await;
    delivery_marks(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_state_store_passes_the_suite() {
    let dir = scratch("sqlite-state");
    let path = dir.join("state.db");
    let store = SqliteStore::open(&path).unwrap();
    let other = SqliteStore::open(&path).unwrap();
    suite(&store, &other).await;
    producer_queues(&store).await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_state_store_passes_the_suite_on_a_private_server() {
    let server = PgServer::start();
    let store = server.connect().await;
    let other = server.connect().await;
    suite(&store, &other).await;
    producer_queues(&store).await;
}
