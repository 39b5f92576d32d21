//! The wire codec: arbitrary bytes never panic the decoder, every message round-trips, and the
//! encoding of a representative envelope is pinned so the wire format cannot change silently.

use std::time::Duration;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use shoal_core::codec::{MAX_FRAME_LEN, PROTOCOL_VERSION, decode, encode, frame_len};
use shoal_core::explain::{AllocationCause, Decision, DecisionRecord};
use shoal_core::{
    AllocationGate, Body, CodecError, CoordinatorState, DeadLetterReason, EntityId, EntityType,
    Envelope, Epoch, HandoffRound, MemberId, Message, NodeId, Payload, RegionShards, RegionStats,
    RequestId, ShardId, StartAck, StartOutcome, StatsQueryId,
};

fn member() -> impl Strategy<Value = MemberId> {
    (any::<u64>(), any::<u64>()).prop_map(|(n, i)| MemberId::new(n, i))
}

fn shard() -> impl Strategy<Value = ShardId> {
    any::<u32>().prop_map(ShardId)
}

fn shards() -> impl Strategy<Value = Vec<ShardId>> {
    prop::collection::vec(shard(), 0..20)
}

fn entity() -> impl Strategy<Value = EntityId> {
    ".{0,24}".prop_map(EntityId::new)
}

fn request() -> impl Strategy<Value = RequestId> {
    any::<u64>().prop_map(RequestId)
}

fn payload() -> impl Strategy<Value = Payload> {
    prop::collection::vec(any::<u8>(), 0..64).prop_map(Payload)
}

fn counts() -> impl Strategy<Value = Vec<(ShardId, u32)>> {
    prop::collection::vec((shard(), any::<u32>()), 0..8)
}

/// Every `Body` variant; `variant_index` below must list them all.
fn body() -> impl Strategy<Value = Body> {
    prop_oneof![
        (shards(), shards()).prop_map(|(shards, handing_off)| Body::Register {
            shards,
            handing_off
        }),
        Just(Body::RegisterProxy),
        shard().prop_map(|shard| Body::GetShardHome { shard }),
        shard().prop_map(|shard| Body::ShardStarted { shard }),
        (shard(), member(), any::<u64>()).prop_map(|(shard, region, round)| {
            Body::BeginHandOffAck {
                shard,
                region,
                round: HandoffRound(round),
            }
        }),
        shard().prop_map(|shard| Body::ShardStopped { shard }),
        Just(Body::GracefulShutdownReq),
        Just(Body::RegionStopped),
        request().prop_map(|request| Body::GetCurrentRegions { request }),
        request().prop_map(|request| Body::GetClusterShardingStats { request }),
        (any::<u64>(), counts()).prop_map(|(query, shards)| Body::RegionStatsReply {
            query: StatsQueryId(query),
            shards
        }),
        Just(Body::RegisterAck),
        Just(Body::RegisterRequest),
        (shard(), member()).prop_map(|(shard, region)| Body::ShardHome { shard, region }),
        prop::collection::vec((member(), shards()), 0..4).prop_map(|homes| Body::ShardHomes {
            homes: homes
                .into_iter()
                .map(|(region, shards)| RegionShards { region, shards })
                .collect(),
        }),
        (shard(), any::<u64>()).prop_map(|(shard, e)| Body::HostShard {
            shard,
            epoch: Epoch(e)
        }),
        (shard(), any::<u64>()).prop_map(|(shard, e)| Body::ShardFenced {
            shard,
            current: Epoch(e)
        }),
        (shard(), member(), any::<u64>()).prop_map(|(shard, owner, round)| Body::BeginHandOff {
            shard,
            owner,
            round: HandoffRound(round)
        }),
        shard().prop_map(|shard| Body::HandOff { shard }),
        (request(), prop::collection::vec(member(), 0..5))
            .prop_map(|(request, regions)| Body::CurrentRegions { request, regions }),
        (
            request(),
            prop::collection::vec((member(), counts()), 0..4),
            prop::collection::vec(member(), 0..3)
        )
            .prop_map(|(request, regions, failed)| Body::ClusterShardingStats {
                request,
                regions: regions
                    .into_iter()
                    .map(|(region, shards)| RegionStats { region, shards })
                    .collect(),
                failed,
            }),
        any::<u64>().prop_map(|query| Body::GetRegionStats {
            query: StatsQueryId(query)
        }),
        (shard(), entity(), payload()).prop_map(|(shard, entity, payload)| {
            Body::Forward {
                shard,
                entity,
                payload,
            }
        }),
        (shard(), member(), any::<u64>()).prop_map(|(shard, coordinator, round)| {
            Body::RelayHandOffAck {
                shard,
                coordinator,
                round: HandoffRound(round),
            }
        }),
        (request(), entity()).prop_map(|(request, entity)| Body::LocateEntity { request, entity }),
        (request(), entity(), shard(), any::<bool>(), any::<bool>()).prop_map(
            |(request, entity, shard, hosted, alive)| Body::EntityLocated {
                request,
                entity,
                shard,
                hosted,
                alive
            }
        ),
        prop::collection::vec((shard(), any::<u64>().prop_map(NodeId)), 0..5)
            .prop_map(|locations| Body::SetShardLocations { locations }),
        request().prop_map(|request| Body::GetCoordinatorState { request }),
        (
            request(),
            member(),
            gate(),
            any::<u32>(),
            shards(),
            shards()
        )
            .prop_map(
                |(request, coordinator, gate, allocated, handing_off, waiting)| {
                    Body::CoordinatorState {
                        request,
                        state: Box::new(CoordinatorState {
                            coordinator,
                            gate,
                            allocated,
                            handing_off,
                            waiting,
                        }),
                    }
                }
            ),
        (shard(), entity(), prop::option::of((member(), request()))).prop_map(
            |(shard, entity, ack)| Body::StartEntity {
                shard,
                entity,
                ack: ack.map(|(requester, request)| StartAck { requester, request }),
            }
        ),
        (request(), entity(), prop::option::of(dead_letter_reason())).prop_map(
            |(request, entity, dropped)| Body::StartEntityAck {
                request,
                entity,
                outcome: dropped.map_or(StartOutcome::Started, StartOutcome::Dropped),
            }
        ),
        member().prop_map(|coordinator| Body::RelayExit { coordinator }),
        member().prop_map(|region| Body::RegionExited { region }),
        (request(), entity(), shard()).prop_map(|(request, entity, shard)| Body::Explain {
            request,
            entity,
            shard
        }),
        (
            request(),
            prop::collection::vec(decision_record(), 0..4),
            prop::option::of(any::<u64>().prop_map(Duration::from_nanos))
        )
            .prop_map(|(request, records, forgotten_before)| Body::Explanation {
                request,
                records,
                forgotten_before
            }),
    ]
}

fn decision_record() -> impl Strategy<Value = DecisionRecord> {
    let strategy = (
        member(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
    )
        .prop_map(|(requester, regions, chosen_held, fewest, most)| {
            AllocationCause::Strategy {
                strategy: "LeastShard".into(),
                requester,
                regions,
                chosen_held,
                fewest,
                most,
            }
        });
    let cause = prop_oneof![strategy, Just(AllocationCause::FencedHostedAgain)];
    let decision = prop_oneof![
        (shard(), member(), cause).prop_map(|(shard, region, cause)| Decision::Allocated {
            shard,
            region,
            cause
        }),
        (shard(), member(), any::<u32>(), any::<u32>()).prop_map(
            |(shard, from, round, in_progress)| Decision::Rebalanced {
                shard,
                from,
                round,
                in_progress,
                strategy: "LeastShard".into(),
            }
        ),
        (shards(), any::<u32>(), gate()).prop_map(|(shards, waiting, gate)| {
            Decision::GateWaited {
                shards,
                waiting,
                gate,
            }
        }),
        (entity(), shard(), dead_letter_reason()).prop_map(|(entity, shard, reason)| {
            Decision::DeadLettered {
                entity,
                shard,
                reason,
            }
        }),
    ];
    (member(), any::<u64>(), decision).prop_map(|(by, nanos, decision)| DecisionRecord {
        by,
        ago: Duration::from_nanos(nanos),
        decision,
    })
}

fn dead_letter_reason() -> impl Strategy<Value = DeadLetterReason> {
    prop_oneof![
        Just(DeadLetterReason::BufferFull),
        Just(DeadLetterReason::UnknownEntityType),
        Just(DeadLetterReason::RegionStopped),
        Just(DeadLetterReason::PayloadTooLarge),
        Just(DeadLetterReason::ShardMismatch),
        Just(DeadLetterReason::MemberGone),
        Just(DeadLetterReason::OutboundQueueFull),
        Just(DeadLetterReason::MailboxFull),
    ]
}

fn gate() -> impl Strategy<Value = AllocationGate> {
    (
        any::<bool>(),
        prop::collection::vec(member(), 0..4),
        prop::collection::vec(member(), 0..4),
        any::<u32>(),
        any::<u32>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(open, unregistered, recently_removed, registered, needed, store_pending, lease)| {
                AllocationGate {
                    open,
                    unregistered,
                    recently_removed,
                    registered,
                    needed,
                    store_pending,
                    lease_pending: lease,
                }
            },
        )
}

/// Exhaustive over `Body`: adding a variant fails to compile until it is listed here (and then
/// the coverage test fails until `body()` generates it).
fn variant_index(body: &Body) -> usize {
    match body {
        Body::Register { .. } => 0,
        Body::RegisterProxy => 1,
        Body::GetShardHome { .. } => 2,
        Body::ShardStarted { .. } => 3,
        Body::BeginHandOffAck { .. } => 4,
        Body::ShardStopped { .. } => 5,
        Body::GracefulShutdownReq => 6,
        Body::RegionStopped => 7,
        Body::GetCurrentRegions { .. } => 8,
        Body::GetClusterShardingStats { .. } => 9,
        Body::RegionStatsReply { .. } => 10,
        Body::RegisterAck => 11,
        Body::RegisterRequest => 12,
        Body::ShardHome { .. } => 13,
        Body::ShardHomes { .. } => 14,
        Body::HostShard { .. } => 15,
        Body::BeginHandOff { .. } => 16,
        Body::HandOff { .. } => 17,
        Body::CurrentRegions { .. } => 18,
        Body::ClusterShardingStats { .. } => 19,
        Body::GetRegionStats { .. } => 20,
        Body::Forward { .. } => 21,
        Body::RelayHandOffAck { .. } => 22,
        Body::LocateEntity { .. } => 23,
        Body::EntityLocated { .. } => 24,
        Body::SetShardLocations { .. } => 25,
        Body::GetCoordinatorState { .. } => 26,
        Body::CoordinatorState { .. } => 27,
        Body::StartEntity { .. } => 28,
        Body::StartEntityAck { .. } => 29,
        Body::RelayExit { .. } => 30,
        Body::RegionExited { .. } => 31,
        Body::ShardFenced { .. } => 32,
        Body::Explain { .. } => 33,
        Body::Explanation { .. } => 34,
    }
}
const VARIANTS: usize = 35;

fn envelope() -> impl Strategy<Value = Envelope> {
    let sharding = (".{0,16}", body()).prop_map(|(t, body)| Message::Sharding {
        entity_type: EntityType::new(t),
        body,
    });
    let app = payload().prop_map(|payload| Message::App { payload });
    let message = prop_oneof![4 => sharding, 1 => app];
    (member(), member(), any::<u64>(), message).prop_map(|(from, to, seq, message)| Envelope {
        from,
        to,
        seq,
        message,
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn every_message_round_trips(envelope in envelope()) {
        let frame = encode(&envelope).expect("encodes");
        prop_assert_eq!(frame[0], PROTOCOL_VERSION);
        prop_assert_eq!(frame_len(&envelope), Ok(frame.len()), "measured as written");
        prop_assert_eq!(decode(&frame).expect("decodes"), envelope);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(envelope) = decode(&bytes) {
            let again = encode(&envelope).expect("re-encodes");
            prop_assert_eq!(decode(&again).expect("decodes"), envelope);
        }
    }

    #[test]
    fn versioned_garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let mut frame = vec![PROTOCOL_VERSION];
        frame.extend(bytes);
        let _ = decode(&frame);
    }

    #[test]
    fn every_prefix_of_a_frame_is_an_error(envelope in envelope()) {
        let frame = encode(&envelope).expect("encodes");
        for len in 0..frame.len() {
            prop_assert!(decode(&frame[..len]).is_err(), "prefix of {} bytes decoded", len);
        }
    }
}

#[test]
fn the_generator_covers_every_variant() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut seen = [false; VARIANTS];
    for _ in 0..5000 {
        let body = body().new_tree(&mut runner).expect("generates").current();
        seen[variant_index(&body)] = true;
    }
    let missing: Vec<usize> = (0..VARIANTS).filter(|i| !seen[*i]).collect();
    assert!(missing.is_empty(), "variants never generated: {missing:?}");
}

fn sample() -> Envelope {
    Envelope {
        from: MemberId::new(1, 7),
        to: MemberId::new(2, 9),
        seq: 300,
        message: Message::Sharding {
            entity_type: EntityType::new("counter"),
            body: Body::Forward {
                shard: ShardId(42),
                entity: EntityId::new("user-1"),
                payload: Payload(b"hello".to_vec()),
            },
        },
    }
}

#[test]
fn malformed_frames_give_the_right_error() {
    assert_eq!(decode(&[]), Err(CodecError::Empty));
    let mut frame = encode(&sample()).expect("encodes");
    frame[0] = PROTOCOL_VERSION + 1;
    assert_eq!(
        decode(&frame),
        Err(CodecError::UnsupportedVersion {
            found: PROTOCOL_VERSION + 1,
            expected: PROTOCOL_VERSION
        })
    );
    let mut frame = encode(&sample()).expect("encodes");
    frame.extend([0, 0, 0]);
    assert_eq!(decode(&frame), Err(CodecError::TrailingBytes(3)));
    let huge = vec![PROTOCOL_VERSION; MAX_FRAME_LEN + 1];
    assert_eq!(decode(&huge), Err(CodecError::TooLarge(MAX_FRAME_LEN + 1)));
    let truncated = &encode(&sample()).expect("encodes")[..5];
    assert!(matches!(decode(truncated), Err(CodecError::Malformed(_))));
}

#[test]
fn oversized_payloads_are_refused_at_encoding() {
    let mut envelope = sample();
    envelope.message = Message::Sharding {
        entity_type: EntityType::new("counter"),
        body: Body::Forward {
            shard: ShardId(1),
            entity: EntityId::new("big"),
            payload: Payload(vec![0; MAX_FRAME_LEN]),
        },
    };
    assert!(matches!(encode(&envelope), Err(CodecError::TooLarge(_))));
}

#[test]
fn wire_format_is_pinned() {
    let frame = encode(&sample()).expect("encodes");
    let hex: String = frame.iter().map(|b| format!("{b:02x}")).collect();
    insta::assert_snapshot!(hex);
}

/// The README's wire-format section names the version byte the codec writes and the handshake
/// enforces: a reader implementing the format from it gets the current one.
#[test]
fn the_readme_names_the_current_protocol_version() {
    let readme = include_str!("../../README.md");
    let named =
        format!("one protocol-version byte ({PROTOCOL_VERSION}, `codec::PROTOCOL_VERSION`)");
    assert!(readme.contains(&named), "the README should say: {named}");
}
