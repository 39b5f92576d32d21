//! Remembering and persistence in the demo: the store the node processes share (one SQLite
//! file by default, or a PostgreSQL server), where the counters' events and remembered ids
//! live, the *quiet* counters (messaged once when the run starts, never
//! again), and the check after the SIGKILL: every quiet counter that ran on the killed node
//! runs again on another node, though nobody messaged it: remembering restarted it.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use shoal::{
    EntityId, EntityType, EntityTypeConfig, NodeBuilder, Region, RememberSettings, StateStore,
};

use crate::journal::{self, Fact};
use crate::member::{COUNTER, Counter, CounterOp, Incremented, entity_id};

/// Where the nodes keep their counters' events and remember them.
#[derive(Clone, Debug, Eq, PartialEq)]
pub(crate) enum StoreSpec {
    /// One SQLite file all node processes open (WAL mode).
    Sqlite(PathBuf),
    /// A PostgreSQL server (`postgres://...`; needs the `postgres` feature).
    Postgres(String),
}

impl StoreSpec {
    /// Parses `--store`: `sqlite` (a file in the run's directory), `sqlite:<path>`, or a
    /// `postgres://` URL.
    pub(crate) fn parse(spec: &str, dir: &Path) -> Result<Self, String> {
        match spec {
            "sqlite" => Ok(Self::Sqlite(dir.join("state.db"))),
            _ if spec.starts_with("sqlite:") => Ok(Self::Sqlite(spec["sqlite:".len()..].into())),
            _ if spec.starts_with("postgres://") || spec.starts_with("postgresql://") => {
                Ok(Self::Postgres(spec.into()))
            }
            other => Err(format!(
                "--store takes sqlite, sqlite:<path> or postgres://..., not {other:?}"
            )),
        }
    }

    /// The form `parse` reads back (a node process's argument).
    pub(crate) fn arg(&self) -> String {
        match self {
            Self::Sqlite(path) => format!("sqlite:{}", path.display()),
            Self::Postgres(url) => url.clone(),
        }
    }

    /// For the summary.
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::Sqlite(path) => {
                format!("event sourced and remembered in SQLite {}", path.display())
            }
            // The URL may carry a password: only its kind is shown.
            Self::Postgres(_) => "event sourced and remembered in PostgreSQL".into(),
        }
    }

    /// The counter type's configuration.
    pub(crate) fn counter_config(&self) -> EntityTypeConfig {
        let mut config = EntityTypeConfig::new(COUNTER);
        config.remember = Some(RememberSettings::default());
        config.persistent = true;
        config
    }

    /// `builder` with the store opened.
    pub(crate) async fn open(&self, builder: NodeBuilder) -> Result<NodeBuilder, String> {
        match self {
            Self::Sqlite(path) => {
                let store = shoal::store::SqliteStore::open(path)
                    .map_err(|e| format!("state store {}: {e}", path.display()))?;
                Ok(builder.state_store(store))
            }
            #[cfg(feature = "postgres")]
            Self::Postgres(url) => {
                let store = shoal::store::PostgresStore::connect(url.clone())
                    .await
                    .map_err(|e| format!("state store (PostgreSQL): {e}"))?;
                Ok(builder.state_store(store))
            }
            #[cfg(not(feature = "postgres"))]
            Self::Postgres(_) => {
                Err("a PostgreSQL store needs the example built with --features postgres".into())
            }
        }
    }
}

impl StoreSpec {
    /// Every counter's events in the store (`0..entities`), each `(sender, seq)` in journal
    /// order: what its total must count. Read after the run, claiming nothing.
    pub(crate) async fn journals(&self, entities: u32) -> Result<Vec<Vec<(u32, u64)>>, String> {
        let store: Box<dyn StateStore> = match self {
            Self::Sqlite(path) => Box::new(
                shoal::store::SqliteStore::open(path)
                    .map_err(|e| format!("state store {}: {e}", path.display()))?,
            ),
            #[cfg(feature = "postgres")]
            Self::Postgres(url) => Box::new(
                shoal::store::PostgresStore::connect(url.clone())
                    .await
                    .map_err(|e| format!("state store (PostgreSQL): {e}"))?,
            ),
            #[cfg(not(feature = "postgres"))]
            Self::Postgres(_) => return Err("PostgreSQL needs --features postgres".into()),
        };
        let entity_type = EntityType::new(COUNTER);
        let mut journals = Vec::with_capacity(entities as usize);
        for entity in 0..entities {
            let id = EntityId::from(entity_id(entity));
            let events = (store.events(&entity_type, &id).await)
                .map_err(|e| format!("events of {id}: {e}"))?;
            let decoded: Result<Vec<(u32, u64)>, String> = events
                .iter()
                .map(|(_, stored)| {
                    let event: Incremented = postcard::from_bytes(&stored.bytes)
                        .map_err(|e| format!("an event of {id}: {e}"))?;
                    Ok((event.sender, event.seq))
                })
                .collect();
            journals.push(decoded?);
        }
        Ok(journals)
    }
}

/// The quiet counters of a run with `entities` busy ones: the next twentieth (at least 10).
pub(crate) fn quiet(entities: u32) -> Range<u32> {
    entities..entities + (entities / 20).max(10)
}

/// Messages each quiet counter once (it starts, and is remembered), within `bound`.
pub(crate) async fn touch(
    region: &Region<Counter>,
    quiet: Range<u32>,
    bound: Duration,
) -> Result<(), String> {
    let deadline = Instant::now() + bound;
    for n in quiet {
        let counter = region.entity_ref(entity_id(n));
        while counter
            .ask(&CounterOp::Get, Duration::from_secs(1))
            .await
            .is_err()
        {
            if Instant::now() >= deadline {
                return Err(format!("quiet counter {n} did not answer within {bound:?}"));
            }
        }
    }
    Ok(())
}

/// The quiet counters running on `node` at `at` (journal clock), by the journals.
fn running_on(facts: &[Fact], quiet: &Range<u32>, node: u32, at: u64) -> BTreeSet<u32> {
    let mut last: BTreeMap<u32, (u32, bool)> = BTreeMap::new();
    for fact in facts {
        match *fact {
            Fact::Started {
                entity,
                node,
                at: t,
            } if quiet.contains(&entity) && t <= at => {
                last.insert(entity, (node, true));
            }
            Fact::Stopped {
                entity,
                node,
                at: t,
            } if quiet.contains(&entity) && t <= at && last.get(&entity) == Some(&(node, true)) => {
                last.insert(entity, (node, false));
            }
            _ => {}
        }
    }
    last.into_iter()
        .filter(|(_, (n, running))| *n == node && *running)
        .map(|(entity, _)| entity)
        .collect()
}

/// Waits (at most `bound`) until every quiet counter that ran on `node` when it was killed
/// at `killed_at` (journal clock) has started on another node. Returns how many, and when the
/// last of them started, after the kill.
pub(crate) async fn await_restarted(
    dir: &Path,
    quiet: Range<u32>,
    (node, killed_at): (u32, u64),
    bound: Duration,
) -> Result<(usize, Duration), String> {
    let deadline = Instant::now() + bound;
    let facts = journal::read_all(dir).map_err(|e| format!("journals: {e}"))?;
    let expected = running_on(&facts, &quiet, node, killed_at);
    loop {
        let facts = journal::read_all(dir).map_err(|e| format!("journals: {e}"))?;
        let mut back: BTreeMap<u32, u64> = BTreeMap::new();
        for fact in &facts {
            if let Fact::Started {
                entity,
                node: n,
                at,
            } = *fact
            {
                if n != node && at > killed_at && expected.contains(&entity) {
                    back.entry(entity).or_insert(at);
                }
            }
        }
        if back.len() == expected.len() {
            let last = back.values().max().copied().unwrap_or(killed_at);
            let after = Duration::from_micros(last.saturating_sub(killed_at));
            return Ok((expected.len(), after));
        }
        if Instant::now() >= deadline {
            let missing: Vec<u32> = expected
                .iter()
                .filter(|e| !back.contains_key(e))
                .copied()
                .take(10)
                .collect();
            return Err(format!(
                "{} of {} remembered counters of node {node} did not run again within {bound:?} \
                 (first missing: {missing:?})",
                expected.len() - back.len(),
                expected.len()
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_counters_running_on_a_node_are_those_started_there_and_not_stopped() {
        let facts = [
            Fact::Started {
                entity: 10,
                node: 1,
                at: 5,
            },
            Fact::Started {
                entity: 11,
                node: 1,
                at: 5,
            },
            Fact::Stopped {
                entity: 11,
                node: 1,
                at: 6,
            },
            Fact::Started {
                entity: 12,
                node: 2,
                at: 5,
            },
            Fact::Started {
                entity: 13,
                node: 1,
                at: 50,
            },
            Fact::Started {
                entity: 3,
                node: 1,
                at: 5,
            },
        ];
        let running = running_on(&facts, &(10..20), 1, 20);
        assert_eq!(running, BTreeSet::from([10]));
    }

    #[test]
    fn store_specs_round_trip_and_bad_ones_are_named() {
        let dir = Path::new("/tmp/run");
        for spec in ["sqlite:/data/r.db", "postgres://u@localhost:5432/db"] {
            assert_eq!(StoreSpec::parse(spec, dir).unwrap().arg(), spec);
        }
        assert_eq!(
            StoreSpec::parse("sqlite", dir),
            Ok(StoreSpec::Sqlite(dir.join("state.db")))
        );
        // The counters are event sourced: they need a store.
        assert!(StoreSpec::parse("none", dir).is_err());
        assert!(
            StoreSpec::parse("redis://x", dir)
                .unwrap_err()
                .contains("redis://x")
        );
    }
}
