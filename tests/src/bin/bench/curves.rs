//! The scaling curves: how each cost grows with entities, shards and nodes, written as SVG
//! charts for `BENCHMARKS.md`.

use std::path::Path;

use sim::Speed;

use crate::core_rows;
use crate::nodes::Setup;
use crate::plot::{Labels, Series, line_chart};
use crate::runtime_rows::{mpsc_rate, tell_rate};

fn series(name: &str, points: Vec<(f64, f64)>) -> Series {
    Series {
        name: name.to_owned(),
        points,
    }
}

/// Sizes of the entity curves.
fn entity_sizes(quick: bool) -> &'static [usize] {
    if quick {
        &[1_000, 10_000]
    } else {
        &[10_000, 100_000, 1_000_000]
    }
}

/// Core routing and memory against entities.
fn core_entity_curves(dir: &Path, quick: bool) -> Result<(), Box<dyn std::error::Error>> {
    let (mut core, mut baseline, mut bytes) = (Vec::new(), Vec::new(), Vec::new());
    for &n in entity_sizes(quick) {
        let messages = (2 * n).max(200_000);
        let (c, b) = core_rows::routing(n, messages);
        core.push((n as f64, c));
        baseline.push((n as f64, b));
        bytes.push((n as f64, core_rows::bytes_per_idle_entity(n)));
    }
    line_chart(
        &dir.join("core-routing-by-entities.svg"),
        &Labels {
            title: "Core: routing one tell to an active entity",
            x: "active entities (one node, 1,000 shards)",
            y: "ns per message",
        },
        &[
            series("shoal-core", core),
            series("hash-map lookup + queue push", baseline),
        ],
    )?;
    line_chart(
        &dir.join("core-memory-by-entities.svg"),
        &Labels {
            title: "Core: heap bytes per idle entity",
            x: "idle entities (one node, 1,000 shards)",
            y: "bytes per entity",
        },
        &[series("shoal-core", bytes)],
    )
}

/// Runtime `tell` throughput against entities, with its raw-mpsc baseline.
async fn runtime_entity_curve(dir: &Path, quick: bool) -> Result<(), Box<dyn std::error::Error>> {
    let setup = Setup::new();
    let node = setup.cluster(1).await.remove(0);
    let (mut shoal, mut mpsc) = (Vec::new(), Vec::new());
    for &n in entity_sizes(quick) {
        let per_entity = (1_000_000 / n as u64).clamp(1, 20);
        let ids: Vec<String> = (0..n).map(|i| format!("c{n}-{i}")).collect();
        mpsc.push((n as f64, mpsc_rate(n, per_entity).await / 1e3));
        shoal.push((n as f64, tell_rate(&node, &ids, per_entity).await / 1e3));
    }
    node.abort().await;
    line_chart(
        &dir.join("runtime-tell-by-entities.svg"),
        &Labels {
            title: "Runtime: tell throughput on one node",
            x: "entities messaged",
            y: "thousand messages per second",
        },
        &[series("shoal tell", shoal), series("raw tokio mpsc", mpsc)],
    )
}

/// Coordinator allocation cost per shard against shards.
fn shard_curve(dir: &Path, quick: bool) -> Result<(), Box<dyn std::error::Error>> {
    let sizes: &[u32] = if quick {
        &[100, 1_000, 10_000]
    } else {
        &[100, 1_000, 10_000, 100_000]
    };
    line_chart(
        &dir.join("core-allocation-by-shards.svg"),
        &Labels {
            title: "Core: allocating shards over 100 regions (first message each)",
            x: "shards",
            y: "µs per shard",
        },
        &[series(
            "coordinator + regions",
            core_rows::allocation_curve(sizes),
        )],
    )
}

/// Simulator speed against nodes.
fn node_curves(dir: &Path, speeds: &[Speed]) -> Result<(), Box<dyn std::error::Error>> {
    let events = speeds
        .iter()
        .map(|s| (s.nodes as f64, s.events_per_second() / 1e6))
        .collect();
    let acceleration = speeds
        .iter()
        .map(|s| (s.nodes as f64, s.acceleration()))
        .collect();
    line_chart(
        &dir.join("sim-events-by-nodes.svg"),
        &Labels {
            title: "Simulator: events per wall second",
            x: "simulated nodes",
            y: "million events per second",
        },
        &[series("steady traffic", events)],
    )?;
    line_chart(
        &dir.join("sim-acceleration-by-nodes.svg"),
        &Labels {
            title: "Simulator: simulated seconds per wall second",
            x: "simulated nodes",
            y: "× real time",
        },
        &[series("steady traffic", acceleration)],
    )
}

/// Measures and writes every curve into `dir`.
pub(crate) fn write_all(
    dir: &Path,
    quick: bool,
    runtime: &tokio::runtime::Runtime,
    speeds: &[Speed],
) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    core_entity_curves(dir, quick)?;
    shard_curve(dir, quick)?;
    runtime.block_on(runtime_entity_curve(dir, quick))?;
    if !speeds.is_empty() {
        node_curves(dir, speeds)?;
    }
    Ok(())
}
