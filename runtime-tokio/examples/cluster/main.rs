//! A real cluster of separate OS processes, driven, broken and verified.
//!
//! The harness starts node processes (this example re-executed with `member`), joins the
//! cluster itself as a proxy-only node, creates the counters and drives acknowledged
//! increments from workers while it runs a tour of real faults, chosen by a seed: a node joins
//! (rebalance), one is killed with SIGKILL mid-traffic, one is paused with SIGSTOP past the
//! failure detector and resumed, one leaves gracefully (SIGTERM). With `--chaos` (root on
//! Linux) each node runs in its own network namespace and the tour breaks links instead:
//! latency and loss, a symmetric partition, a one-way partition; `--auto-down` runs it with
//! the auto-down setting as a negative control, which must break single activation. At the end
//! the harness reads every node's journal and checks single activation across processes,
//! per-sender order, that no acknowledged increment was lost and that every counter answers
//! with its journaled total; it prints a summary table and exits non-zero if a check fails.
//!
//! `cargo run --release -p shoal --example cluster -- --help` lists the flags (`--quick`,
//! `--chaos [--auto-down]`, `--nodes N`, `--entities N`, `--seed N`, `--store ...`, ...).

mod chaos;
mod cli;
mod harness;
mod http;
mod journal;
mod leasing;
mod member;
mod netns;
mod processes;
mod remembered;
mod report;
mod sending;
mod tour;
mod verify;
mod view;
mod watch;
mod workload;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use shoal::{EntityTypeConfig, NodeBuilder};

use cli::Flags;
use harness::Run;
use member::{CLUSTER, COUNTER, Counter, DowningMode, MemberArgs, SECRET};
use netns::{Host, Lab};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("member") {
        let outcome = MemberArgs::parse(&args[1..]).and_then(|args| {
            tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
                .with_writer(std::io::stderr)
                .init();
            tokio::runtime::Runtime::new()
                .map_err(|e| e.to_string())?
                .block_on(member::run(args))
        });
        exit_on(outcome);
        return;
    }
    let flags = match cli::flags(&args) {
        Ok(flags) => flags,
        // `--help` prints and exits 0; a refused flag or value prints why and exits 2.
        Err(error) => error.exit(),
    };
    exit_on(run(&flags));
}

/// Runs the harness: in its chaos lab if asked for, under a runtime of its own.
fn run(flags: &Flags) -> Result<(), String> {
    let lab = if flags.chaos { lab(flags)? } else { None };
    // Built after entering the lab's namespace: the runtime's threads inherit it.
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    let outcome = runtime.block_on(harness(flags, lab.as_ref()));
    drop(runtime);
    outcome
}

fn exit_on(outcome: Result<(), String>) {
    if let Err(error) = outcome {
        eprintln!("error: {error}");
        std::process::exit(1);
    }
}

/// The chaos mode's namespaces, entered; `None` (said aloud) where they cannot be made.
fn lab(flags: &Flags) -> Result<Option<Lab>, String> {
    // One namespace spare: the equal halves need an even number of members, and a node may
    // join there to make one.
    match Lab::create(flags.nodes + 1).and_then(|lab| lab.enter_client().map(|()| lab)) {
        Ok(lab) => Ok(Some(lab)),
        Err(why) if flags.downing == DowningMode::AutoDown => Err(format!(
            "the negative control needs network namespaces, which are not available: {why}"
        )),
        Err(why) => {
            println!(
                "network namespaces are not available ({why}): running the process-level faults only"
            );
            Ok(None)
        }
    }
}

async fn harness(flags: &Flags, lab: Option<&Lab>) -> Result<(), String> {
    // Named by process and start time: a directory kept from an earlier failed run is never
    // appended to.
    let dir = std::env::temp_dir().join(format!(
        "shoal-cluster-{}-{}",
        std::process::id(),
        journal::now_micros() / 1_000_000
    ));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let store = remembered::StoreSpec::parse(&flags.store, &dir)?;
    let leasing = leasing::Leasing {
        store: (flags.lease.as_deref())
            .map(|spec| leasing::LeaseSpec::parse(spec, &dir))
            .transpose()?,
        shard_leases: flags.shard_leases,
    };
    // The harness's own node logs next to the nodes' (`RUST_LOG`, info by default).
    let log = std::fs::File::create(dir.join("harness.log")).map_err(|e| e.to_string())?;
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into());
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(Mutex::new(log))
        .with_ansi(false)
        .init();
    let view = view::View::new(Duration::from_secs(flags.duration.max(40)));
    let (tour_plan, chaos_plan) = (
        tour::Plan::new(flags.seed, flags.nodes),
        chaos::Plan::new(flags.seed, flags.nodes, flags.downing),
    );
    let plan = match lab {
        Some(_) => chaos_plan.describe(),
        None => tour_plan.describe(),
    };
    let quiet = remembered::quiet(flags.entities);
    let setup = format!(
        "{} nodes{}, {} counters (+{} quiet ones, {}), {} workers ({}), {}{}, seed {}",
        flags.nodes,
        if lab.is_some() {
            " in network namespaces"
        } else {
            " on loopback"
        },
        flags.entities,
        quiet.len(),
        store.describe(),
        flags.workers,
        match flags.delivery {
            sending::DeliveryMode::Reliable => "reliable sends",
            sending::DeliveryMode::Ask => "asks",
        },
        flags.downing.name(),
        leasing.describe(),
        flags.seed
    );
    view.say(&format!("{setup}; journals in {}", dir.display()));
    view.say(&format!("fault plan (seed {}): {plan}", flags.seed));

    // All but the last node start now (all of them in the chaos mode); the last joins later.
    let first_wave = if lab.is_some() {
        flags.nodes
    } else {
        flags.nodes - 1
    };
    let first = harness::spawn_member(lab, &dir, 0, &[], (flags.downing, &leasing), &store)?;
    let seeds = vec![first.address.clone()];
    let addresses = Arc::new(Mutex::new(vec![first.listening()]));
    let http = http::Http::new();
    let proxy = leasing
        .open(
            NodeBuilder::new(CLUSTER)
                .secret(SECRET)
                .bind(harness::bind_address(lab, Host::Client))
                .seed_nodes(seeds.clone())
                .membership(member::membership(flags.downing))
                .settings(member::settings())
                .proxy::<Counter>(EntityTypeConfig::new(COUNTER)),
        )
        .await?
        .start()
        .await
        .map_err(|e| format!("proxy: {e}"))?;
    let watch = watch::Watch::start(&proxy);
    let region = proxy
        .region::<Counter>(COUNTER)
        .map_err(|e| e.to_string())?;
    view.say(&harness::page_line(&first));
    let mut run = Run {
        view: Arc::clone(&view),
        watch: watch.clone(),
        region: region.clone(),
        node: proxy.clone(),
        entities: flags.entities,
        quiet: quiet.clone(),
        store,
        downing: flags.downing,
        leasing,
        lab,
        dir: dir.clone(),
        seeds,
        members: vec![first],
        addresses: Arc::clone(&addresses),
        http: http.clone(),
        figures: Vec::new(),
        killed: Vec::new(),
    };
    for index in 1..first_wave {
        run.spawn(index)?;
    }
    wait_for_regions(&region, first_wave as usize).await?;
    view.say(&format!("{first_wave} nodes up"));

    let created = Instant::now();
    run.all_answer(Duration::from_secs(60)).await?;
    run.figure(
        &format!("{} counters created in", flags.entities),
        format!("{:.0} ms", created.elapsed().as_secs_f64() * 1000.0),
    );
    // The quiet counters are messaged now and never again: after a crash only remembering
    // can start them.
    remembered::touch(&region, quiet, Duration::from_secs(60)).await?;

    // Traffic, and the live view.
    let stop = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(workload::Progress::default());
    let breaker = workload::Breaker::default();
    let mut ways = Vec::new();
    for sender in 0..flags.workers {
        ways.push(sending::Sender::new(flags.delivery, &region, sender).await?);
    }
    let traffic_started = Instant::now();
    let workers: Vec<_> = (0..flags.workers)
        .zip(ways)
        .map(|(sender, way)| {
            tokio::spawn(workload::worker(
                sender,
                (flags.workers, flags.entities),
                way,
                breaker.clone(),
                Arc::clone(&stop),
                Arc::clone(&progress),
            ))
        })
        .collect();
    let refresh = tokio::spawn(view::refresh(
        Arc::clone(&view),
        Arc::clone(&progress),
        http,
        addresses,
    ));

    let toured = match lab {
        Some(lab) => chaos::run(&mut run, lab, &chaos_plan).await,
        None => tour::run(&mut run, &tour_plan).await,
    };
    if let Err(why) = &toured {
        view.say(&format!("tour FAILED: {why}"));
    }
    let rest = Duration::from_secs(flags.duration).saturating_sub(traffic_started.elapsed());
    tokio::time::sleep(rest.max(Duration::from_secs(2))).await;
    stop.store(true, Ordering::Relaxed);
    let mut reports = Vec::new();
    for (sender, worker) in workers.into_iter().enumerate() {
        reports.push((sender as u32, worker.await.map_err(|e| e.to_string())?));
    }
    let traffic = traffic_started.elapsed();
    refresh.abort();
    view.set_fault("none");
    let totals = workload::totals(&region, flags.entities, Duration::from_secs(20)).await;
    let ended = journal::now_micros();
    proxy.leave().await;
    let Run {
        members,
        figures,
        killed,
        store,
        ..
    } = run;
    drop(members);
    view.finish();
    let stored = store.journals(flags.entities).await?;

    let facts = journal::read_all(&dir).map_err(|e| format!("journals: {e}"))?;
    let by_sender =
        |pick: fn(&workload::WorkerReport) -> &Vec<(u32, u64)>| -> Vec<(u32, u32, u64)> {
            reports
                .iter()
                .flat_map(|(sender, r)| pick(r).iter().map(move |&(e, seq)| (e, *sender, seq)))
                .collect()
        };
    let acknowledged = by_sender(|r| &r.acknowledged);
    let issued = by_sender(|r| &r.issued);
    let verdict = verify::verify(&verify::Evidence {
        facts: &facts,
        acknowledged: &acknowledged,
        issued: &issued,
        exactly_once: flags.delivery == sending::DeliveryMode::Reliable,
        killed: &killed,
        ended,
        totals: &totals,
        stored: &stored,
    });
    report::print(&report::Summary {
        setup,
        reports: &reports,
        traffic,
        figures: &figures,
        harness_dead_letters: watch.dead_letters(),
        verdict: &verdict,
    });
    judge(flags, &dir, toured, &verdict)
}

/// The run's outcome: every check passed (keep-majority), or single activation broken as it
/// must be (the auto-down negative control).
fn judge(
    flags: &Flags,
    dir: &std::path::Path,
    toured: Result<(), String>,
    verdict: &verify::Verdict,
) -> Result<(), String> {
    let kept = format!("journals and node logs kept in {}", dir.display());
    if flags.downing == DowningMode::AutoDown {
        let broken = verdict.double_activations.len();
        return if broken > 0 {
            let _ = std::fs::remove_dir_all(dir);
            println!(
                "NEGATIVE CONTROL CONFIRMED: auto-down ran {broken} counters on both sides of the partition"
            );
            Ok(())
        } else {
            Err(format!(
                "negative control FAILED: auto-down kept single activation ({kept})"
            ))
        };
    }
    toured.map_err(|why| format!("tour FAILED: {why} ({kept})"))?;
    if verdict.passed() {
        let _ = std::fs::remove_dir_all(dir);
        println!("PASSED");
        Ok(())
    } else {
        Err(format!("verification FAILED ({kept})"))
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
