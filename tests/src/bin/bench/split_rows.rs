//! Remote tells between two runtime nodes that do not share a process or a core: each node runs
//! in a network namespace of its own, in a process of its own pinned to a CPU of its own, the
//! two namespaces joined by a veth pair. The baseline is raw length-prefixed TCP carrying the
//! same frames, between two processes in the same two namespaces on the same two CPUs. Where
//! the rows of `remote_rows` measure the CPU three nodes spend on two shared cores, these
//! measure what one node can send to another.
//!
//! The bench re-runs itself for each side (`--role`), as root, through `ip netns exec` and
//! `taskset`; the namespaces are made for the run and deleted when it ends. Nothing leaves
//! them: their addresses are private to the veth pair.

use std::io::{BufRead, BufReader as StdBufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use shoal_core::{EntityId, EntityType, Payload};
use tokio::net::TcpListener;

use crate::nodes::{Setup, wait_for_regions};
use crate::remote_rows::{read_frames, remote_ids, write_frames};
use crate::runtime_rows::tell_rate;
use crate::table::{Row, Target};

/// The receiving side's address inside its namespace, and the sending side's.
const RECEIVER: &str = "10.213.0.1";
const SENDER: &str = "10.213.0.2";
/// The nodes' port, and the raw baseline's.
const NODE_PORT: u16 = 7355;
const RAW_PORT: u16 = 7400;
/// A side that has not finished by then is stopped: the run fails rather than hangs.
const SIDE_LIMIT: Duration = Duration::from_secs(300);

/// What a re-run of the bench does.
#[derive(Clone, Copy, Debug, Eq, PartialEq, clap::ValueEnum)]
pub(crate) enum Role {
    /// A node hosting the entities, until its standard input closes.
    Receiver,
    /// A node joining the receiver, telling its entities; prints the rate.
    Sender,
    /// The baseline's reader: reads and decodes the frames; prints the rate.
    RawReader,
    /// The baseline's writer.
    RawWriter,
}

/// How big a run is: entities, and tells to each.
fn sizes(quick: bool) -> (usize, u64) {
    if quick { (1_000, 10) } else { (5_000, 20) }
}

/// The two namespaces of one run, deleted on drop.
struct Namespaces {
    receiver: String,
    sender: String,
}

/// Runs `ip` with `args`; an error names the command.
fn ip(args: &[&str]) -> Result<(), String> {
    let output = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "`ip {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr).trim()
    ))
}

impl Namespaces {
    /// Makes the two namespaces and the veth pair between them; an error says why namespaces
    /// are not available here (not root, no `ip`, no kernel support).
    fn create() -> Result<Self, String> {
        let prefix = format!("shoalbench{}", std::process::id());
        let pair = Self {
            receiver: format!("{prefix}r"),
            sender: format!("{prefix}s"),
        };
        // Whatever was made is deleted by `drop` if a step fails.
        ip(&["netns", "add", &pair.receiver])?;
        ip(&["netns", "add", &pair.sender])?;
        let (r, s) = (pair.receiver.as_str(), pair.sender.as_str());
        ip(&[
            "link", "add", "vr", "netns", r, "type", "veth", "peer", "name", "vs", "netns", s,
        ])?;
        for (ns, link, address) in [(r, "vr", RECEIVER), (s, "vs", SENDER)] {
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{address}/24"),
                "dev",
                link,
            ])?;
            ip(&["-n", ns, "link", "set", link, "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(pair)
    }

    /// Starts the bench as `role` in `namespace`, pinned to `cpu`.
    fn spawn(&self, namespace: &str, cpu: usize, role: &str, quick: bool) -> Result<Child, String> {
        let exe = std::env::current_exe().map_err(|e| format!("the bench's path: {e}"))?;
        let mut command = Command::new("ip");
        command
            .args([
                "netns",
                "exec",
                namespace,
                "taskset",
                "-c",
                &cpu.to_string(),
            ])
            .arg(exe)
            .args(["--role", role]);
        if quick {
            command.arg("--quick");
        }
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting the {role} side: {e}"))
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        // Deleting a namespace deletes its end of the veth pair, and with it the other end.
        let _ = ip(&["netns", "del", &self.receiver]);
        let _ = ip(&["netns", "del", &self.sender]);
    }
}

/// Reads `child`'s output until a line starting with `tag`, within the side limit; the rest of
/// that line.
fn read_tagged(child: &mut Child, tag: &str) -> Result<String, String> {
    let stdout = child.stdout.as_mut().ok_or("no output")?;
    let deadline = Instant::now() + SIDE_LIMIT;
    let mut lines = StdBufReader::new(stdout).lines();
    while Instant::now() < deadline {
        match lines.next() {
            Some(Ok(line)) => {
                if let Some(rest) = line.strip_prefix(tag) {
                    return Ok(rest.trim().to_owned());
                }
            }
            Some(Err(e)) => return Err(e.to_string()),
            None => break,
        }
    }
    Err(format!("the side ended without printing {tag}"))
}

/// A rate a side printed.
fn rate_of(child: &mut Child) -> Result<f64, String> {
    let rate = read_tagged(child, "RATE")?;
    rate.parse().map_err(|e| format!("a rate of {rate:?}: {e}"))
}

/// Stops a side that has done its part (its standard input closes), and waits for it.
fn finish(mut child: Child) {
    drop(child.stdin.take());
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The baseline once: a reader in the receiver's namespace on CPU 0, a writer in the sender's
/// on CPU 1.
fn raw_once(pair: &Namespaces, quick: bool) -> Result<f64, String> {
    let mut reader = pair.spawn(&pair.receiver, 0, "raw-reader", quick)?;
    read_tagged(&mut reader, "READY")?;
    let writer = pair.spawn(&pair.sender, 1, "raw-writer", quick)?;
    let rate = rate_of(&mut reader);
    finish(writer);
    finish(reader);
    rate
}

/// Shoal's side: the receiving node on CPU 0, the sending node on CPU 1 (best of its rounds).
fn nodes_once(pair: &Namespaces, quick: bool) -> Result<f64, String> {
    let mut receiver = pair.spawn(&pair.receiver, 0, "receiver", quick)?;
    read_tagged(&mut receiver, "READY")?;
    let mut sender = pair.spawn(&pair.sender, 1, "sender", quick)?;
    let rate = rate_of(&mut sender);
    finish(sender);
    finish(receiver);
    rate
}

/// The split rows, or one row saying why they could not run.
pub(crate) fn rows(quick: bool) -> Vec<Row> {
    let (entities, per_entity) = sizes(quick);
    let label = format!(
        "remote, split: tell throughput, {per_entity} to each of {entities} entities on another \
         node (2 nodes: own namespace, process and core each)"
    );
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let measured = if cpus < 2 {
        Err(format!("{cpus} CPU: the two sides cannot have one each"))
    } else {
        Namespaces::create().and_then(|pair| {
            let mut baseline = 0f64;
            for _ in 0..crate::ROUNDS {
                baseline = baseline.max(raw_once(&pair, quick)?);
            }
            Ok((baseline, nodes_once(&pair, quick)?))
        })
    };
    match measured {
        Ok((baseline, rate)) => vec![Row::ratio(
            &label,
            format!("{:.0} k msg/s", rate / 1e3),
            format!(
                "raw TCP, same frames, same namespaces and cores {:.0} k msg/s",
                baseline / 1e3
            ),
            rate / baseline,
            Target::AtLeast(0.7),
        )],
        Err(why) => vec![Row::value(
            &label,
            "not measured".to_owned(),
            why,
            Target::None,
        )],
    }
}

/// Runs this process's side; `Err` says what failed.
pub(crate) fn run_role(role: Role, quick: bool) -> Result<(), String> {
    // One thread for everything the side runs (the caller's loop included): one core's worth.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let (entities, per_entity) = sizes(quick);
    runtime.block_on(async move {
        match role {
            Role::Receiver => receive().await,
            Role::Sender => send(entities, per_entity).await,
            Role::RawReader => raw_read(entities as u64 * per_entity).await,
            Role::RawWriter => raw_write(entities, per_entity).await,
        }
    })
}

/// Prints `line` at once (the parent reads it through a pipe).
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Waits until the parent closes this process's standard input, or the side limit.
async fn until_told_to_stop() {
    let waiting = tokio::task::spawn_blocking(|| {
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut sink);
    });
    let _ = tokio::time::timeout(SIDE_LIMIT, waiting).await;
}

async fn receive() -> Result<(), String> {
    let address = format!("{RECEIVER}:{NODE_PORT}");
    let node = Setup::new().start_at(&address, &[]).await;
    say("READY");
    until_told_to_stop().await;
    node.abort().await;
    Ok(())
}

async fn send(entities: usize, per_entity: u64) -> Result<(), String> {
    let seeds = [format!("{RECEIVER}:{NODE_PORT}")];
    let node = Setup::new()
        .start_at(&format!("{SENDER}:{NODE_PORT}"), &seeds)
        .await;
    wait_for_regions(&node, 2).await;
    let ids = remote_ids(&node, entities).await;
    let mut best = 0f64;
    for _ in 0..crate::ROUNDS {
        best = best.max(tell_rate(&node, &ids, per_entity).await);
    }
    say(&format!("RATE {best}"));
    node.abort().await;
    Ok(())
}

async fn raw_read(total: u64) -> Result<(), String> {
    let listener = TcpListener::bind(format!("{RECEIVER}:{RAW_PORT}"))
        .await
        .map_err(|e| e.to_string())?;
    say("READY");
    let (stream, _) = listener.accept().await.map_err(|e| e.to_string())?;
    let start = Instant::now();
    read_frames(stream, total).await?;
    say(&format!(
        "RATE {}",
        total as f64 / start.elapsed().as_secs_f64()
    ));
    Ok(())
}

async fn raw_write(entities: usize, per_entity: u64) -> Result<(), String> {
    let ids: Vec<EntityId> = (0..entities)
        .map(|i| EntityId::new(format!("r{i}")))
        .collect();
    let stream = tokio::net::TcpStream::connect(format!("{RECEIVER}:{RAW_PORT}"))
        .await
        .map_err(|e| e.to_string())?;
    let payload = Payload(postcard::to_allocvec(&1u64).map_err(|e| e.to_string())?);
    write_frames(
        stream,
        (&EntityType::new("counter"), &ids),
        payload,
        per_entity,
    )
    .await;
    until_told_to_stop().await;
    Ok(())
}
