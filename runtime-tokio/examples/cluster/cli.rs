//! The harness's command line: every flag with its meaning and default in `--help`, unknown
//! flags and bad values refused with the value named.

use clap::Parser;

use crate::member::DowningMode;
use crate::sending::DeliveryMode;

/// A real cluster of separate OS processes on this machine, driven through a tour of real
/// faults (a join, SIGKILL, SIGSTOP past the failure detector, a graceful leave) and verified
/// from every node's journal: single activation, per-sender order, no acknowledged increment
/// lost, every counter answering with its journaled total.
#[derive(Debug, Parser)]
#[command(name = "cluster")]
struct Cli {
    /// Node processes to start (the tour needs one to join, kill, pause and leave).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(4..=100))]
    nodes: u32,
    /// Counters to create and increment [default: 10000, or 2000 with --quick].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    entities: Option<u32>,
    /// Concurrent workers sending acknowledged increments.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..))]
    workers: u32,
    /// Least seconds of traffic; the tour may take longer [default: 60, or 20 with --quick].
    #[arg(long, value_name = "SECS")]
    duration: Option<u64>,
    /// Seed of the tour's choices (which node is killed, paused, ...) [default: random].
    #[arg(long)]
    seed: Option<u64>,
    /// A shorter run: 2,000 counters and 20 s of traffic, unless given otherwise.
    #[arg(long)]
    quick: bool,
    /// Each node in its own network namespace (root on Linux); the tour breaks links instead:
    /// latency and loss, a symmetric partition, a one-way partition.
    #[arg(long)]
    chaos: bool,
    /// The chaos run's negative control: auto-down instead of keep-majority, which must break
    /// single activation (the run then exits 0 only if it did).
    #[arg(long, requires = "chaos", conflicts_with = "downing")]
    auto_down: bool,
    /// How unreachable members are downed. static-quorum: a side needs a majority of the
    /// largest cluster the tour makes (nodes and the harness); keep-oldest downs the oldest
    /// member when it is alone; lease-majority: the side whose leader gets the downing lease
    /// from --lease survives. (Down-all would end the tour's first fault with the cluster.)
    #[arg(long, value_enum, default_value_t = Strategy::KeepMajority)]
    downing: Strategy,
    /// The lease store, for lease-majority and --shard-leases: sqlite (a file in the run's
    /// directory), sqlite:PATH, postgres://... (with the postgres feature) or
    /// etcd://host:port[,host:port] (with the etcd feature).
    #[arg(long, default_value = "sqlite", value_name = "STORE")]
    lease: String,
    /// Every shard of the counters starts its entities only under its lease from --lease, and
    /// their coordinator allocates only under the type's: a killed node's shards move once its
    /// leases expire, without the removal margin.
    #[arg(long)]
    shard_leases: bool,
    /// Where the counters are remembered: none, sqlite (a file in the run's directory),
    /// sqlite:PATH, or postgres://... (with the postgres feature).
    #[arg(long, default_value = "sqlite", value_name = "STORE")]
    store: String,
    /// How workers send increments: reliable (each applied exactly once, a send completes once
    /// the counter persisted it) or ask (plain asks with a timeout: a timed-out increment may
    /// or may not have happened).
    #[arg(long, value_enum, default_value_t = DeliveryMode::Reliable)]
    delivery: DeliveryMode,
}

/// `--downing`.
#[derive(Clone, Copy, Debug, Eq, PartialEq, clap::ValueEnum)]
enum Strategy {
    KeepMajority,
    StaticQuorum,
    KeepOldest,
    LeaseMajority,
}

/// The harness's settings, resolved from the command line.
pub(crate) struct Flags {
    pub(crate) nodes: u32,
    pub(crate) entities: u32,
    pub(crate) workers: u32,
    /// Least seconds of traffic (the tour may take longer).
    pub(crate) duration: u64,
    pub(crate) seed: u64,
    pub(crate) chaos: bool,
    pub(crate) downing: DowningMode,
    /// `--store`: where the counters are remembered (see `remembered::StoreSpec`).
    pub(crate) store: String,
    /// `--lease`, when anything uses a lease store (see `leasing::LeaseSpec`).
    pub(crate) lease: Option<String>,
    /// `--shard-leases`.
    pub(crate) shard_leases: bool,
    /// `--delivery`: how workers send increments.
    pub(crate) delivery: DeliveryMode,
}

/// Parses the harness's arguments (without the program name). `Err` carries clap's message:
/// the help or version text (exit 0), or the refusal (exit 2).
pub(crate) fn flags(args: &[String]) -> Result<Flags, clap::Error> {
    let program = std::iter::once("cluster".to_string());
    let cli = Cli::try_parse_from(program.chain(args.iter().cloned()))?;
    let seed = match cli.seed {
        Some(seed) => seed,
        // The tour's seed when none is given: printed in the summary, so a run can be redone.
        None => {
            getrandom::u64().map_err(|e| {
                clap::Error::raw(clap::error::ErrorKind::Io, format!("no random seed: {e}\n"))
            })? % 1_000_000
        }
    };
    let (entities, duration) = if cli.quick { (2_000, 20) } else { (10_000, 60) };
    Ok(Flags {
        nodes: cli.nodes,
        entities: cli.entities.unwrap_or(entities),
        workers: cli.workers,
        duration: cli.duration.unwrap_or(duration),
        seed,
        chaos: cli.chaos,
        downing: match (cli.auto_down, cli.downing) {
            (true, _) => DowningMode::AutoDown,
            (false, Strategy::KeepMajority) => DowningMode::KeepMajority,
            // A majority of the nodes and the harness's own member (never more than twice the
            // quorum less one, or every side of a partition would down itself).
            (false, Strategy::StaticQuorum) => {
                DowningMode::StaticQuorum((cli.nodes as usize).div_ceil(2) + 1)
            }
            (false, Strategy::KeepOldest) => DowningMode::KeepOldest,
            (false, Strategy::LeaseMajority) => DowningMode::LeaseMajority,
        },
        lease: (cli.downing == Strategy::LeaseMajority || cli.shard_leases).then_some(cli.lease),
        shard_leases: cli.shard_leases,
        store: cli.store,
        delivery: cli.delivery,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Flags, clap::Error> {
        flags(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn quick_shortens_the_run_unless_told_otherwise() {
        let f = parse(&["--quick", "--seed", "7"]).unwrap();
        assert_eq!((f.entities, f.duration, f.seed), (2_000, 20, 7));
        let f = parse(&["--entities", "500", "--quick"]).unwrap();
        assert_eq!((f.entities, f.duration), (500, 20));
        let f = parse(&[]).unwrap();
        assert_eq!(
            (f.nodes, f.entities, f.workers, f.duration),
            (5, 10_000, 32, 60)
        );
        assert_eq!(f.store, "sqlite");
        assert_eq!(f.delivery, DeliveryMode::Reliable);
        assert!(f.downing == DowningMode::KeepMajority && !f.chaos);
        assert_eq!(
            (f.lease, f.shard_leases),
            (None, false),
            "no lease store used"
        );
    }

    #[test]
    fn a_strategy_and_leases_are_chosen_by_name() {
        let f = parse(&["--downing", "lease-majority"]).unwrap();
        assert_eq!(f.downing, DowningMode::LeaseMajority);
        assert_eq!(f.lease.as_deref(), Some("sqlite"));
        let f = parse(&["--shard-leases", "--lease", "etcd://127.0.0.1:2379"]).unwrap();
        assert_eq!(f.downing, DowningMode::KeepMajority);
        assert_eq!(f.lease.as_deref(), Some("etcd://127.0.0.1:2379"));
        let f = parse(&["--downing", "static-quorum", "--nodes", "7"]).unwrap();
        assert_eq!(
            f.downing,
            DowningMode::StaticQuorum(5),
            "a majority of 7 and the harness"
        );
        let bad = parse(&["--downing", "down-all"]).err().unwrap().to_string();
        assert!(bad.contains("down-all"), "{bad}");
        let both = parse(&["--chaos", "--auto-down", "--downing", "keep-oldest"]);
        assert!(both.is_err(), "auto-down is a strategy of its own");
    }

    #[test]
    fn unknown_flags_and_bad_values_are_refused_by_name() {
        let unknown = parse(&["--nodse", "5"]).err().unwrap().to_string();
        assert!(unknown.contains("--nodse"), "{unknown}");
        let bad = parse(&["--nodes", "many"]).err().unwrap().to_string();
        assert!(bad.contains("many") && bad.contains("--nodes"), "{bad}");
        let few = parse(&["--nodes", "3"]).err().unwrap().to_string();
        assert!(few.contains('3') && few.contains("--nodes"), "{few}");
        let none = parse(&["--workers", "0"]).err().unwrap().to_string();
        assert!(none.contains("--workers"), "{none}");
    }

    #[test]
    fn auto_down_needs_chaos() {
        let alone = parse(&["--auto-down"]).err().unwrap().to_string();
        assert!(alone.contains("--chaos"), "{alone}");
        let f = parse(&["--chaos", "--auto-down"]).unwrap();
        assert!(f.chaos && f.downing == DowningMode::AutoDown);
    }

    #[test]
    fn help_lists_every_flag_with_its_default() {
        let help = parse(&["--help"]).err().unwrap();
        assert_eq!(help.kind(), clap::error::ErrorKind::DisplayHelp);
        let text = help.to_string();
        for flag in [
            "--nodes",
            "--entities",
            "--workers",
            "--duration",
            "--seed",
            "--quick",
            "--chaos",
            "--auto-down",
            "--store",
            "--delivery",
            "--downing",
            "--lease",
            "--shard-leases",
        ] {
            assert!(text.contains(flag), "{flag} missing from:\n{text}");
        }
        assert!(text.contains("[default: 5]") && text.contains("[default: sqlite]"));
    }
}
