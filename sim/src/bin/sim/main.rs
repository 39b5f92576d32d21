//! The simulator's command line (clap): `sim --help` lists the commands, `sim <command> --help`
//! every option; unknown flags and bad values are refused with the value named.
//!
//! ```text
//! sim sweep --seeds <n> [--start <seed>] [--coverage] [--reaching <text>] [--until-failure]
//!           [--list-classified]
//! sim replay <seed> [--trace <file>] [--html <file>] [--coverage]
//! sim minimize <seed>
//! sim failover
//! sim bench [--nodes <n>]
//! sim passivation [--trace zipf|loop|scan|mixed|all|<file>] [--limit <n>] [--seed <seed>]
//! ```
//!
//! `sweep`, `replay` and `minimize` also take `--family <f>`, `--downing <strategy>`,
//! `--membership real|oracle` and `--schedule "<actions>"`.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use sim::{
    Downing, Family, MembershipMode, Options, Outcome, Report, Schedule, explain, minimize,
    parse_seed, run, run_traced, trace_dir,
};

mod allocator;

/// Failures a sweep explains and minimizes (each takes many runs).
const MINIMIZE_FIRST: usize = 3;
/// Runs one minimization may spend.
const MINIMIZE_RUNS: usize = 400;

/// Deterministic cluster simulator for Shoal: fault injection, invariant checks after every
/// step, seed replay and schedule minimization.
#[derive(Debug, Parser)]
#[command(name = "sim", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run many seeds; print each failure (explained, the first ones minimized); exit non-zero
    /// on any failure. The last line is "N passed, M failed".
    Sweep {
        /// How many seeds to run.
        #[arg(long)]
        seeds: u64,
        /// The first seed (decimal, 0x-hex or a commit hash).
        #[arg(long, default_value = "0", value_parser = seed_arg)]
        start: u64,
        /// First print how many runs reached each coverage marker and core probe.
        #[arg(long)]
        coverage: bool,
        /// Print each seed whose run reached a marker or probe containing this text.
        #[arg(long, value_name = "TEXT")]
        reaching: Option<String>,
        /// Stop at the first failing seed and say how many seeds it took.
        #[arg(long)]
        until_failure: bool,
        /// Print each seed in which no side survived (classified, not failed), with its strategy.
        #[arg(long)]
        list_classified: bool,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Run one seed; print its report and digest.
    Replay {
        /// The seed (decimal, 0x-hex or a commit hash).
        #[arg(value_parser = seed_arg)]
        seed: u64,
        /// Write the run's trace to this file as JSON lines.
        #[arg(long, value_name = "FILE")]
        trace: Option<String>,
        /// Write a picture of the run to this file: one self-contained HTML page (a timeline
        /// per node, faults, shards, deliveries per second, the violation marked).
        #[arg(long, value_name = "FILE")]
        html: Option<String>,
        /// Also print the markers and core probes the run reached.
        #[arg(long)]
        coverage: bool,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Shrink a failing seed's fault schedule to a minimal one that still fails.
    Minimize {
        /// The seed (decimal, 0x-hex or a commit hash).
        #[arg(value_parser = seed_arg)]
        seed: u64,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Recovery times from a crash and a 2|3 partition with the production defaults.
    Failover,
    /// Events per second and time acceleration of steady traffic on 5, 20 and 100 nodes.
    Bench {
        /// Measure this cluster size only.
        #[arg(long)]
        nodes: Option<u64>,
    },
    /// Hit rates of the passivation policies (active-entity limits) on access traces, beside
    /// the offline optimal's, as a Markdown table.
    Passivation {
        /// A built-in trace (zipf, loop, scan, mixed), all of them, or a file of entity ids,
        /// one a line.
        #[arg(long, default_value = "all", value_name = "TRACE")]
        trace: String,
        /// The active-entity limit (the built-in traces scale with it).
        #[arg(long, default_value_t = 1000, value_parser = limit_arg)]
        limit: usize,
        /// The built-in traces' seed (decimal, 0x-hex or a commit hash).
        #[arg(long, default_value = "1", value_parser = seed_arg)]
        seed: u64,
    },
}

/// How each run is set up, on top of what its seed draws.
#[derive(Clone, Debug, clap::Args)]
struct RunArgs {
    /// The scenario family (default: drawn from the seed).
    #[arg(long, value_parser = family_arg)]
    family: Option<Family>,
    /// How unreachable members are downed, replacing the strategy the seed draws:
    /// keep-majority, static-quorum, keep-oldest, keep-oldest-down-if-alone, down-all, lease-majority, or auto
    /// (the negative control, which must fail).
    #[arg(long, value_parser = downing_arg)]
    downing: Option<Downing>,
    /// Where membership comes from: the core's real membership, or the oracle.
    #[arg(long, default_value = "real", value_parser = membership_arg)]
    membership: MembershipMode,
    /// Replace the drawn faults with these actions, e.g. "@3.805 leave n4".
    #[arg(long, value_parser = schedule_arg)]
    schedule: Option<Schedule>,
}

impl RunArgs {
    /// The options of `seed`'s run.
    fn options(&self, seed: u64) -> Options {
        let mut options = match self.family {
            Some(f) => Options::for_family(seed, f),
            None => Options::for_seed(seed),
        };
        if let Some(downing) = self.downing {
            options.cluster.downing = downing;
        }
        options.cluster.membership = self.membership;
        options.schedule = self.schedule.clone();
        options
    }
}

fn seed_arg(text: &str) -> Result<u64, String> {
    parse_seed(text)
        .ok_or_else(|| format!("{text:?} is not a seed: decimal, 0x-hex or a commit hash"))
}

fn limit_arg(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(limit) if limit > 0 => Ok(limit),
        _ => Err(format!("{text:?} is not a limit: a positive whole number")),
    }
}

fn family_arg(name: &str) -> Result<Family, String> {
    Family::parse(name).ok_or_else(|| {
        let names: Vec<&str> = Family::ALL.iter().map(|f| f.name()).collect();
        format!("unknown family {name:?}; one of: {}", names.join(", "))
    })
}

fn downing_arg(name: &str) -> Result<Downing, String> {
    Downing::parse(name).ok_or_else(|| {
        let names: Vec<&str> = (Downing::DRAWN.iter().map(|(_, n)| *n))
            .chain(["keep-majority", "auto"])
            .collect();
        format!("unknown downing {name:?}; one of: {}", names.join(", "))
    })
}

fn membership_arg(name: &str) -> Result<MembershipMode, String> {
    match name {
        "real" => Ok(MembershipMode::Real),
        "oracle" => Ok(MembershipMode::Oracle),
        other => Err(format!("unknown membership {other:?} (real | oracle)")),
    }
}

fn schedule_arg(text: &str) -> Result<Schedule, String> {
    text.parse::<Schedule>()
        .map_err(|e| format!("schedule {text:?}: {e}"))
}

fn main() -> ExitCode {
    allocator::run_without_purging();
    match Cli::parse().command {
        Command::Sweep {
            seeds,
            start,
            coverage,
            reaching,
            until_failure,
            list_classified,
            run,
        } => {
            let how = SweepOutput {
                coverage,
                reaching: reaching.as_deref(),
                until_failure,
                list_classified,
            };
            sweep(start..start.saturating_add(seeds), |s| run.options(s), how)
        }
        Command::Replay {
            seed,
            trace,
            html,
            coverage,
            run,
        } => replay(run.options(seed), trace, html, coverage).unwrap_or_else(|message| {
            eprintln!("{message}");
            ExitCode::from(2)
        }),
        Command::Minimize { seed, run } => shrink(&sim::run(run.options(seed))),
        Command::Failover => {
            print!("{}", sim::measure_failover());
            ExitCode::SUCCESS
        }
        Command::Bench { nodes } => {
            bench(&nodes.map_or_else(|| vec![5, 20, 100], |n| vec![n]));
            ExitCode::SUCCESS
        }
        Command::Passivation { trace, limit, seed } => {
            let started = wall_seconds();
            match sim::passivation::select(&trace, limit, seed) {
                Ok(traces) => {
                    print!("{}", sim::passivation::compare(&traces, limit));
                    eprintln!("{:.1}s wall", wall_seconds() - started);
                    ExitCode::SUCCESS
                }
                Err(message) => {
                    eprintln!("{message}");
                    ExitCode::from(2)
                }
            }
        }
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
    list_classified: bool,
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
        list_classified,
    } = how;
    let started = wall_seconds();
    let (mut passed, mut failed, mut no_progress) = (0, 0, 0);
    let mut reached: std::collections::BTreeMap<&'static str, u64> = Default::default();
    // Per strategy: runs, and runs in which no side survived.
    let mut by_strategy: std::collections::BTreeMap<&'static str, (u64, u64)> = Default::default();
    for seed in seeds {
        let report = run(options(seed));
        let runs = by_strategy
            .entry(report.options.cluster.downing.name())
            .or_default();
        runs.0 += 1;
        runs.1 += u64::from(report.outcome == Outcome::NoProgress);
        for marker in report.coverage.keys() {
            *reached.entry(marker).or_default() += 1;
        }
        if reaching.is_some_and(|r| report.coverage.keys().any(|m| m.contains(r))) {
            println!("seed {seed} reaches {:?}", reaching.unwrap_or_default());
        }
        match report.outcome {
            Outcome::Passed => passed += 1,
            Outcome::NoProgress => {
                no_progress += 1;
                if list_classified {
                    let strategy = report.options.cluster.downing.name();
                    println!("seed {seed}: no side survived ({strategy})");
                }
            }
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
    for (strategy, (runs, none)) in &by_strategy {
        let share = *none as f64 * 100.0 / (*runs).max(1) as f64;
        eprintln!("  {strategy}: no side survived in {none} of {runs} runs ({share:.1} %)");
    }
    println!("{passed} passed, {failed} failed");
    exit(failed > 0)
}

fn replay(
    options: Options,
    trace_path: Option<String>,
    html_path: Option<String>,
    coverage: bool,
) -> Result<ExitCode, String> {
    let create = |path: &str, what: &str| {
        std::fs::File::create(path)
            .map(std::io::BufWriter::new)
            .map_err(|e| format!("cannot create {what} {path}: {e}"))
    };
    let report = match &html_path {
        None => {
            let sink: Option<Box<dyn std::io::Write>> = match &trace_path {
                Some(path) => Some(Box::new(create(path, "trace file")?)),
                None => None,
            };
            run_traced(options, sink)
        }
        Some(html) => {
            let (report, trace) = sim::run_recorded(options);
            std::fs::write(html, sim::render_html(&report, &trace))
                .map_err(|e| format!("cannot write HTML page {html}: {e}"))?;
            if let Some(path) = &trace_path {
                let mut out = create(path, "trace file")?;
                sim::write_trace(&mut out, &trace)
                    .and_then(|()| std::io::Write::flush(&mut out))
                    .map_err(|e| format!("cannot write trace file {path}: {e}"))?;
            }
            report
        }
    };
    print!("{report}");
    println!("  schedule: {}", report.schedule);
    if coverage {
        for (marker, n) in &report.coverage {
            println!("  reached {n:>5}× {marker}");
        }
    }
    if let Some(path) = &html_path {
        println!("  picture: {path}");
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
        let speed = sim::measure_speed(nodes, Duration::from_secs(120), 3, wall_seconds);
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

/// Wall-clock seconds since the first call, for reporting how long runs took. The simulation
/// itself never reads a clock; only these reports do, which is why the determinism ban is
/// lifted here alone.
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
fn wall_seconds() -> f64 {
    use std::sync::OnceLock;
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_secs_f64()
}
