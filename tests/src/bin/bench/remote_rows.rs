//! Three runtime nodes on loopback: remote `tell` throughput against a raw length-prefixed TCP
//! stream carrying the same frames, first-message latency to an unallocated shard against a
//! second message to the same entity, the time from a node's crash to every entity serving
//! again, and 1,000 shards rebalancing after a fourth node joins while messages keep flowing
//! (none lost).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use shoal::{EntityId, Node};
use shoal_core::{Body, EntityType, Envelope, MemberId, Message, Payload, codec, shard_of};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::{TcpListener, TcpStream};

use crate::nodes::{ASK, Counter, Setup, Tally, wait_for_count, wait_for_regions};
use crate::runtime_rows::{best_rates, tell_rate};
use crate::table::{Row, Target};

/// Ids of `n` entities of `counter` that `node` does not host.
pub(crate) async fn remote_ids(node: &Node, n: usize) -> Vec<String> {
    let region = node.region::<Counter>("counter").expect("hosted");
    let mut ids = Vec::with_capacity(n);
    let mut i = 0;
    while ids.len() < n {
        let id = format!("r{i}");
        i += 1;
        let location = region.location(id.as_str()).await.expect("answers");
        // Unallocated shards are allocated by the first message: ask once, then look again.
        let home = match location.region {
            Some(home) => home,
            None => {
                region
                    .entity_ref(id.as_str())
                    .ask(&0, ASK)
                    .await
                    .expect("answers");
                let location = region.location(id.as_str()).await.expect("answers");
                location.region.expect("allocated by the ask")
            }
        };
        if home != node.member() {
            ids.push(id);
        }
    }
    ids
}

/// The baseline: the frames a region sends for these tells (`Forward` envelopes with the same
/// ids and payload), encoded per message, length-prefixed on one loopback TCP stream, read and
/// decoded on the other side: messages per second.
async fn raw_tcp_rate(ids: &[String], per_entity: u64) -> f64 {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds loopback");
    let address = listener.local_addr().expect("bound");
    let total = ids.len() as u64 * per_entity;
    let reader = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.expect("accepts");
        read_frames(stream, total).await.expect("reads every frame");
    });
    let payload = Payload(postcard::to_allocvec(&1u64).expect("encodes"));
    let entity_type = EntityType::new("counter");
    let ids: Vec<EntityId> = ids.iter().map(|i| EntityId::new(i.as_str())).collect();
    let start = Instant::now();
    let stream = TcpStream::connect(address).await.expect("connects");
    write_frames(stream, (&entity_type, &ids), payload, per_entity).await;
    reader.await.expect("read every frame");
    total as f64 / start.elapsed().as_secs_f64()
}

/// Reads `total` length-prefixed frames from `stream` and decodes each, as a connection's
/// reader does.
pub(crate) async fn read_frames(stream: TcpStream, total: u64) -> Result<(), String> {
    let mut stream = BufReader::with_capacity(64 * 1024, stream);
    let mut frame = Vec::new();
    for _ in 0..total {
        let len = stream.read_u32().await.map_err(|e| e.to_string())? as usize;
        frame.resize(len, 0);
        stream
            .read_exact(&mut frame)
            .await
            .map_err(|e| e.to_string())?;
        let envelope = codec::decode(&frame).map_err(|e| e.to_string())?;
        std::hint::black_box(envelope);
    }
    Ok(())
}

/// Writes the `Forward` envelopes a region sends for `per_entity` tells to each of `ids`,
/// encoded per message, length-prefixed, buffered as the transport buffers them.
pub(crate) async fn write_frames(
    stream: TcpStream,
    (entity_type, ids): (&EntityType, &[EntityId]),
    payload: Payload,
    per_entity: u64,
) {
    stream.set_nodelay(true).expect("nodelay");
    let mut stream = BufWriter::with_capacity(64 * 1024, stream);
    let mut seq = 0;
    for _ in 0..per_entity {
        for entity in ids {
            seq += 1;
            let envelope = Envelope {
                from: MemberId::new(1, 1),
                to: MemberId::new(2, 1),
                seq,
                message: Message::Sharding {
                    entity_type: entity_type.clone(),
                    body: Body::Forward {
                        shard: shard_of(entity, 1000),
                        entity: entity.clone(),
                        payload: payload.clone(),
                    },
                },
            };
            let frame = codec::encode(&envelope).expect("encodes");
            stream.write_u32(frame.len() as u32).await.expect("writes");
            stream.write_all(&frame).await.expect("writes");
        }
    }
    stream.flush().await.expect("flushes");
}

/// First and second ask to `samples` entities, each in a shard no one used yet: medians.
async fn first_message_latency(node: &Node, samples: usize) -> (Duration, Duration) {
    let region = node.region::<Tally>("tally").expect("hosted");
    let (mut first, mut second) = (Vec::new(), Vec::new());
    let mut used = std::collections::BTreeSet::new();
    let mut i = 0;
    while first.len() < samples {
        let id = EntityId::new(format!("first-{i}"));
        i += 1;
        if !used.insert(shard_of(&id, 1000)) {
            continue;
        }
        let entity = region.entity_ref(id);
        let start = Instant::now();
        entity.ask(&1, ASK).await.expect("answers");
        first.push(start.elapsed());
        let start = Instant::now();
        entity.ask(&1, ASK).await.expect("answers");
        second.push(start.elapsed());
    }
    first.sort();
    second.sort();
    (first[samples / 2], second[samples / 2])
}

/// Crashes the third node and asks every entity in `ids` from the first until each answers:
/// the time from the crash to the last answer.
async fn crash_to_serving(nodes: &[Node], ids: &[String]) -> Duration {
    let region = nodes[0].region::<Counter>("counter").expect("hosted");
    nodes[2].abort().await;
    let crashed = Instant::now();
    for id in ids {
        let entity = region.entity_ref(id.as_str());
        while entity.ask(&0, Duration::from_millis(500)).await.is_err() {
            assert!(
                crashed.elapsed() < Duration::from_secs(60),
                "{id} never came back"
            );
        }
    }
    crashed.elapsed()
}

/// Shards of `tally` each node hosts.
async fn hosted(nodes: &[Node]) -> Vec<usize> {
    let mut counts = Vec::new();
    for node in nodes {
        let region = node.region::<Tally>("tally").expect("hosted");
        counts.push(region.local_state().await.map_or(0, |s| s.len()));
    }
    counts
}

/// 1,000 shards on three nodes (rebalance up to 1,000 shards per 100 ms round); a fourth node
/// joins while a sender keeps telling one entity of every shard. Seconds from the join being
/// seen to the new node hosting its quarter with every shard hosted once, and the messages
/// sent meanwhile (all handled: checked).
async fn rebalance_after_join() -> (f64, u64) {
    let mut setup = Setup::new();
    setup.rebalance = (1000, Duration::from_millis(100));
    let mut nodes = setup.cluster(3).await;
    let ids = crate::lab::one_entity_per_shard(1000);
    let region = nodes[0].region::<Tally>("tally").expect("hosted");
    for id in &ids {
        region
            .entity_ref(id.clone())
            .tell(&1)
            .await
            .expect("accepted");
    }
    wait_for_count(&setup.tally, ids.len()).await;
    assert_eq!(hosted(&nodes).await.iter().sum::<usize>(), 1000);

    let stop = Arc::new(AtomicBool::new(false));
    let sender = tokio::spawn({
        let (stop, refs) = (
            stop.clone(),
            ids.iter().map(|i| region.entity_ref(i.clone())),
        );
        let refs: Vec<_> = refs.collect();
        async move {
            let mut sent = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for r in &refs {
                    r.tell(&1).await.expect("accepted");
                    sent += 1;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            sent
        }
    });
    let seeds = vec![nodes[0].address().to_string()];
    nodes.push(setup.start(&seeds).await);
    wait_for_regions(&nodes[0], 4).await;
    let seen = Instant::now();
    loop {
        let counts = hosted(&nodes).await;
        if counts[3] >= 250 && counts.iter().sum::<usize>() == 1000 {
            break;
        }
        assert!(
            seen.elapsed() < Duration::from_secs(60),
            "no rebalance: {counts:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let elapsed = seen.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let sent = sender.await.expect("sent");
    wait_for_count(&setup.tally, ids.len() + sent as usize).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        setup.tally.load(Ordering::Relaxed),
        ids.len() + sent as usize,
        "a message was handled twice"
    );
    for node in &nodes {
        node.abort().await;
    }
    (elapsed, sent)
}

/// Every three-node row.
pub(crate) async fn rows(quick: bool) -> Vec<Row> {
    let (entities, per_entity) = if quick { (1_000, 10) } else { (5_000, 20) };
    let mut rows = Vec::new();
    let nodes = Setup::new().cluster(3).await;
    let ids = remote_ids(&nodes[0], entities).await;
    let (first, ids_ref) = (&nodes[0], &ids);
    let (baseline, remote) = best_rates(
        |_| raw_tcp_rate(ids_ref, per_entity),
        |_| tell_rate(first, ids_ref, per_entity),
    )
    .await;
    rows.push(Row::ratio(
        &format!("remote: tell throughput to {entities} entities on two other nodes"),
        format!("{:.0} k msg/s", remote / 1e3),
        format!(
            "raw length-prefixed TCP, same frames {:.0} k msg/s",
            baseline / 1e3
        ),
        remote / baseline,
        Target::AtLeast(0.7),
    ));

    let samples = if quick { 50 } else { 200 };
    let (first, second) = first_message_latency(&nodes[0], samples).await;
    rows.push(Row::ratio(
        "remote: first message to an unallocated shard (median ask)",
        format!("{first:.1?}"),
        format!("second message, same entity {second:.1?}"),
        first.as_secs_f64() / second.as_secs_f64(),
        Target::None,
    ));
    let recovered = crash_to_serving(&nodes, &ids).await;
    rows.push(Row::value(
        "remote: a node crashes; every entity answers again from the others",
        format!("{recovered:.1?}"),
        "detection (1 s pause) + keep-majority (2 s) + removal margin (0.5 s)".to_owned(),
        Target::None,
    ));
    for node in &nodes {
        node.abort().await;
    }

    let (seconds, sent) = rebalance_after_join().await;
    rows.push(Row::value(
        "remote: 1,000 shards rebalance after a 4th node joins (from the join seen)",
        format!(
            "{:.0} ms, {sent} messages meanwhile, none lost",
            seconds * 1e3
        ),
        "rebalance round 100 ms".to_owned(),
        Target::Value("< 1 s", seconds < 1.0),
    ));
    rows
}
