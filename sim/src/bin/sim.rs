//! The simulator's command line.
//!
//! ```text
//! sim sweep --seeds <n> [--start <seed>] [--family <f>] [--downing auto] [--coverage]
//!           [--reaching <text>] [--until-failure]
//!     run n seeds; print each failure (explained, the first ones minimized); exit non-zero on
//!     any failure; the last line is "N passed, M failed"; with --coverage, first how many runs
//!     reached each marker and core probe; with --reaching, each seed whose run reached a
//!     marker or probe containing <text>; with --until-failure, stop at the first failing seed
//!     and say how many seeds it took
//! sim replay <seed> [--family <f>] [--downing auto] [--schedule "<actions>"] [--trace <file>]
//!            [--coverage]
//!     run one seed, print its report and digest (and with --coverage the markers and core
//!     probes it reached)
//! sim minimize <seed> [--family <f>] [--downing auto] [--schedule "<actions>"]
//!     shrink a failing seed's fault schedule to a minimal one that still fails
//! sim failover
//!     recovery times from a crash and a 2|3 partition with the production defaults
//! sim bench [--nodes <n>]
//!     events/s and time acceleration for 5, 20 and 100 nodes (or n)
//! ```

use std::process::ExitCode;
use std::time::Duration;

use sim::{
    Downing, Family, MembershipMode, Options, Outcome, Report, Schedule, explain, minimize,
    parse_seed, run, run_traced, trace_dir, wall_seconds,
};

/// Failures a sweep explains and minimizes (each takes many runs).
const MINIMIZE_FIRST: usize = 3;
/// Runs one minimization may spend.
const MINIMIZE_RUNS: usize = 400;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match parse(&args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("{message}\n\n{}", usage());
            ExitCode::from(2)
        }
    }
}

fn usage() -> &'static str {
    "usage:\n  sim sweep --seeds <n> [--start <seed>] [--family <f>] [--downing auto] [--coverage] [--reaching <text>] [--until-failure]\n  sim replay <seed> [--family <f>] [--downing auto] [--schedule \"<actions>\"] [--trace <file>] [--coverage]\n  sim minimize <seed> [--family <f>] [--downing auto] [--schedule \"<actions>\"]\n  sim failover\n  sim bench [--nodes <n>]"
}

fn parse(args: &[String]) -> Result<ExitCode, String> {
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let downing = match flag("--downing").as_deref() {
        Some("auto") => Downing::Auto,
        None | Some("keep-majority") => Downing::KeepMajority,
        Some(other) => return Err(format!("unknown downing {other:?} (keep-majority | auto)")),
    };
    let membership = match flag("--membership").as_deref() {
        None | Some("real") => MembershipMode::Real,
        Some("oracle") => MembershipMode::Oracle,
        Some(other) => return Err(format!("unknown membership {other:?} (real | oracle)")),
    };
    let family = match flag("--family") {
        None => None,
        Some(name) => Some(Family::parse(&name).ok_or_else(|| {
            let names: Vec<&str> = Family::ALL.iter().map(|f| f.name()).collect();
            format!("unknown family {name:?}; one of: {}", names.join(", "))
        })?),
    };
    let schedule = match flag("--schedule") {
        None => None,
        Some(text) => Some(text.parse::<Schedule>().map_err(|e| e.to_string())?),
    };
    let options = |seed: u64| {
        let base = match family {
            Some(f) => Options::for_family(seed, f),
            None => Options::for_seed(seed),
        };
        Options {
            downing,
            membership,
            schedule: schedule.clone(),
            ..base
        }
    };
    let seed = || {
        args.get(1)
            .and_then(|s| parse_seed(s))
            .ok_or("a seed: decimal, 0x-hex or a commit hash")
    };
    match args.first().map(String::as_str) {
        Some("sweep") => {
            let n = flag("--seeds")
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or("sweep needs --seeds <n>")?;
            let start = flag("--start").and_then(|s| parse_seed(&s)).unwrap_or(0);
            let coverage = args.iter().any(|a| a == "--coverage");
            let reaching = flag("--reaching");
            let until_failure = args.iter().any(|a| a == "--until-failure");
            let how = SweepOutput {
                coverage,
                reaching: reaching.as_deref(),
                until_failure,
            };
            Ok(sweep(start..start + n, options, how))
        }
        Some("replay") => {
            let coverage = args.iter().any(|a| a == "--coverage");
            replay(options(seed()?), flag("--trace"), coverage)
        }
        Some("minimize") => Ok(shrink(&run(options(seed()?)))),
        Some("failover") => {
            print!("{}", sim::measure_failover());
            Ok(ExitCode::SUCCESS)
        }
        Some("bench") => {
            let nodes = match flag("--nodes") {
                Some(n) => vec![n.parse().map_err(|_| "--nodes <n>")?],
                None => vec![5, 20, 100],
            };
            bench(&nodes);
            Ok(ExitCode::SUCCESS)
        }
        _ => Err("unknown command".into()),
    }
}

fn exit(failed: bool) -> ExitCode {
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// What a sweep prints besides failures, and whether it stops at the first.
struct SweepOutput<'a> {
    coverage: bool,
    reaching: Option<&'a str>,
    until_failure: bool,
}

fn sweep(
    seeds: std::ops::Range<u64>,
    options: impl Fn(u64) -> Options,
    how: SweepOutput<'_>,
) -> ExitCode {
    let SweepOutput {
        coverage,
        reaching,
        until_failure,
    } = how;
    let started = wall_seconds();
    let (mut passed, mut failed, mut no_progress) = (0, 0, 0);
    let mut reached: std::collections::BTreeMap<&'static str, u64> = Default::default();
    for seed in seeds {
        let report = run(options(seed));
        for marker in report.coverage.keys() {
            *reached.entry(marker).or_default() += 1;
        }
        if reaching.is_some_and(|r| report.coverage.keys().any(|m| m.contains(r))) {
            println!("seed {seed} reaches {:?}", reaching.unwrap_or_default());
        }
        match report.outcome {
            Outcome::Passed => passed += 1,
            Outcome::NoProgress => no_progress += 1,
            Outcome::Failed => {
                failed += 1;
                print!("{report}");
                if until_failure {
                    let runs = passed + failed + no_progress;
                    println!("first failure after {runs} seeds (seed {seed})");
                    break;
                }
                if failed <= MINIMIZE_FIRST {
                    explain_to_stdout(&report);
                    shrink(&report);
                }
            }
        }
    }
    if coverage {
        println!("runs  marker or probe");
        for (marker, runs) in &reached {
            println!("{runs:>5} {marker}");
        }
    }
    eprintln!(
        "{:.1}s wall; {no_progress} runs without a surviving majority (classified, not failed)",
        wall_seconds() - started
    );
    println!("{passed} passed, {failed} failed");
    exit(failed > 0)
}

fn replay(
    options: Options,
    trace_path: Option<String>,
    coverage: bool,
) -> Result<ExitCode, String> {
    let sink: Option<Box<dyn std::io::Write>> = match &trace_path {
        Some(path) => {
            let file = std::fs::File::create(path)
                .map_err(|e| format!("cannot create trace file {path}: {e}"))?;
            Some(Box::new(std::io::BufWriter::new(file)))
        }
        None => None,
    };
    let report = run_traced(options, sink);
    print!("{report}");
    println!("  schedule: {}", report.schedule);
    if coverage {
        for (marker, n) in &report.coverage {
            println!("  reached {n:>5}× {marker}");
        }
    }
    match trace_path {
        Some(path) => println!("  trace: {path} (JSON lines)"),
        None if report.outcome == Outcome::Failed => explain_to_stdout(&report),
        None => {}
    }
    Ok(exit(report.outcome == Outcome::Failed))
}

fn explain_to_stdout(report: &Report) {
    match explain(report, &trace_dir()) {
        Ok(explanation) => print!("{explanation}"),
        Err(e) => println!("  (no trace: {e})"),
    }
}

/// Minimizes a failing run's schedule and prints the result and how to replay it.
fn shrink(report: &Report) -> ExitCode {
    let Some(min) = minimize(report, MINIMIZE_RUNS) else {
        println!(
            "seed {} did not fail: nothing to minimize",
            report.options.seed
        );
        return ExitCode::SUCCESS;
    };
    println!(
        "  minimized: {} of {} actions still break {:?} ({} runs): {}",
        min.schedule.len(),
        report.schedule.len(),
        report.violations[0].property,
        min.runs,
        min.schedule
    );
    if let Some(v) = min.report.violations.first() {
        println!("    first violation {v}");
    }
    println!("    replay: {}", min.report.reproduce());
    ExitCode::FAILURE
}

/// Steady traffic without faults on 5, 20 and 100 nodes: simulated events per wall second and
/// simulated seconds per wall second, from the fastest of three runs.
fn bench(sizes: &[u64]) {
    println!("nodes  events     wall s  events/s    simulated s  acceleration");
    for &nodes in sizes {
        let speed = sim::measure_speed(nodes, Duration::from_secs(120), 3);
        println!(
            "{nodes:>5}  {:>9}  {:>6.2}  {:>9.0}  {:>11.0}  {:>10.0}x",
            speed.events,
            speed.wall,
            speed.events_per_second(),
            speed.simulated,
            speed.acceleration()
        );
    }
}
