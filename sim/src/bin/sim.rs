//! The simulator's command line.
//!
//! ```text
//! sim sweep --seeds <n> [--start <seed>] [--downing auto]   run n seeds; exit non-zero on failure
//! sim replay <seed> [--trace <file>] [--downing auto]       run one seed, print its report
//! sim bench                                                 events/s and time acceleration
//! ```

use std::process::ExitCode;

use std::time::Duration;

use sim::{Downing, Family, Faults, Options, Outcome, parse_seed, run, run_traced};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let downing = match flag("--downing").as_deref() {
        Some("auto") => Downing::Auto,
        None | Some("keep-majority") => Downing::KeepMajority,
        Some(other) => {
            eprintln!("unknown downing strategy {other:?} (keep-majority | auto)");
            return ExitCode::from(2);
        }
    };
    let family = match flag("--family") {
        None => None,
        Some(name) => match Family::parse(&name) {
            Some(f) => Some(f),
            None => {
                let names: Vec<&str> = Family::ALL.iter().map(|f| f.name()).collect();
                eprintln!("unknown family {name:?}; one of: {}", names.join(", "));
                return ExitCode::from(2);
            }
        },
    };
    let options = |seed: u64| {
        let base = match family {
            Some(f) => Options::for_family(seed, f),
            None => Options::for_seed(seed),
        };
        Options { downing, ..base }
    };
    match args.first().map(String::as_str) {
        Some("sweep") => {
            let Some(n) = flag("--seeds").and_then(|s| s.parse::<u64>().ok()) else {
                eprintln!("usage: sim sweep --seeds <n> [--start <seed>] [--downing auto]");
                return ExitCode::from(2);
            };
            let start = flag("--start").and_then(|s| parse_seed(&s)).unwrap_or(0);
            let started = wall_seconds();
            let (mut passed, mut failed, mut no_progress) = (0, 0, 0);
            for seed in start..start + n {
                let report = run(options(seed));
                match report.outcome {
                    Outcome::Passed => passed += 1,
                    Outcome::NoProgress => no_progress += 1,
                    Outcome::Failed => {
                        failed += 1;
                        print!("{report}");
                    }
                }
            }
            eprintln!(
                "{:.1}s wall; {no_progress} runs without a surviving majority (classified, not failed)",
                wall_seconds() - started
            );
            println!("{passed} passed, {failed} failed");
            if failed == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Some("replay") => {
            let Some(seed) = args.get(1).and_then(|s| parse_seed(s)) else {
                eprintln!("usage: sim replay <seed> [--trace <file>] [--downing auto]");
                return ExitCode::from(2);
            };
            let trace_path = flag("--trace");
            let sink: Option<Box<dyn std::io::Write>> = match &trace_path {
                Some(path) => match std::fs::File::create(path) {
                    Ok(file) => Some(Box::new(std::io::BufWriter::new(file))),
                    Err(e) => {
                        eprintln!("cannot create trace file {path}: {e}");
                        return ExitCode::from(2);
                    }
                },
                None => None,
            };
            let report = run_traced(options(seed), sink);
            print!("{report}");
            if let Some(path) = trace_path {
                println!("  trace: {path} (JSON lines)");
            }
            if report.outcome == Outcome::Failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Some("bench") => {
            bench();
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!(
                "usage: sim sweep --seeds <n> [--start <seed>] [--downing auto] | sim replay <seed> [--downing auto]"
            );
            ExitCode::from(2)
        }
    }
}

/// Wall-clock seconds, for reporting how long a sweep took. The simulation itself never reads a
/// clock; only this report does, which is why the determinism ban is lifted here alone.
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
fn wall_seconds() -> f64 {
    use std::sync::OnceLock;
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_secs_f64()
}

/// Steady traffic without faults on 5, 20 and 100 nodes: simulated events per wall second and
/// simulated seconds per wall second.
fn bench() {
    println!("nodes  events     wall s  events/s    simulated s  acceleration");
    for nodes in [5, 20, 100] {
        let steady = Options::for_family(1, Family::Steady);
        let options = Options {
            nodes,
            entities: 2_000,
            shards: 200,
            duration: Duration::from_secs(120),
            message_every: Duration::from_millis(2),
            faults: Faults {
                drift_ppm: 0,
                slow_stop: Duration::from_millis(10),
                ..steady.faults.clone()
            },
            ..steady
        };
        let started = wall_seconds();
        let report = run(options);
        let wall = wall_seconds() - started;
        let simulated = report.simulated.as_secs_f64();
        println!(
            "{nodes:>5}  {:>9}  {wall:>6.2}  {:>9.0}  {simulated:>11.0}  {:>10.0}x",
            report.events,
            report.events as f64 / wall,
            simulated / wall
        );
    }
}
