//! `cluster_schedule`: the fuzzer's bytes choose a whole simulation (cluster size, workload,
//! entity behaviour, membership mode, buffer size) and its fault schedule (crashes, partitions,
//! connection breaks, leaves, joins, clogs, pauses, full restarts with another shard count, at
//! chosen times); the simulator runs it and every one of its checkers must pass: single
//! activation, per-sender order, exactly-once where the run allows it, buffer caps, liveness
//! after healing and rebalance convergence. Runs where no majority survived are classified by
//! the simulator, not failed.

use std::time::Duration;

use arbitrary::{Arbitrary, Unstructured};
use shoal_core::NodeId;
use sim::{Act, Action, Family, MembershipMode, Options, Outcome, Schedule};

/// One fault action; times and durations are drawn in ranges the simulator accepts.
#[derive(Arbitrary, Debug)]
enum FuzzAct {
    Crash {
        node: u8,
        restart_after: u8,
    },
    CrashOldest {
        restart_after: u8,
    },
    Partition {
        side: u8,
        one_way: bool,
        heal_after: u8,
    },
    Break {
        a: u8,
        b: u8,
    },
    Leave {
        node: u8,
        by: Option<u8>,
    },
    Join,
    Clog {
        node: u8,
        peer: Option<u8>,
        lasts_ms: u16,
    },
    Pause {
        node: u8,
        lasts_ms: u16,
    },
    Down {
        node: u8,
        by: u8,
    },
    FullRestart {
        shards: u8,
        restart_after: u8,
    },
}

/// One fuzz input, as `cargo fuzz fmt cluster_schedule <artifact>` prints it.
#[derive(Arbitrary, Debug)]
pub struct FuzzRun {
    seed: u64,
    nodes: u8,
    shards: u8,
    entities: u8,
    duration: u8,
    message_every_ms: u8,
    drift_ppm: u16,
    ignore_stop: u8,
    passivate: u8,
    duplicate: u8,
    small_buffer: bool,
    oracle: bool,
    actions: Vec<(u8, FuzzAct)>,
}

fn node(n: u8, known: u64) -> NodeId {
    NodeId(1 + u64::from(n) % known)
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

impl FuzzRun {
    fn options(&self) -> Options {
        let mut o = Options::from_seed(self.seed);
        o.family = Family::Swarm;
        o.cluster.nodes = 3 + u64::from(self.nodes % 3);
        o.cluster.max_nodes = 7;
        o.cluster.shards = 4 + u32::from(self.shards % 28);
        o.workload.entities = 10 + u32::from(self.entities % 90);
        o.duration = secs(20 + u64::from(self.duration % 60));
        o.workload.message_every =
            Duration::from_millis(10 + u64::from(self.message_every_ms % 90));
        o.cluster.membership = if self.oracle {
            MembershipMode::Oracle
        } else {
            MembershipMode::Real
        };
        if self.small_buffer {
            o.cluster.buffer_size = 30;
        }
        // The schedule below is the run's only source of faults.
        o.faults.stop_recurring();
        o.cluster.drift_ppm = u32::from(self.drift_ppm % 1000);
        o.host.ignore_stop = f64::from(self.ignore_stop % 64) / 256.0;
        o.host.passivate = f64::from(self.passivate % 16) / 256.0;
        o.network.duplicate = f64::from(self.duplicate % 16) / 256.0;
        o.schedule = Some(self.schedule(&o));
        o
    }

    /// At most 10 actions, at whole milliseconds inside the fault phase.
    fn schedule(&self, o: &Options) -> Schedule {
        let mut known = o.cluster.nodes;
        let mut actions: Vec<Action> = Vec::new();
        let phase_ms = o.duration.as_millis() as u64;
        for (when, act) in self.actions.iter().take(10) {
            let at = Duration::from_millis(u64::from(*when) * phase_ms / 256);
            let act = match *act {
                FuzzAct::Crash {
                    node: n,
                    restart_after,
                } => Act::Crash {
                    node: node(n, known),
                    restart_after: secs(5 + u64::from(restart_after % 40)),
                },
                FuzzAct::CrashOldest { restart_after } => Act::CrashOldest {
                    restart_after: secs(5 + u64::from(restart_after % 40)),
                },
                FuzzAct::Partition {
                    side,
                    one_way,
                    heal_after,
                } => {
                    let mut side: std::collections::BTreeSet<NodeId> = (0..known)
                        .filter(|i| side & (1 << i) != 0)
                        .map(|i| NodeId(i + 1))
                        .collect();
                    if side.is_empty() {
                        side.insert(NodeId(1));
                    }
                    Act::Partition {
                        side,
                        one_way,
                        heal_after: secs(2 + u64::from(heal_after % 60)),
                    }
                }
                FuzzAct::Break { a, b } => Act::Break {
                    a: node(a, known),
                    b: node(b, known),
                },
                FuzzAct::Leave { node: n, by } => Act::Leave {
                    node: node(n, known),
                    by: by.map(|b| node(b, known)),
                },
                FuzzAct::Down { node: n, by } => Act::Down {
                    node: node(n, known),
                    by: node(by, known),
                },
                FuzzAct::Join => {
                    known = (known + 1).min(o.cluster.max_nodes);
                    Act::Join
                }
                FuzzAct::Clog {
                    node: n,
                    peer,
                    lasts_ms,
                } => Act::Clog {
                    node: node(n, known),
                    peer: peer.map(|p| node(p, known)),
                    lasts: Duration::from_millis(50 + u64::from(lasts_ms % 3000)),
                },
                FuzzAct::Pause { node: n, lasts_ms } => Act::Pause {
                    node: node(n, known),
                    lasts: Duration::from_millis(50 + u64::from(lasts_ms % 3950)),
                },
                FuzzAct::FullRestart {
                    shards,
                    restart_after,
                } => Act::FullRestart {
                    shards: 1 + u32::from(shards % 64),
                    restart_after: secs(1 + u64::from(restart_after % 30)),
                },
            };
            actions.push(Action { at, act });
        }
        actions.sort_by_key(|a| a.at);
        Schedule(actions)
    }
}

/// Checks one input's bytes, read as [`FuzzRun`]; panics on a broken property.
pub fn run(data: &[u8]) {
    if let Ok(input) = FuzzRun::arbitrary_take_rest(Unstructured::new(data)) {
        check(input);
    }
}

/// Checks one structured input (what the fuzz target calls); panics on a broken property.
pub fn check(fuzz: FuzzRun) {
    let options = fuzz.options();
    let schedule = options.schedule.clone().expect("set above");
    // The schedule must be one users could write: it reads back from its text form.
    assert_eq!(
        schedule.to_string().parse::<Schedule>().as_ref(),
        Ok(&schedule),
        "{schedule}"
    );
    let report = sim::run(options);
    assert!(report.outcome != Outcome::Failed, "{report}");
}
