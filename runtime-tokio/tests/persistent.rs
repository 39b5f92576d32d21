//! Persistent entities on loopback with a SQLite state store: an event-sourced counter keeps
//! its total across passivation, a panic and a node restart (recovering from a snapshot and the
//! events after it); a durable-state entity keeps its state; a newer version of a type reads
//! events an older one wrote; and a write fenced by a newer epoch stops the entity and moves
//! its shard, whose next incarnation recovers every acknowledged change.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{fast_membership, fast_settings, scratch};
use serde::{Deserialize, Serialize};
use shoal::state::StateKey;
use shoal::store::SqliteStore;
use shoal::{
    AskError, DurableState, DurableStateEntity, EntityContext, EntityId, EntityTypeConfig,
    EventSourced, EventSourcedEntity, Node, NodeBuilder, NodeEvent, Persist, PersistError,
    Snapshots, StateStore,
};
use shoal_core::{Epoch, Event};

const ASK: Duration = Duration::from_secs(10);

/// What the counter is sent.
#[derive(Debug, Deserialize, Serialize)]
enum Command {
    Add(u64),
    Get,
    Panic,
    Passivate,
}

/// An event-sourced counter (version 1 of its type: its events are plain amounts).
#[derive(Default, Deserialize, Serialize)]
struct Counter {
    total: u64,
}

impl EventSourced for Counter {
    type Command = Command;
    type Event = u64;
    type Reply = u64;

    fn decide(&self, ctx: &mut EntityContext, command: Command) -> Persist<u64, u64> {
        match command {
            Command::Add(n) => Persist::events(vec![n], self.total + n),
            Command::Get => Persist::reply(self.total),
            Command::Panic => panic!("asked to panic"),
            Command::Passivate => {
                ctx.passivate();
                Persist::reply(self.total)
            }
        }
    }

    fn apply(&mut self, amount: &u64) {
        self.total += amount;
    }
}

/// Version 2 of the counter's type: its events carry a note, and version 1's still read.
#[derive(Default, Deserialize, Serialize)]
struct CounterV2 {
    total: u64,
    notes: Vec<String>,
}

#[derive(Deserialize, Serialize)]
struct Added {
    amount: u64,
    note: String,
}

impl EventSourced for CounterV2 {
    type Command = Command;
    type Event = Added;
    type Reply = u64;
    const VERSION: u32 = 2;

    fn decide(&self, _: &mut EntityContext, command: Command) -> Persist<Added, u64> {
        match command {
            Command::Add(amount) => {
                let note = format!("added {amount}");
                Persist::events(vec![Added { amount, note }], self.total + amount)
            }
            _ => Persist::reply(self.total),
        }
    }

    fn apply(&mut self, event: &Added) {
        self.total += event.amount;
        self.notes.push(event.note.clone());
    }

    fn upcast_event(version: u32, bytes: &[u8]) -> Result<Added, String> {
        match version {
            1 => {
                let amount: u64 = postcard::from_bytes(bytes).map_err(|e| e.to_string())?;
                let note = "from version 1".into();
                Ok(Added { amount, note })
            }
            other => Err(format!("unknown version {other}")),
        }
    }

    fn upcast_state(version: u32, bytes: &[u8]) -> Result<Self, String> {
        let old: Counter = match version {
            1 => postcard::from_bytes(bytes).map_err(|e| e.to_string())?,
            other => return Err(format!("unknown version {other}")),
        };
        Ok(Self {
            total: old.total,
            notes: Vec::new(),
        })
    }
}

/// A durable-state register: `Some(text)` replaces it, `None` reads it.
#[derive(Default, Deserialize, Serialize)]
struct Register {
    text: String,
    writes: u64,
}

impl DurableState for Register {
    type Command = Option<String>;
    type Reply = (String, u64);

    fn handle(&mut self, _: &mut EntityContext, command: Option<String>) -> (String, u64) {
        if let Some(text) = command {
            self.text = text;
            self.writes += 1;
        }
        (self.text.clone(), self.writes)
    }
}

fn config(name: &str) -> EntityTypeConfig {
    let mut config = EntityTypeConfig::new(name);
    config.number_of_shards = 8;
    config
}

/// A one-node cluster on the state store at `path`, counters of version `v2` or 1.
async fn node(path: &Path, v2: bool) -> Node {
    let builder = NodeBuilder::new("test")
        .secret("test secret")
        .membership(fast_membership())
        .settings(fast_settings())
        .state_store(SqliteStore::open(path).expect("the store opens"))
        .durable_state(config("register"), |_| Register::default());
    let builder = if v2 {
        builder.event_sourced(config("counter"), Snapshots::Every(3), |_| {
            CounterV2::default()
        })
    } else {
        builder.event_sourced(config("counter"), Snapshots::Every(3), |_| {
            Counter::default()
        })
    };
    builder.start().await.expect("node starts")
}

async fn add(node: &Node, id: &str, n: u64) -> Result<u64, PersistError> {
    let counters = node
        .region::<EventSourcedEntity<Counter>>("counter")
        .unwrap();
    counters
        .entity_ref(id)
        .ask(&Command::Add(n), ASK)
        .await
        .expect("the counter answers")
}

async fn ask(
    node: &Node,
    id: &str,
    command: Command,
) -> Result<Result<u64, PersistError>, AskError> {
    let counters = node
        .region::<EventSourcedEntity<Counter>>("counter")
        .unwrap();
    counters.entity_ref(id).ask(&command, ASK).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_sourced_counter_keeps_its_total_across_passivation_panic_and_restart() {
    let dir = scratch("persistent-counter");
    let path = dir.join("state.db");
    let first = node(&path, false).await;
    let mut expected = 0;
    for n in 1..=10 {
        expected += n;
        assert_eq!(add(&first, "c1", n).await, Ok(expected));
    }
    // Passivated and started again: recovered from its snapshot and the events after it.
    assert_eq!(
        ask(&first, "c1", Command::Passivate).await.unwrap(),
        Ok(expected)
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(ask(&first, "c1", Command::Get).await.unwrap(), Ok(expected));
    // A panic restarts it from the store, not from an empty state.
    assert_eq!(
        ask(&first, "c1", Command::Panic).await,
        Err(AskError::EntityPanicked)
    );
    assert_eq!(add(&first, "c1", 100).await, Ok(expected + 100));
    expected += 100;
    // A durable-state entity keeps its state too.
    let registers = first
        .region::<DurableStateEntity<Register>>("register")
        .unwrap();
    let r1 = registers.entity_ref("r1");
    assert_eq!(
        r1.ask(&Some("a".into()), ASK).await.unwrap(),
        Ok(("a".into(), 1))
    );
    assert_eq!(
        r1.ask(&Some("b".into()), ASK).await.unwrap(),
        Ok(("b".into(), 2))
    );
    assert_eq!(
        r1.ask(&None, ASK).await.unwrap(),
        Ok(("b".into(), 2)),
        "a read saves nothing"
    );
    first.leave().await;

    // The whole cluster restarted on the same file.
    let second = node(&path, false).await;
    assert_eq!(
        ask(&second, "c1", Command::Get).await.unwrap(),
        Ok(expected)
    );
    let registers = second
        .region::<DurableStateEntity<Register>>("register")
        .unwrap();
    let read = registers.entity_ref("r1").ask(&None, ASK).await.unwrap();
    assert_eq!(read, Ok(("b".into(), 2)));
    let store = SqliteStore::open(&path).unwrap();
    let epoch = Epoch(u64::MAX >> 2);
    let key = StateKey {
        entity_type: "counter".into(),
        entity: EntityId::from("c1"),
        shard: shoal_core::shard_of(&EntityId::from("c1"), 8),
        epoch,
        lease_token: None,
    };
    assert_eq!(
        store.recover(&key).await.unwrap().last_seq(),
        11,
        "eleven events, one per acknowledged add"
    );

    // A newer incarnation claimed the shard (as a process the cluster believed dead might):
    // the running one's next write is refused, it stops, and its shard moves above that
    // epoch, where the counter recovers everything acknowledged.
    let mut events = second.events();
    let fenced = add(&second, "c1", 1).await;
    assert_eq!(fenced, Err(PersistError::Fenced(epoch.0)));
    let reported = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Ok(NodeEvent::Sharding(Event::WriteFenced { current, .. })) = events.recv().await
            {
                return current;
            }
        }
    })
    .await
    .expect("the fenced write is reported");
    assert_eq!(reported, epoch);
    common::eventually(
        Duration::from_secs(10),
        Duration::from_millis(200),
        || async {
            match ask(&second, "c1", Command::Get).await {
                Ok(Ok(total)) if total == expected => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    assert_eq!(add(&second, "c1", 1).await, Ok(expected + 1));
    second.leave().await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_version_of_a_type_reads_the_events_an_older_one_wrote() {
    let dir = scratch("persistent-versions");
    let path = dir.join("state.db");
    let old = node(&path, false).await;
    // Five events (a snapshot after the third) written by version 1.
    for n in 1..=5 {
        add(&old, "c2", n).await.unwrap();
    }
    old.leave().await;
    let new = node(&path, true).await;
    let counters = new
        .region::<EventSourcedEntity<CounterV2>>("counter")
        .unwrap();
    let total = counters.entity_ref("c2").ask(&Command::Add(10), ASK).await;
    assert_eq!(
        total.unwrap(),
        Ok(25),
        "version 1's snapshot and events, upcast"
    );
    new.leave().await;
    // And version 1 refuses what version 2 wrote, instead of misreading it.
    let older_again = node(&path, false).await;
    let counters = older_again
        .region::<EventSourcedEntity<Counter>>("counter")
        .unwrap();
    let refused = counters
        .entity_ref("c2")
        .ask(&Command::Get, Duration::from_secs(2))
        .await;
    assert!(
        matches!(
            refused,
            Err(AskError::Timeout) | Ok(Err(PersistError::Failed(_)))
        ),
        "{refused:?}"
    );
    older_again.abort().await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_persistent_type_needs_a_state_store() {
    let started = NodeBuilder::new("test")
        .secret("test secret")
        .event_sourced(config("counter"), Snapshots::Never, |_| Counter::default())
        .start()
        .await;
    let Err(error) = started else {
        panic!("a node with a persistent type and no state store started");
    };
    assert!(error.to_string().contains("state store"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_types_data_is_removed_only_once_no_member_runs_it() {
    let dir = scratch("persistent-removal");
    let path = dir.join("state.db");
    let running = node(&path, false).await;
    add(&running, "c3", 1).await.unwrap();
    let store = SqliteStore::open(&path).unwrap();
    let tool = NodeBuilder::new("test")
        .secret("test secret")
        .membership(fast_membership())
        .settings(fast_settings())
        .seed_nodes([running.address().to_string()])
        .state_store(store.clone())
        .start()
        .await
        .expect("the tool node starts");
    let counter = shoal_core::EntityType::from("counter");
    common::eventually(
        Duration::from_secs(10),
        Duration::from_millis(100),
        || async {
            let members = tool
                .view()
                .await
                .map_err(|e| e.to_string())?
                .members()
                .len();
            (members == 2)
                .then_some(())
                .ok_or_else(|| format!("{members} members"))
        },
    )
    .await;
    let refused = shoal::state::remove_type_data(&tool, &store, &counter).await;
    assert_eq!(
        refused,
        Err(shoal::state::RemoveError::Running(vec![running.member()]))
    );
    let c3 = EntityId::from("c3");
    assert_eq!(
        store.events(&counter, &c3).await.unwrap().len(),
        1,
        "nothing removed"
    );
    running.leave().await;
    common::eventually(
        Duration::from_secs(10),
        Duration::from_millis(100),
        || async {
            match shoal::state::remove_type_data(&tool, &store, &counter).await {
                Ok(removed) if removed > 0 => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    assert!(store.events(&counter, &c3).await.unwrap().is_empty());
    tool.leave().await;
    let _ = std::fs::remove_dir_all(dir);
}
