//! How long a crashed node's remembered entities take to run again: three nodes in one process
//! on loopback share a remember store; the node about to crash hosts `--entities` (10,000)
//! remembered entities; it is aborted, and nobody messages them. The figures: from the crash
//! to the first restart (failure detection, downing, removal margin: membership's part), from
//! the first restart to the last (the store's part: loading each shard, starting its entities
//! at the recovery strategy's pace), and the whole.
//!
//! `cargo run --release -p shoal --example remember_recovery [--features postgres] --
//! [--entities N] [--store sqlite|postgres://...] [--recovery all|constant:N:MS]`

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use shoal::{
    Entity, EntityContext, EntityId, EntityTypeConfig, MembershipSettings, Node, NodeBuilder,
    RecoveryStrategy, RememberSettings, SeedNode, ShardingSettings,
};
use tokio::sync::mpsc;

const SHARDS: u32 = 60;
const VICTIM: usize = 2;

/// The entity type, new in every run: a store kept from an earlier run (a PostgreSQL server)
/// holds nothing of it.
fn type_name() -> String {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!("quiet-{}", since_epoch.as_millis())
}

struct Quiet;

impl Entity for Quiet {
    type Message = ();
    type Reply = ();

    async fn handle(&mut self, _ctx: &mut EntityContext, (): ()) {}
}

struct Flags {
    type_name: String,
    entities: usize,
    store: String,
    recovery: RecoveryStrategy,
}

fn flags() -> Result<Flags, String> {
    let mut flags = Flags {
        type_name: type_name(),
        entities: 10_000,
        store: "sqlite".into(),
        recovery: RememberSettings::default().recovery,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--entities" => {
                flags.entities = value()?.parse().map_err(|_| "--entities needs a number")?;
            }
            "--store" => flags.store = value()?,
            "--recovery" => flags.recovery = recovery(&value()?)?,
            other => return Err(format!("unknown flag {other:?}")),
        }
    }
    Ok(flags)
}

fn recovery(spec: &str) -> Result<RecoveryStrategy, String> {
    if spec == "all" {
        return Ok(RecoveryStrategy::AllAtOnce);
    }
    let bad = || format!("--recovery takes all or constant:N:MS, not {spec:?}");
    let mut parts = spec.strip_prefix("constant:").ok_or_else(bad)?.split(':');
    let number = parts.next().and_then(|n| n.parse().ok()).ok_or_else(bad)?;
    let ms = parts.next().and_then(|n| n.parse().ok()).ok_or_else(bad)?;
    Ok(RecoveryStrategy::Constant {
        number,
        every: Duration::from_millis(ms),
    })
}

/// Entity starts: `(node index, entity, when)`.
type Starts = mpsc::UnboundedSender<(usize, EntityId, Instant)>;

async fn node(index: usize, seeds: &[String], flags: &Flags, starts: &Starts) -> Node {
    let name = flags.type_name.clone();
    let membership = MembershipSettings::lan(Vec::<SeedNode>::new());
    let settings = ShardingSettings {
        down_removal_margin: Duration::from_secs(2),
        ..ShardingSettings::default()
    };
    let mut config = EntityTypeConfig::new(name);
    config.number_of_shards = SHARDS;
    config.passivate_idle_after = None;
    config.remember = Some(RememberSettings {
        recovery: flags.recovery,
        ..RememberSettings::default()
    });
    let starts = starts.clone();
    let builder = NodeBuilder::new("recovery")
        .seed_nodes(seeds.iter().cloned())
        .membership(membership)
        .settings(settings)
        .entity(config, move |id| {
            let _ = starts.send((index, id.clone(), Instant::now()));
            Quiet
        });
    let builder = if let Some(url) = flags.store.strip_prefix("postgres") {
        postgres(builder, &format!("postgres{url}")).await
    } else {
        let path = std::env::temp_dir().join(format!("shoal-recovery-{}.db", std::process::id()));
        builder.remember_store(shoal::store::SqliteStore::open(&path).expect("SQLite store"))
    };
    builder.start().await.expect("node starts")
}

#[cfg(feature = "postgres")]
async fn postgres(builder: NodeBuilder, url: &str) -> NodeBuilder {
    let store = shoal::store::PostgresStore::connect(url)
        .await
        .expect("PostgreSQL store");
    builder.remember_store(store)
}

#[cfg(not(feature = "postgres"))]
async fn postgres(_: NodeBuilder, _: &str) -> NodeBuilder {
    panic!("a PostgreSQL store needs --features postgres");
}

/// The shards `node` hosts.
async fn shards_of(node: &Node, name: &str) -> BTreeSet<u32> {
    let region = node.region::<Quiet>(name).unwrap();
    let state = region.local_state().await.expect("region state");
    state.into_iter().map(|(shard, _)| shard.0).collect()
}

#[tokio::main]
async fn main() {
    let flags = match flags() {
        Ok(flags) => flags,
        Err(why) => {
            eprintln!("{why}");
            std::process::exit(2);
        }
    };
    let (starts, mut started) = mpsc::unbounded_channel();
    let first = node(0, &[], &flags, &starts).await;
    let seeds = vec![first.address().to_string()];
    let mut nodes = vec![first];
    for index in 1..3 {
        nodes.push(node(index, &seeds, &flags, &starts).await);
    }
    let region = nodes[0].region::<Quiet>(&flags.type_name).unwrap();
    while region.current_regions().await.map_or(0, |r| r.len()) < 3 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // One entity per shard allocates every shard; then the victim's shards are known.
    let id = |name: String| EntityId::from(name);
    let mut seen = BTreeSet::new();
    for i in 0.. {
        let probe = id(format!("p{i}"));
        if seen.insert(shoal_core::shard_of(&probe, SHARDS)) {
            region.start_entity(probe).await.expect("probe starts");
        }
        if seen.len() == SHARDS as usize {
            break;
        }
    }
    // The last node to join gets its share by rebalancing.
    let mut victim_shards = shards_of(&nodes[VICTIM], &flags.type_name).await;
    let settled = Instant::now() + Duration::from_secs(60);
    while victim_shards.len() < SHARDS as usize / 3 && Instant::now() < settled {
        tokio::time::sleep(Duration::from_millis(500)).await;
        victim_shards = shards_of(&nodes[VICTIM], &flags.type_name).await;
    }
    assert!(
        !victim_shards.is_empty(),
        "the node to crash hosts no shard"
    );
    let remembered: Vec<EntityId> = (0..)
        .map(|i| id(format!("e{i}")))
        .filter(|e| victim_shards.contains(&shoal_core::shard_of(e, SHARDS).0))
        .take(flags.entities)
        .collect();
    let created = Instant::now();
    let starting = remembered.iter().cloned().map(|e| {
        let region = region.clone();
        async move { region.start_entity(e).await }
    });
    let mut answers = futures_util::stream::iter(starting).buffer_unordered(512);
    while let Some(answer) = answers.next().await {
        answer.expect("a remembered entity starts");
    }
    drop(answers);
    let creation = created.elapsed();
    while started.try_recv().is_ok() {}

    let crashed = Instant::now();
    nodes[VICTIM].abort().await;
    let wanted: BTreeSet<EntityId> = remembered.into_iter().collect();
    let mut back: BTreeMap<EntityId, Instant> = BTreeMap::new();
    let deadline = crashed + Duration::from_secs(600);
    while back.len() < wanted.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, started.recv()).await {
            Ok(Some((index, entity, at))) if index != VICTIM && wanted.contains(&entity) => {
                assert!(back.insert(entity, at).is_none(), "an entity started twice");
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => break,
        }
    }
    let first = back.values().min().copied().unwrap_or(crashed);
    let last = back.values().max().copied().unwrap_or(crashed);
    let store = if flags.store.starts_with("postgres") {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    println!("| figure | value |\n|---|---|");
    println!(
        "| setup | 3 nodes on loopback, {SHARDS} shards, store {store}, recovery {:?} |",
        flags.recovery
    );
    println!(
        "| {} remembered starts on the victim (each durable before it runs) | {:.2} s ({:.0}/s) |",
        wanted.len(),
        creation.as_secs_f64(),
        wanted.len() as f64 / creation.as_secs_f64()
    );
    println!(
        "| crash → first restart (detection, downing, removal margin) | {:.2} s |",
        (first - crashed).as_secs_f64()
    );
    println!(
        "| first → last restart (loads and recovery) | {:.2} s |",
        (last - first).as_secs_f64()
    );
    println!(
        "| crash → all {} running again, unmessaged | {:.2} s ({} of {}) |",
        wanted.len(),
        (last - crashed).as_secs_f64(),
        back.len(),
        wanted.len()
    );
    for node in &nodes {
        node.abort().await;
    }
    if back.len() < wanted.len() {
        eprintln!("FAILED: {} did not run again", wanted.len() - back.len());
        std::process::exit(1);
    }
}
