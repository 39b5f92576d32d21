//! A node process of the demo: an event-sourced counter entity (each increment an event in
//! the state store) that journals every start, stop and delivery, and the node that hosts it. The harness starts one of these per node (the example
//! re-executing itself with `member`), reads the address it listens on from its first line of
//! output, and stops it with SIGKILL, SIGSTOP/SIGCONT or SIGTERM (a graceful leave).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use shoal::management::{Endpoint, ManagementSettings};
use shoal::{
    Downing, Entity, EntityContext, EventSourced, EventSourcedEntity, FailureDetectorSettings,
    MembershipSettings, NodeBuilder, NodeEvent, Persist, PersistError, ShardingSettings, Snapshots,
};

use crate::journal::{Fact, Journal, now_micros};
use crate::leasing::Leasing;
use crate::remembered::StoreSpec;

/// The cluster's name and secret (loopback only).
pub(crate) const CLUSTER: &str = "shoal-demo";
pub(crate) const SECRET: &str = "shoal demo secret";
/// The entity type.
pub(crate) const COUNTER: &str = "counter";

/// What a counter is sent.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub(crate) enum CounterOp {
    /// Add one; `seq` numbers the increments of `sender` to this counter from 1.
    Increment { sender: u32, seq: u64 },
    /// Answer the total.
    Get,
}

/// A counter's persisted state: its total, the sum of its events.
#[derive(Default, Deserialize, Serialize)]
pub(crate) struct CounterState {
    total: u64,
}

/// A counter's event: one increment, named by who sent it.
#[derive(Clone, Copy, Debug, Deserialize, Serialize)]
pub(crate) struct Incremented {
    pub(crate) sender: u32,
    pub(crate) seq: u64,
}

impl EventSourced for CounterState {
    type Command = CounterOp;
    type Event = Incremented;
    type Reply = u64;

    fn decide(&self, _: &mut EntityContext, op: CounterOp) -> Persist<Incremented, u64> {
        match op {
            CounterOp::Increment { sender, seq } => {
                Persist::events(vec![Incremented { sender, seq }], self.total + 1)
            }
            CounterOp::Get => Persist::reply(self.total),
        }
    }

    fn apply(&mut self, _: &Incremented) {
        self.total += 1;
    }
}

/// How often a counter saves a snapshot.
const SNAPSHOT_EVERY: u64 = 50;

/// A counter that journals what happens to it (the demo's journal, for the checks), its state
/// event sourced.
pub(crate) struct Counter {
    entity: u32,
    node: u32,
    state: EventSourcedEntity<CounterState>,
    journal: Option<Journal>,
}

impl Entity for Counter {
    type Message = CounterOp;
    type Reply = Result<u64, PersistError>;

    async fn on_start(&mut self, ctx: &mut EntityContext) {
        self.state.on_start(ctx).await;
    }

    async fn handle(&mut self, ctx: &mut EntityContext, op: CounterOp) -> Self::Reply {
        let increment = match op {
            CounterOp::Increment { sender, seq } => Some((sender, seq)),
            CounterOp::Get => None,
        };
        let reply = self.state.handle(ctx, op).await;
        // Journaled once persisted: an increment whose write failed is not applied, and is
        // handled again when it is sent again.
        if let (Some((sender, seq)), Some(journal), Ok(_)) = (increment, &self.journal, &reply) {
            journal.record(&Fact::Delivered {
                entity: self.entity,
                node: self.node,
                sender,
                seq,
            });
        }
        reply
    }

    async fn on_stop(&mut self, _ctx: &mut EntityContext) {
        if let Some(journal) = &self.journal {
            journal.record(&Fact::Stopped {
                entity: self.entity,
                node: self.node,
                at: now_micros(),
            });
        }
    }
}

/// The entity id of counter `n`.
pub(crate) fn entity_id(n: u32) -> String {
    format!("e{n}")
}

/// How members decide about unreachable ones.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub(crate) enum DowningMode {
    /// Keep-majority (the default): a minority side downs itself.
    KeepMajority,
    /// Static quorum: a side holding fewer members than this downs itself.
    StaticQuorum(usize),
    /// Keep-oldest, down-if-alone: the side holding the oldest member survives, unless that
    /// member is alone.
    KeepOldest,
    /// Lease-majority: the side whose leader acquires the downing lease survives (the side
    /// without a majority asks later).
    LeaseMajority,
    /// Auto-down (the negative control): each side downs the other, so both live.
    AutoDown,
}

impl DowningMode {
    /// The name used on a member's command line.
    pub(crate) fn name(self) -> String {
        match self {
            Self::KeepMajority => "keep-majority".into(),
            Self::StaticQuorum(size) => format!("static-quorum:{size}"),
            Self::KeepOldest => "keep-oldest".into(),
            Self::LeaseMajority => "lease-majority".into(),
            Self::AutoDown => "auto-down".into(),
        }
    }

    /// Parses what `name` wrote.
    pub(crate) fn parse(name: &str) -> Result<Self, String> {
        match name {
            "keep-majority" => Ok(Self::KeepMajority),
            "keep-oldest" => Ok(Self::KeepOldest),
            "lease-majority" => Ok(Self::LeaseMajority),
            "auto-down" => Ok(Self::AutoDown),
            _ => match name.strip_prefix("static-quorum:").map(str::parse) {
                Some(Ok(size)) if size > 0 => Ok(Self::StaticQuorum(size)),
                _ => Err(format!("unknown downing mode {name:?}")),
            },
        }
    }
}

/// Membership for a demo on one machine: failures noticed within about 2 s, downing after
/// 5 s more of stable unreachability.
pub(crate) fn membership(mode: DowningMode) -> MembershipSettings {
    let mut m = MembershipSettings::new(Vec::<shoal::SeedNode>::new());
    m.gossip_interval = Duration::from_millis(200);
    m.heartbeat_interval = Duration::from_millis(250);
    m.failure_detector = FailureDetectorSettings {
        acceptable_heartbeat_pause: Duration::from_secs(2),
        first_heartbeat_estimate: Duration::from_millis(250),
        ..FailureDetectorSettings::default()
    };
    let stable_after = STABLE_AFTER;
    m.downing = match mode {
        DowningMode::KeepMajority => Downing::KeepMajority { stable_after },
        DowningMode::StaticQuorum(quorum_size) => Downing::StaticQuorum {
            stable_after,
            quorum_size,
        },
        DowningMode::KeepOldest => Downing::KeepOldest {
            stable_after,
            down_if_alone: true,
        },
        // A grant outlasts both sides' asks (twice stable-after and the minority's delay).
        DowningMode::LeaseMajority => Downing::LeaseMajority {
            stable_after,
            acquire_delay_for_minority: Duration::from_secs(2),
            lease_ttl: stable_after * 3,
        },
        DowningMode::AutoDown => Downing::AutoDown {
            after: stable_after,
        },
    };
    m
}

/// How long unreachability must be stable before a downing decision.
pub(crate) const STABLE_AFTER: Duration = Duration::from_secs(5);

/// Sharding settings for the demo: Akka's, with a quicker rebalance, and a downed member's
/// shards reallocated `stable-after` after its removal (Akka's advice for the margin).
pub(crate) fn settings() -> ShardingSettings {
    ShardingSettings {
        rebalance_interval: Duration::from_secs(2),
        down_removal_margin: STABLE_AFTER,
        ..ShardingSettings::default()
    }
}

/// What a node process is told on its command line.
pub(crate) struct MemberArgs {
    pub(crate) index: u32,
    pub(crate) journal: PathBuf,
    /// Where to listen (`127.0.0.1:0`, or the node's namespace address).
    pub(crate) bind: String,
    pub(crate) downing: DowningMode,
    /// The remember store (`StoreSpec::arg`).
    pub(crate) store: String,
    /// The lease store and what uses it.
    pub(crate) leasing: Leasing,
    pub(crate) seeds: Vec<String>,
}

impl MemberArgs {
    /// The command line after `member`.
    pub(crate) fn to_args(&self) -> Vec<String> {
        let mut args = vec![
            self.index.to_string(),
            self.journal.display().to_string(),
            self.bind.clone(),
            self.downing.name(),
            self.store.clone(),
        ];
        args.extend(self.leasing.args());
        args.extend(self.seeds.iter().cloned());
        args
    }

    /// Parses what `to_args` wrote.
    pub(crate) fn parse(args: &[String]) -> Result<Self, String> {
        let [
            index,
            journal,
            bind,
            downing,
            store,
            lease,
            shards,
            seeds @ ..,
        ] = args
        else {
            return Err(
                "usage: member <index> <journal> <bind> <downing> <store> <lease> \
                 <shard-leases> [seed...]"
                    .into(),
            );
        };
        let dir = Path::new(journal)
            .parent()
            .unwrap_or_else(|| Path::new("."));
        Ok(Self {
            index: index.parse().map_err(|_| format!("bad index {index:?}"))?,
            journal: journal.into(),
            bind: bind.clone(),
            downing: DowningMode::parse(downing)?,
            store: store.clone(),
            leasing: Leasing::parse(lease, shards, dir)?,
            seeds: seeds.to_vec(),
        })
    }
}

/// Where a node bound to `bind` serves its management endpoint: the same host, a free port.
fn management_bind(bind: &str) -> Result<SocketAddr, String> {
    let mut address: SocketAddr = bind
        .parse()
        .map_err(|e| format!("bind address {bind:?}: {e}"))?;
    address.set_port(0);
    Ok(address)
}

/// Runs a node process until its member stops (SIGTERM leaves gracefully; a downed member
/// stops by itself), journaling its entities, its dead letters and its exit.
pub(crate) async fn run(args: MemberArgs) -> Result<(), String> {
    let index = args.index;
    crate::processes::exit_with_harness();
    let journal = Journal::open(&args.journal).map_err(|e| format!("journal: {e}"))?;
    let factory_journal = journal.clone();
    let store = StoreSpec::parse(&args.store, &args.journal)?;
    let management = management_bind(&args.bind)?;
    let builder = NodeBuilder::new(CLUSTER)
        .secret(SECRET)
        .bind(args.bind)
        .seed_nodes(args.seeds)
        .membership(membership(args.downing))
        .settings(settings())
        .leave_on_signal(true);
    let builder = args.leasing.open(store.open(builder).await?).await?;
    let node = builder
        .entity(args.leasing.configure(store.counter_config()), move |id| {
            let entity = id.as_str()[1..].parse().unwrap_or(u32::MAX);
            factory_journal.record(&Fact::Started {
                entity,
                node: index,
                at: now_micros(),
            });
            Counter {
                entity,
                node: index,
                state: EventSourcedEntity::new(
                    CounterState::default(),
                    Snapshots::Every(SNAPSHOT_EVERY),
                ),
                journal: Some(factory_journal.clone()),
            }
        })
        .start()
        .await
        .map_err(|e| format!("start: {e}"))?;
    // The management endpoint on the node's own host, any free port: readiness, the members,
    // the shards and the page, over HTTP.
    let endpoint = Endpoint::start(node.clone(), ManagementSettings::new(management))
        .await
        .map_err(|e| format!("management endpoint: {e}"))?;
    // The harness reads these two lines to learn where the node and its endpoint listen.
    println!("listening {}", node.address());
    println!("management http://{}/", endpoint.address());
    let mut events = node.events();
    loop {
        match events.recv().await {
            Ok(NodeEvent::Stopped) | Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            Ok(NodeEvent::Sharding(shoal::Event::DeadLetter { reason, .. })) => {
                journal.record(&Fact::DeadLetter {
                    node: index,
                    reason: format!("{reason:?}"),
                });
            }
            Ok(_) | Err(_) => {}
        }
    }
    journal.record(&Fact::Exited {
        node: index,
        at: now_micros(),
    });
    Ok(())
}
