//! The runtime's own glue (transport, handshake, reconnects, host loop, entity drivers) on
//! turmoil's simulated TCP and clock: a three-node cluster through a partition and its
//! healing, and a node that crashes and restarts as a new incarnation. The same seed gives the
//! same run, event for event: turmoil orders the network and the clock, and the host loop
//! never picks between ready queues at random.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Op, builder, fast_membership};
use futures_util::future::BoxFuture;
use shoal::{AskError, BoxConnection, Downing, Listener, Network, Node, NodeEvent, NodeId};
use tokio::sync::broadcast::error::RecvError;

/// turmoil's TCP as the node's network.
struct SimulatedTcp;

impl Network for SimulatedTcp {
    fn connect(&self, address: &str) -> BoxFuture<'static, std::io::Result<BoxConnection>> {
        let address = address.to_owned();
        Box::pin(async move {
            let stream = turmoil::net::TcpStream::connect(address.as_str()).await?;
            Ok(Box::new(stream) as BoxConnection)
        })
    }

    fn bind(&self, address: &str) -> BoxFuture<'static, std::io::Result<Box<dyn Listener>>> {
        let address = address.to_owned();
        Box::pin(async move {
            let listener = turmoil::net::TcpListener::bind(address.as_str()).await?;
            Ok(Box::new(SimulatedListener(listener)) as Box<dyn Listener>)
        })
    }
}

struct SimulatedListener(turmoil::net::TcpListener);

impl Listener for SimulatedListener {
    fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.0.local_addr()
    }

    fn accept(&mut self) -> BoxFuture<'_, std::io::Result<(BoxConnection, std::net::SocketAddr)>> {
        Box::pin(async move {
            let (stream, from) = self.0.accept().await?;
            Ok((Box::new(stream) as BoxConnection, from))
        })
    }
}

const PORT: u16 = 7355;
const HOSTS: [&str; 3] = ["a", "b", "c"];
const COUNTERS: usize = 24;
const ASK: Duration = Duration::from_secs(1);

/// When the network breaks and heals (simulated time).
const PARTITION_AT: Duration = Duration::from_secs(10);
const HEAL_AT: Duration = Duration::from_secs(13);
const CRASH_AT: Duration = Duration::from_secs(25);
const RESTART_AT: Duration = Duration::from_secs(26);

/// The nodes' current handles, by host.
type Nodes = Arc<Mutex<BTreeMap<&'static str, Node>>>;
/// What happened, in order, with simulated milliseconds.
type Trace = Arc<Mutex<Vec<String>>>;

fn record(trace: &Trace, line: String) {
    let ms = turmoil::sim_elapsed().unwrap_or_default().as_millis();
    trace.lock().unwrap().push(format!("{ms:>6} {line}"));
}

/// Membership that notices a partition quickly but downs only after 5 s, so a 3 s partition
/// heals without anyone being removed.
fn membership() -> shoal::MembershipSettings {
    let mut m = fast_membership();
    m.downing = Downing::KeepMajority {
        stable_after: Duration::from_secs(5),
    };
    m
}

/// Runs `host` as a node joining through `a`; every (re)start is a new incarnation.
fn add_node(
    sim: &mut turmoil::Sim<'_>,
    host: &'static str,
    seed: u64,
    nodes: &Nodes,
    trace: &Trace,
) {
    let lives = Arc::new(AtomicU64::new(0));
    let (nodes, trace) = (Arc::clone(nodes), Arc::clone(trace));
    sim.host(host, move || {
        let (nodes, trace, lives) = (Arc::clone(&nodes), Arc::clone(&trace), Arc::clone(&lives));
        async move {
            let life = lives.fetch_add(1, Ordering::SeqCst) + 1;
            let address = format!("{host}:{PORT}");
            let node = builder(&[format!("a:{PORT}")])
                .membership(membership())
                .network(SimulatedTcp)
                .bind(format!("0.0.0.0:{PORT}"))
                .advertise(address.as_str())
                .seed(seed ^ NodeId::of_address(&address).0 ^ life)
                .incarnation(life)
                .start()
                .await?;
            record(&trace, format!("{host} started as {}", node.member()));
            let mut events = node.events();
            nodes.lock().unwrap().insert(host, node);
            loop {
                match events.recv().await {
                    Ok(NodeEvent::Stopped) | Err(RecvError::Closed) => break,
                    Ok(event) => record(&trace, format!("{host}: {event:?}")),
                    Err(RecvError::Lagged(n)) => record(&trace, format!("{host}: lagged {n}")),
                }
            }
            Ok(())
        }
    });
}

fn node(nodes: &Nodes, host: &str) -> Node {
    nodes.lock().unwrap()[host].clone()
}

/// Adds 1 to every counter through `via`, all at once: the outcomes, in counter order.
async fn add_all(via: &Node) -> Vec<Result<u64, AskError>> {
    let asks = (0..COUNTERS).map(|i| async move {
        let counter = common::counter(via, &format!("c{i}"));
        counter.ask(&Op::Add(1), ASK).await
    });
    futures_util::future::join_all(asks).await
}

/// Asks every counter's total through `via` until each has answered (at most `tries` rounds,
/// 500 ms apart): the totals, and the rounds it took.
async fn until_all_answer(via: &Node, tries: usize) -> (Vec<u64>, usize) {
    let mut totals = vec![None; COUNTERS];
    for round in 1..=tries {
        for (i, total) in totals.iter_mut().enumerate() {
            if total.is_none() {
                let counter = common::counter(via, &format!("c{i}"));
                *total = counter.ask(&Op::Get, ASK).await.ok();
            }
        }
        if totals.iter().all(Option::is_some) {
            return (totals.into_iter().flatten().collect(), round);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("counters never answered: {totals:?}");
}

async fn sleep_until(at: Duration) {
    let now = turmoil::sim_elapsed().unwrap_or_default();
    tokio::time::sleep(at.saturating_sub(now)).await;
}

/// The workload, run as turmoil's client: it records what every phase saw.
async fn drive(nodes: Nodes, trace: Trace) -> turmoil::Result {
    // Formation: every node registers its region with the coordinator.
    while nodes.lock().unwrap().len() < HOSTS.len() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for host in HOSTS {
        common::await_regions(&node(&nodes, host), HOSTS.len()).await;
    }
    record(&trace, "formed".into());
    let before = add_all(&node(&nodes, "b")).await;
    assert!(
        before.iter().all(Result::is_ok),
        "before the partition: {before:?}"
    );

    // During the partition, counters on `a` cannot answer `b`; the others can.
    sleep_until(PARTITION_AT + Duration::from_millis(1500)).await;
    let during = add_all(&node(&nodes, "b")).await;
    let failed = during.iter().filter(|o| o.is_err()).count();
    record(
        &trace,
        format!("during the partition {failed} of {COUNTERS} asks failed"),
    );
    // The coordinator and a share of the shards are on `a`: only those counters are cut off
    // (`b` knows where the others live).
    assert!(0 < failed && failed < COUNTERS, "{during:?}");

    // After healing, everything answers again (held traffic was delivered). No acknowledged
    // add was lost, none applied twice.
    sleep_until(HEAL_AT + Duration::from_secs(2)).await;
    let (totals, rounds) = until_all_answer(&node(&nodes, "c"), 10).await;
    record(
        &trace,
        format!("healed: all answered in {rounds} rounds: {totals:?}"),
    );
    for (i, total) in totals.iter().enumerate() {
        let acknowledged = 1 + u64::from(during[i].is_ok());
        assert!(
            (acknowledged..=2).contains(total),
            "counter c{i}: total {total}, {acknowledged} adds acknowledged"
        );
    }

    let dialed_before = node(&nodes, "a")
        .stats()
        .await
        .expect("stats")
        .transport
        .dialed;

    // `c` crashes and restarts as a new incarnation: its shards move, then everything answers.
    sleep_until(RESTART_AT + Duration::from_millis(500)).await;
    let (_, rounds) = until_all_answer(&node(&nodes, "a"), 60).await;
    record(
        &trace,
        format!("after the restart: all answered in {rounds} rounds"),
    );
    let totals = add_all(&node(&nodes, "b")).await;
    record(&trace, format!("totals {totals:?}"));
    assert!(
        totals.iter().all(Result::is_ok),
        "after the restart: {totals:?}"
    );
    let stats = node(&nodes, "a").stats().await.expect("stats");
    record(&trace, format!("a's transport {:?}", stats.transport));
    // `a`'s connection to the crashed `c` broke; its peer task dialled the new incarnation.
    assert!(
        stats.transport.dialed > dialed_before,
        "{:?}",
        stats.transport
    );
    Ok(())
}

/// One run: the trace of everything the nodes and the workload saw.
fn run(seed: u64) -> Vec<String> {
    let mut sim = turmoil::Builder::new()
        .simulation_duration(Duration::from_secs(120))
        .rng_seed(seed)
        .build();
    let nodes: Nodes = Arc::default();
    let trace: Trace = Arc::default();
    for host in HOSTS {
        add_node(&mut sim, host, seed, &nodes, &trace);
    }
    sim.client("driver", drive(Arc::clone(&nodes), Arc::clone(&trace)));
    let mut faults = vec![
        (PARTITION_AT, "partition"),
        (HEAL_AT, "heal"),
        (CRASH_AT, "crash"),
        (RESTART_AT, "restart"),
    ];
    faults.reverse();
    loop {
        while faults.last().is_some_and(|(at, _)| sim.elapsed() >= *at) {
            let (_, fault) = faults.pop().unwrap();
            trace
                .lock()
                .unwrap()
                .push(format!("{:>6} {fault}", sim.elapsed().as_millis()));
            match fault {
                // Held, not dropped: TCP retransmits what a partition delays.
                "partition" => {
                    sim.hold("a", "b");
                    sim.hold("a", "c");
                }
                "heal" => {
                    sim.release("a", "b");
                    sim.release("a", "c");
                }
                "crash" => sim.crash("c"),
                _ => sim.bounce("c"),
            }
        }
        if sim.step().expect("the simulation failed") {
            break;
        }
    }
    trace.lock().unwrap().clone()
}

fn has(trace: &[String], needle: &str) -> bool {
    trace.iter().any(|line| line.contains(needle))
}

#[test]
fn a_partition_heals_and_a_restarted_peer_rejoins_as_a_new_incarnation() {
    common::logs();
    // SHOAL_SIM_SEEDS=1000 explores further (each run takes a fraction of a second).
    let seeds = std::env::var("SHOAL_SIM_SEEDS").map_or(10, |n| n.parse().expect("a number"));
    for seed in 1..=seeds {
        check_run(seed);
    }
}

/// The scenario's assertions on one seed's trace (`SHOW_TRACE=1` prints it).
fn check_run(seed: u64) {
    let trace = run(seed);
    if std::env::var_os("SHOW_TRACE").is_some() {
        println!("seed {seed}:\n{}", trace.join("\n"));
    }
    let text = format!("seed {seed}:\n{}", trace.join("\n"));
    // The partition was seen and healed without removing anyone.
    assert!(has(&trace, "b: MemberUnreachable"), "{text}");
    assert!(has(&trace, "b: MemberReachable"), "{text}");
    assert!(has(&trace, "during the partition"), "{text}");
    let removed_before_crash = trace
        .iter()
        .take_while(|line| !line.ends_with(" crash"))
        .any(|line| line.contains("MemberRemoved"));
    assert!(
        !removed_before_crash,
        "a member was removed by the partition:\n{text}"
    );
    // The restarted node is a new incarnation; the old one is removed.
    assert!(has(&trace, "c started as"), "{text}");
    let c = NodeId::of_address(&format!("c:{PORT}"));
    let up_again =
        format!("a: MemberUp {{ member: MemberId {{ node: {c:?}, incarnation: Incarnation(2) }}");
    assert!(trace.iter().any(|l| l.contains(&up_again)), "{text}");
    assert!(has(&trace, "after the restart: all answered"), "{text}");
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let first = run(11);
    let second = run(11);
    assert!(first.len() > 20, "too little happened: {first:?}");
    if first != second {
        let at = first.iter().zip(&second).position(|(a, b)| a != b);
        panic!(
            "runs diverged at line {at:?}:\n{}\n---\n{}",
            first.join("\n"),
            second.join("\n")
        );
    }
    // The seed matters: the network's latencies follow from it.
    assert_ne!(run(12), first, "another seed gave the same run");
}
