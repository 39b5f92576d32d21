//! Leases in the demo: the lease store the node processes and the harness share (`--lease`:
//! a SQLite file by default, PostgreSQL or etcd), used by lease-majority downing and, with
//! `--shard-leases`, by every shard of the counters and by their coordinator.

use std::path::{Path, PathBuf};
use std::time::Duration;

use shoal::lease::LeaseTerms;
use shoal::{EntityTypeConfig, NodeBuilder};

/// Where the leases are kept.
#[derive(Clone, Debug, Eq, PartialEq)]
pub(crate) enum LeaseSpec {
    /// One SQLite file all processes open.
    Sqlite(PathBuf),
    /// A PostgreSQL server (`postgres://...`; needs the `postgres` feature).
    Postgres(String),
    /// etcd members (`etcd://host:port[,host:port...]`; needs the `etcd` feature).
    Etcd(Vec<String>),
}

/// How the members use leases.
#[derive(Clone, Debug, Eq, PartialEq)]
pub(crate) struct Leasing {
    /// The store, if anything uses one.
    pub(crate) store: Option<LeaseSpec>,
    /// Whether each shard of the counters starts its entities only under its lease, and their
    /// coordinator allocates only under the type's.
    pub(crate) shard_leases: bool,
}

/// The counters' shard leases: a stall of a node process (the tour's SIGSTOP lasts up to
/// 4.5 s) and a forced stop after it fit in the safety margin, and a grant stays valid through
/// such a stall (10 s less the margin), so the paused node keeps its shards; a killed node's
/// shards move once its grants have run out, at most the ttl after it died.
fn shard_lease_terms() -> LeaseTerms {
    LeaseTerms {
        ttl: Duration::from_secs(10),
        renew_every: Duration::from_secs(1),
        safety_margin: Duration::from_secs(5),
        // A new home refused while the old grant runs asks again soon after it has run out.
        retry_interval: Duration::from_millis(500),
        operation_timeout: Duration::from_secs(2),
        ..LeaseTerms::default()
    }
}

impl LeaseSpec {
    /// Parses `--lease`: `sqlite` (a file in the run's directory), `sqlite:<path>`, a
    /// `postgres://` URL or `etcd://host:port[,host:port...]`.
    pub(crate) fn parse(spec: &str, dir: &Path) -> Result<Self, String> {
        match spec {
            "sqlite" => Ok(Self::Sqlite(dir.join("leases.db"))),
            _ if spec.starts_with("sqlite:") => Ok(Self::Sqlite(spec["sqlite:".len()..].into())),
            _ if spec.starts_with("postgres://") || spec.starts_with("postgresql://") => {
                Ok(Self::Postgres(spec.into()))
            }
            _ if spec.starts_with("etcd://") => {
                let hosts = spec["etcd://".len()..].split(',');
                let endpoints: Vec<String> = hosts
                    .filter(|h| !h.is_empty())
                    .map(|h| format!("http://{h}"))
                    .collect();
                match endpoints.is_empty() {
                    true => Err("--lease etcd:// needs host:port".into()),
                    false => Ok(Self::Etcd(endpoints)),
                }
            }
            other => Err(format!(
                "--lease takes sqlite, sqlite:<path>, postgres://... or etcd://host:port, not {other:?}"
            )),
        }
    }

    /// The form `parse` reads back (a node process's argument).
    pub(crate) fn arg(&self) -> String {
        match self {
            Self::Sqlite(path) => format!("sqlite:{}", path.display()),
            Self::Postgres(url) => url.clone(),
            Self::Etcd(endpoints) => {
                let hosts: Vec<&str> = endpoints
                    .iter()
                    .map(|e| e.trim_start_matches("http://"))
                    .collect();
                format!("etcd://{}", hosts.join(","))
            }
        }
    }

    /// For the summary (a URL may carry a password: only the kind is shown).
    pub(crate) fn describe(&self) -> &'static str {
        match self {
            Self::Sqlite(_) => "leases in SQLite",
            Self::Postgres(_) => "leases in PostgreSQL",
            Self::Etcd(_) => "leases in etcd",
        }
    }

    async fn open(&self, builder: NodeBuilder) -> Result<NodeBuilder, String> {
        match self {
            Self::Sqlite(path) => {
                let store = shoal::store::SqliteStore::open(path)
                    .map_err(|e| format!("lease store {}: {e}", path.display()))?;
                Ok(builder.lease_store(store))
            }
            #[cfg(feature = "postgres")]
            Self::Postgres(url) => {
                let store = shoal::store::PostgresStore::connect(url.clone())
                    .await
                    .map_err(|e| format!("lease store (PostgreSQL): {e}"))?;
                Ok(builder.lease_store(store))
            }
            #[cfg(not(feature = "postgres"))]
            Self::Postgres(_) => Err(
                "a PostgreSQL lease store needs the example built with --features postgres".into(),
            ),
            #[cfg(feature = "etcd")]
            Self::Etcd(endpoints) => {
                let store =
                    shoal::store::EtcdLeaseStore::connect(endpoints, Duration::from_secs(2))
                        .await
                        .map_err(|e| format!("lease store (etcd): {e}"))?;
                Ok(builder.lease_store(store))
            }
            #[cfg(not(feature = "etcd"))]
            Self::Etcd(_) => {
                Err("an etcd lease store needs the example built with --features etcd".into())
            }
        }
    }
}

impl Leasing {
    /// The form `parse` reads back: the store's argument (or `none`), then `shard-leases` or
    /// `no-shard-leases`.
    pub(crate) fn args(&self) -> [String; 2] {
        let store = self
            .store
            .as_ref()
            .map_or_else(|| "none".into(), LeaseSpec::arg);
        let shards = if self.shard_leases {
            "shard-leases"
        } else {
            "no-shard-leases"
        };
        [store, shards.into()]
    }

    /// Parses what `args` wrote.
    pub(crate) fn parse(store: &str, shards: &str, dir: &Path) -> Result<Self, String> {
        let store = match store {
            "none" => None,
            spec => Some(LeaseSpec::parse(spec, dir)?),
        };
        let shard_leases = match shards {
            "shard-leases" => true,
            "no-shard-leases" => false,
            other => return Err(format!("bad shard lease argument {other:?}")),
        };
        Ok(Self {
            store,
            shard_leases,
        })
    }

    /// `builder` with the lease store opened, if anything uses one.
    pub(crate) async fn open(&self, builder: NodeBuilder) -> Result<NodeBuilder, String> {
        match &self.store {
            Some(store) => store.open(builder).await,
            None => Ok(builder),
        }
    }

    /// The counters' configuration with their shard and coordinator leases, if asked for.
    /// The coordinator's has the same terms: a coordinator cut off stops allocating within
    /// them, and a new one waits at most the ttl for the old grant.
    pub(crate) fn configure(&self, mut config: EntityTypeConfig) -> EntityTypeConfig {
        if self.shard_leases {
            config.shard_lease = Some(shard_lease_terms());
            config.coordinator_lease = Some(shard_lease_terms());
        }
        config
    }

    /// For the summary.
    pub(crate) fn describe(&self) -> String {
        match (&self.store, self.shard_leases) {
            (None, _) => String::new(),
            (Some(store), false) => format!(", {}", store.describe()),
            (Some(store), true) => format!(", shard and coordinator leases, {}", store.describe()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_store_and_its_use_survive_the_member_command_line() {
        let dir = Path::new("/run/x");
        for spec in [
            "sqlite",
            "sqlite:/tmp/l.db",
            "postgres://u@h/db",
            "etcd://a:1,b:2",
        ] {
            let leasing = Leasing {
                store: Some(LeaseSpec::parse(spec, dir).unwrap()),
                shard_leases: spec.starts_with('e'),
            };
            let [store, shards] = leasing.args();
            assert_eq!(Leasing::parse(&store, &shards, dir).unwrap(), leasing);
        }
        let none = Leasing::parse("none", "no-shard-leases", dir).unwrap();
        assert_eq!(none.store, None);
        assert!(LeaseSpec::parse("etcd://", dir).is_err());
        let bad = LeaseSpec::parse("redis://x", dir).unwrap_err();
        assert!(bad.contains("redis://x"), "{bad}");
    }
}
