//! A real cluster of separate OS processes on loopback, driven, broken and verified.
//!
//! The harness starts node processes (this example re-executed with `member`), joins the
//! cluster itself as a proxy-only node, creates the counters and drives acknowledged
//! increments from workers while it runs a tour of real faults: a node joins (rebalance), one
//! is killed with SIGKILL mid-traffic, one is paused with SIGSTOP past the failure detector and
//! resumed, one leaves gracefully (SIGTERM). At the end it reads every node's journal and
//! checks single activation across processes, per-sender order, that no acknowledged increment
//! was lost (except state that died with the killed process) and that every counter answers;
//! it exits non-zero if any check fails.
//!
//! `cargo run --release -p shoal --example cluster -- [--nodes N] [--entities N] [--quick]`

mod journal;
mod member;
mod processes;
mod verify;
mod workload;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use shoal::{EntityTypeConfig, NodeBuilder};

use member::{CLUSTER, COUNTER, Counter, SECRET};
use processes::Member;
use workload::{Progress, WorkerReport};

/// Flags.
struct Flags {
    nodes: u32,
    entities: u32,
    workers: u32,
    /// Seconds between the tour's steps.
    step: u64,
}

fn flags(args: &[String]) -> Result<Flags, String> {
    let mut flags = Flags {
        nodes: 5,
        entities: 10_000,
        workers: 32,
        step: 8,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| -> Result<u64, String> {
            args.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{name} needs a number"))
        };
        match arg.as_str() {
            "--nodes" => flags.nodes = value("--nodes")? as u32,
            "--entities" => flags.entities = value("--entities")? as u32,
            "--workers" => flags.workers = value("--workers")? as u32,
            "--step" => flags.step = value("--step")?,
            "--quick" => {
                flags.entities = 2_000;
                flags.step = 6;
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if flags.nodes < 4 {
        return Err(
            "the tour needs at least 4 nodes (one joins, one is killed, one paused, one leaves)"
                .into(),
        );
    }
    if flags.entities == 0 || flags.workers == 0 {
        return Err("entities and workers must be positive".into());
    }
    Ok(flags)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let outcome = if args.first().map(String::as_str) == Some("member") {
        member_mode(&args[1..], &runtime)
    } else {
        flags(&args).and_then(|flags| runtime.block_on(harness(flags)))
    };
    if let Err(error) = outcome {
        eprintln!("error: {error}");
        std::process::exit(1);
    }
}

fn member_mode(args: &[String], runtime: &tokio::runtime::Runtime) -> Result<(), String> {
    let [index, journal, seeds @ ..] = args else {
        return Err("usage: member <index> <journal> [seed...]".into());
    };
    let index = index.parse().map_err(|_| "bad index")?;
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    runtime.block_on(member::run(index, seeds.to_vec(), journal.into()))
}

fn say(started: Instant, line: &str) {
    println!("[{:>6.1}s] {line}", started.elapsed().as_secs_f64());
}

async fn harness(flags: Flags) -> Result<(), String> {
    let started = Instant::now();
    let dir = std::env::temp_dir().join(format!("shoal-cluster-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    say(started, &format!("journals in {}", dir.display()));

    // All but the last node start now; the last joins during the traffic.
    let mut members: Vec<Member> = Vec::new();
    let first = tokio::task::block_in_place(|| processes::spawn(0, &[], &dir))?;
    let seeds = vec![first.address.clone()];
    members.push(first);
    for index in 1..flags.nodes - 1 {
        members.push(tokio::task::block_in_place(|| {
            processes::spawn(index, &seeds, &dir)
        })?);
    }
    let proxy = NodeBuilder::new(CLUSTER)
        .secret(SECRET)
        .seed_nodes(seeds.clone())
        .membership(member::membership())
        .settings(member::settings())
        .proxy::<Counter>(EntityTypeConfig::new(COUNTER))
        .start()
        .await
        .map_err(|e| format!("proxy: {e}"))?;
    let region = proxy
        .region::<Counter>(COUNTER)
        .map_err(|e| e.to_string())?;
    wait_for_regions(&region, flags.nodes as usize - 1).await?;
    say(started, &format!("{} nodes up", flags.nodes - 1));

    let created = Instant::now();
    let totals = workload::totals(&region, flags.entities, Duration::from_secs(60)).await;
    if totals.iter().any(Option::is_none) {
        return Err("not every counter could be created".into());
    }
    say(
        started,
        &format!(
            "{} counters created in {:?}",
            flags.entities,
            created.elapsed()
        ),
    );

    // Traffic.
    let stop = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(Progress::default());
    let traffic_started = Instant::now();
    let workers: Vec<_> = (0..flags.workers)
        .map(|sender| {
            tokio::spawn(workload::worker(
                sender,
                flags.workers,
                flags.entities,
                region.clone(),
                traffic_started,
                Arc::clone(&stop),
                Arc::clone(&progress),
            ))
        })
        .collect();
    let ticker = tokio::spawn(report_progress(Arc::clone(&progress), started));

    let step = Duration::from_secs(flags.step);
    tokio::time::sleep(step).await;
    say(started, &format!("tour: node {} joins", flags.nodes - 1));
    let joiner = tokio::task::block_in_place(|| processes::spawn(flags.nodes - 1, &seeds, &dir))?;
    members.push(joiner);

    tokio::time::sleep(step).await;
    let victim = &members[2];
    say(
        started,
        &format!("tour: SIGKILL node {} (pid {})", victim.index, victim.pid()),
    );
    victim.signal("KILL")?;
    let killed = (victim.index, journal::now_micros());
    let killed_at = traffic_started.elapsed();

    tokio::time::sleep(step).await;
    let paused = &members[3];
    say(
        started,
        &format!(
            "tour: SIGSTOP node {} for 4 s (past the failure detector)",
            paused.index
        ),
    );
    paused.signal("STOP")?;
    tokio::time::sleep(Duration::from_secs(4)).await;
    paused.signal("CONT")?;
    say(started, &format!("tour: SIGCONT node {}", paused.index));

    tokio::time::sleep(step).await;
    let leaver = &mut members[1];
    let leaving = leaver.index;
    say(started, &format!("tour: node {leaving} leaves (SIGTERM)"));
    leaver.signal("TERM")?;
    let left = tokio::task::block_in_place(|| leaver.wait_exit(Duration::from_secs(30)));
    say(
        started,
        &format!(
            "tour: node {} {}",
            leaving,
            if left {
                "left and exited"
            } else {
                "did not exit in 30 s"
            }
        ),
    );

    tokio::time::sleep(step).await;
    stop.store(true, Ordering::Relaxed);
    let mut reports = Vec::new();
    for (sender, worker) in workers.into_iter().enumerate() {
        reports.push((sender as u32, worker.await.map_err(|e| e.to_string())?));
    }
    ticker.abort();
    let traffic = traffic_started.elapsed();
    let totals = workload::totals(&region, flags.entities, Duration::from_secs(30)).await;
    let ended = journal::now_micros();
    proxy.leave().await;
    drop(members);

    let facts = journal::read_all(&dir).map_err(|e| format!("journals: {e}"))?;
    let acknowledged: Vec<(u32, u32, u64)> = reports
        .iter()
        .flat_map(|(sender, r)| {
            r.acknowledged
                .iter()
                .map(move |&(e, seq)| (e, *sender, seq))
        })
        .collect();
    let verdict = verify::verify(&verify::Evidence {
        facts: &facts,
        acknowledged: &acknowledged,
        killed: Some(killed),
        ended,
        totals: &totals,
    });
    summary(&reports, traffic, killed_at, left, &verdict);
    if verdict.passed() && left {
        let _ = std::fs::remove_dir_all(&dir);
        println!("PASSED");
        Ok(())
    } else {
        Err(format!(
            "verification FAILED (journals kept in {})",
            dir.display()
        ))
    }
}

async fn wait_for_regions(region: &shoal::Region<Counter>, n: usize) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if region.current_regions().await.is_ok_and(|r| r.len() >= n) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!("{n} regions never registered"))
}

async fn report_progress(progress: Arc<Progress>, started: Instant) {
    let mut last = 0;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let acked = progress.acknowledged.load(Ordering::Relaxed);
        let failed = progress.failed.load(Ordering::Relaxed);
        say(
            started,
            &format!(
                "{acked} increments acknowledged ({}/s), {failed} failed",
                acked - last
            ),
        );
        last = acked;
    }
}

fn summary(
    reports: &[(u32, WorkerReport)],
    traffic: Duration,
    killed_at: Duration,
    left: bool,
    verdict: &verify::Verdict,
) {
    let mut latencies: Vec<u32> = reports
        .iter()
        .flat_map(|(_, r)| r.latencies.iter().copied())
        .collect();
    latencies.sort_unstable();
    let at = |q: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or(0)
    };
    let acked = latencies.len();
    let mut failures = std::collections::BTreeMap::new();
    for (_, report) in reports {
        for (kind, n) in &report.failures {
            *failures.entry(kind.clone()).or_insert(0) += n;
        }
    }
    // The kill's last failed ask (before the pause's step): when its shards served again.
    let recovery = reports
        .iter()
        .flat_map(|(_, r)| r.failed_at.iter())
        .filter(|&&t| t >= killed_at && t < killed_at + Duration::from_secs(30))
        .max()
        .map(|t| *t - killed_at);
    println!();
    println!("| figure | value |");
    println!("|---|---|");
    println!(
        "| increments acknowledged | {acked} in {:.1} s ({:.0}/s) |",
        traffic.as_secs_f64(),
        acked as f64 / traffic.as_secs_f64()
    );
    println!("| ask p50 / p99 | {} µs / {} µs |", at(0.5), at(0.99));
    println!("| failed asks | {failures:?} |");
    println!("| SIGKILL to its shards serving again | {recovery:?} |");
    println!("| graceful leave completed | {left} |");
    println!(
        "| activations / deliveries journaled | {} / {} |",
        verdict.activations, verdict.deliveries
    );
    println!(
        "| single activation violations | {} |",
        verdict.double_activations.len()
    );
    println!(
        "| per-sender order violations | {} |",
        verdict.order_violations.len()
    );
    println!("| acknowledged increments lost | {} |", verdict.lost.len());
    println!(
        "| counters restarted empty (lived on the killed node) | {} |",
        verdict.restarted
    );
    println!(
        "| counters short of their acknowledged total | {} |",
        verdict.short.len()
    );
    println!("| counters silent at the end | {} |", verdict.silent.len());
    for (what, list) in [
        (
            "double activations",
            format!(
                "{:?}",
                verdict
                    .double_activations
                    .iter()
                    .take(10)
                    .collect::<Vec<_>>()
            ),
        ),
        (
            "order violations",
            format!(
                "{:?}",
                verdict.order_violations.iter().take(10).collect::<Vec<_>>()
            ),
        ),
        (
            "lost",
            format!("{:?}", verdict.lost.iter().take(10).collect::<Vec<_>>()),
        ),
        (
            "short",
            format!("{:?}", verdict.short.iter().take(10).collect::<Vec<_>>()),
        ),
    ] {
        if list != "[]" {
            println!("first {what}: {list}");
        }
    }
}
