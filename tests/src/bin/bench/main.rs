//! Shoal's benchmarks: one command printing every figure next to a baseline timed in the same
//! run (the machine is shared and noisy, so only ratios compare across runs), plus the scaling
//! curves as SVG files for `BENCHMARKS.md`.
//!
//! `cargo run --release -p shoal-tests --bin bench [-- --quick] [--svg DIR]`

mod alloc;
mod core_rows;
mod curves;
mod lab;
mod nodes;
mod plot;
mod remote_rows;
mod runtime_rows;
mod sim_rows;
mod table;

use std::path::PathBuf;
use std::process::ExitCode;

/// Speed rows run their baseline and their figure alternately this many times and keep the best
/// of each: the machine is shared, and the slower runs measure its other tenants.
const ROUNDS: usize = 3;

/// What the command line asked for.
struct Args {
    /// Smaller sizes, for CI.
    quick: bool,
    /// Where the scaling curves go; none written without it.
    svg: Option<PathBuf>,
    /// Run only the groups whose name contains this (`core`, `runtime`, `remote`, `sim`).
    only: Option<String>,
}

impl Args {
    fn runs(&self, group: &str) -> bool {
        self.only.as_deref().is_none_or(|o| group.contains(o))
    }
}

const USAGE: &str = "usage: bench [--quick] [--svg DIR] [--only core|runtime|remote|sim]";

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        quick: false,
        svg: None,
        only: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => args.quick = true,
            "--svg" => {
                let dir = it.next().ok_or("--svg needs a directory")?;
                args.svg = Some(PathBuf::from(dir));
            }
            "--only" => args.only = Some(it.next().ok_or("--only needs a group name")?),
            "--help" | "-h" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    let mut rows = Vec::new();
    if args.runs("core") {
        rows.extend(core_rows::rows(args.quick));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    if args.runs("runtime") {
        rows.extend(runtime.block_on(runtime_rows::rows(args.quick)));
    }
    if args.runs("remote") {
        rows.extend(runtime.block_on(remote_rows::rows(args.quick)));
    }
    let speeds = if args.runs("sim") {
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
