//! Shoal's benchmarks: one command printing every figure next to a baseline timed in the same
//! run (the machine is shared and noisy, so only ratios compare across runs), plus the scaling
//! curves as SVG files for `BENCHMARKS.md`.
//!
//! `cargo run --release -p shoal-tests --bin bench -- [--quick] [--svg DIR] [--only GROUP]`
//! (the split rows need root, for their network namespaces)
//! (`--help` lists every option)

mod alloc;
mod core_rows;
mod curves;
mod delivery_rows;
mod failover_rows;
mod lab;
mod nodes;
mod passivation_rows;
mod plot;
mod remote_rows;
mod runtime_rows;
mod sim_rows;
mod split_rows;
mod state_rows;
mod table;

use std::path::PathBuf;

use clap::{Parser, ValueEnum};
use std::process::ExitCode;

/// Speed rows run their baseline and their figure alternately this many times and keep the best
/// of each: the machine is shared, and the slower runs measure its other tenants.
const ROUNDS: usize = 3;

/// Shoal's benchmarks: every figure beside a baseline timed in the same run, as a Markdown
/// table; with `--svg`, the scaling curves too.
#[derive(Debug, Parser)]
#[command(name = "bench")]
struct Args {
    /// Smaller sizes, for CI (seconds instead of minutes).
    #[arg(long)]
    quick: bool,
    /// Measure the scaling curves and write them into this directory as SVG files.
    #[arg(long, value_name = "DIR")]
    svg: Option<PathBuf>,
    /// Run only this group of rows.
    #[arg(long, value_enum)]
    only: Option<Group>,
    /// A PostgreSQL server (`host=... user=... dbname=...` or a URL) for the state store's
    /// PostgreSQL rows; without it only SQLite's run.
    #[arg(long, value_name = "URL")]
    postgres: Option<String>,
    /// One side of the split rows, run by the bench itself in a namespace (internal).
    #[arg(long, value_enum, hide = true)]
    role: Option<split_rows::Role>,
}

/// A group of rows.
#[derive(Clone, Copy, Debug, Eq, PartialEq, ValueEnum)]
enum Group {
    /// The sans-IO core on an in-process network.
    Core,
    /// One runtime node.
    Runtime,
    /// Three runtime nodes on loopback.
    Remote,
    /// Two runtime nodes, each in its own network namespace, process and core.
    Split,
    /// The simulator's speed.
    Sim,
    /// Persistent entities' writes and recovery.
    State,
    /// Reliable delivery against plain asks.
    Delivery,
    /// Failover per downing strategy (simulated, Akka's timers).
    Failover,
    /// The passivation policies' cost per access and hit rates against the optimal.
    Passivation,
}

impl Args {
    fn runs(&self, group: Group) -> bool {
        self.only.is_none_or(|o| o == group)
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(role) = args.role {
        return match split_rows::run_role(role, args.quick) {
            Ok(()) => ExitCode::SUCCESS,
            Err(why) => {
                eprintln!("the {role:?} side failed: {why}");
                ExitCode::FAILURE
            }
        };
    }
    let mut rows = Vec::new();
    if args.runs(Group::Core) {
        rows.extend(core_rows::rows(args.quick));
    }
    if args.runs(Group::Passivation) {
        rows.extend(passivation_rows::rows(args.quick));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    if args.runs(Group::Runtime) {
        rows.extend(runtime.block_on(runtime_rows::rows(args.quick)));
    }
    if args.runs(Group::Remote) {
        rows.extend(runtime.block_on(remote_rows::rows(args.quick)));
    }
    if args.runs(Group::Split) {
        rows.extend(split_rows::rows(args.quick));
    }
    if args.runs(Group::Delivery) {
        rows.extend(runtime.block_on(delivery_rows::rows(args.quick)));
    }
    if args.runs(Group::State) {
        let postgres = args.postgres.as_deref();
        rows.extend(runtime.block_on(state_rows::rows(args.quick, postgres)));
    }
    if args.runs(Group::Failover) {
        rows.extend(failover_rows::rows());
    }
    let speeds = if args.runs(Group::Sim) {
        sim_rows::speeds(args.quick)
    } else {
        Vec::new()
    };
    rows.extend(sim_rows::rows(&speeds));
    print!("{}", table::markdown(&rows));
    let missed: Vec<_> = rows.iter().filter(|r| r.missed()).collect();
    println!("\n{} rows, {} targets missed", rows.len(), missed.len());
    if let Some(dir) = &args.svg {
        if let Err(e) = curves::write_all(dir, args.quick, &runtime, &speeds) {
            eprintln!("the scaling curves failed: {e}");
            return ExitCode::FAILURE;
        }
        println!("scaling curves written to {}", dir.display());
    }
    ExitCode::SUCCESS
}
