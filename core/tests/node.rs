//! Node-level, multi-step tests over the in-test network: gates, fencing, caps, timers,
//! removal margins, proxies, queries and bad input.

use std::time::Duration;

use shoal_core::explain::{AllocationCause, Decision};
use shoal_core::{
    Address, Body, Command, CommandError, Config, ConfigError, DeadLetterReason, Driver, Effect,
    EntityId, EntityType, Envelope, Epoch, Event, HandoffRound, Incarnation, Input, Instant,
    Member, MemberId, MemberStatus, MembershipSettings, MembershipView, Message, Node, NodeId,
    Payload, Reply, RequestId, SeedNode, ShardId, StartAck, StartOutcome, StatsQueryId, StopReason,
};
use sim::scripted::{Cluster, StopPolicy, config, entity_in_shard, member, type_config};

fn counter() -> EntityType {
    EntityType::new(sim::scripted::TYPE)
}

fn dead_letter_reasons(c: &Cluster) -> Vec<DeadLetterReason> {
    c.events()
        .iter()
        .filter_map(|(_, e)| match e {
            Event::DeadLetter { reason, .. } => Some(*reason),
            _ => None,
        })
        .collect()
}

fn reply_of(c: &Cluster, request: RequestId) -> Result<Reply, CommandError> {
    c.reply(request)
        .unwrap_or_else(|| panic!("no reply for {request:?}"))
        .clone()
}

#[test]
fn config_validation_rejects_bad_settings() {
    let mut c = config(1, type_config(10));
    c.settings.buffer_size = 0;
    assert_eq!(
        Node::new(c, Instant::ZERO).unwrap_err(),
        ConfigError::ZeroBufferSize
    );
    let mut c = config(1, type_config(0));
    c.seed = 0;
    assert!(matches!(
        Node::new(c, Instant::ZERO).unwrap_err(),
        ConfigError::ZeroShards(_)
    ));
    let c = config(1, type_config(10)).with_entity_type(type_config(10));
    assert!(matches!(
        Node::new(c, Instant::ZERO).unwrap_err(),
        ConfigError::DuplicateEntityType(_)
    ));
    let mut c = config(1, type_config(10));
    c.settings.handoff_timeout = Duration::ZERO;
    assert_eq!(
        Node::new(c, Instant::ZERO).unwrap_err(),
        ConfigError::ZeroDuration("handoff_timeout")
    );
    let mut t = type_config(10);
    t.min_registered_regions = 0;
    assert_eq!(
        Node::new(config(1, t), Instant::ZERO).unwrap_err(),
        ConfigError::ZeroMinRegisteredRegions(counter())
    );
    let mut c = config(1, type_config(10));
    c.address = Address::new("");
    assert_eq!(
        Node::new(c, Instant::ZERO).unwrap_err(),
        ConfigError::EmptyAddress
    );
    let mut c = config(1, type_config(10));
    let seeds = [
        SeedNode::new(NodeId(2), Address::new("10.0.0.2:7355")),
        SeedNode::new(NodeId(2), Address::new("10.0.0.3:7355")),
    ];
    c.membership = Some(MembershipSettings::new(seeds));
    assert_eq!(
        Node::new(c, Instant::ZERO).unwrap_err(),
        ConfigError::ConflictingAddresses(NodeId(2))
    );
}

#[test]
fn envelopes_leave_with_their_receivers_address() {
    // Member 2 (the oldest, so the coordinator) is known only from a view the host supplied:
    // the region's registration must leave for the address that view gave it.
    let at2 = Address::new("10.0.0.2:7355");
    let mut driver = Driver::new(
        Node::new(config(1, type_config(10)), Instant::ZERO).expect("valid"),
        Instant::ZERO,
    );
    let view = |two: Member| MembershipView::new(vec![two, Member::up(member(1), 2, &[])]);
    let registrations = |driver: &mut Driver, view| {
        let mut out: Vec<Effect> = Vec::new();
        driver.handle_input(Instant::ZERO, Input::MembershipChanged(view), &mut out);
        out.into_iter()
            .filter_map(|e| match e {
                Effect::Send(t)
                    if matches!(t.envelope.message.body(), Some(Body::Register { .. })) =>
                {
                    Some((t.envelope.to, t.address))
                }
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    let two = Member::up(member(2), 1, &[]).at(at2.clone());
    assert_eq!(
        registrations(&mut driver, view(two)),
        [(member(2), Some(at2.clone()))]
    );
    // A later incarnation at the same node id keeps the node's address when its view says
    // nothing; without any address ever given, the host routes by member id (None).
    let restarted = Member::up(MemberId::new(2, 2), 1, &[]);
    let sent = registrations(&mut driver, view(restarted));
    assert_eq!(sent, [(MemberId::new(2, 2), Some(at2))]);
    let mut fresh = Driver::new(
        Node::new(config(1, type_config(10)), Instant::ZERO).expect("valid"),
        Instant::ZERO,
    );
    let unknown = Member::up(member(3), 1, &[]);
    let sent = registrations(
        &mut fresh,
        MembershipView::new(vec![unknown, Member::up(member(1), 2, &[])]),
    );
    assert_eq!(sent, [(member(3), None)]);
}

#[test]
fn unknown_entity_type_is_a_dead_letter_and_a_command_error() {
    let mut c = Cluster::with_nodes(1, 10);
    c.input(
        1,
        Input::Tell {
            entity_type: EntityType::new("nope"),
            entity: EntityId::new("x"),
            payload: Payload::default(),
        },
    );
    assert_eq!(
        dead_letter_reasons(&c),
        [DeadLetterReason::UnknownEntityType]
    );
    let r = c.command(
        1,
        Command::GetShardRegionState {
            entity_type: EntityType::new("nope"),
        },
    );
    assert_eq!(
        reply_of(&c, r),
        Err(CommandError::UnknownEntityType(EntityType::new("nope")))
    );
}

#[test]
fn buffer_overflow_becomes_dead_letters_and_the_cap_holds() {
    let mut cfg = config(1, type_config(10));
    cfg.settings.buffer_size = 3;
    let mut c = Cluster::new();
    c.add_node(cfg);
    // No membership view yet: no coordinator is known, so everything buffers.
    for i in 0..5 {
        c.tell(1, "a", &format!("m{i}"));
    }
    assert_eq!(c.node(1).buffered(&counter()), 3);
    assert_eq!(dead_letter_reasons(&c), [DeadLetterReason::BufferFull; 2]);
    c.publish_view();
    c.settle();
    let inbox: Vec<_> = c.inbox("a").into_iter().map(|(_, p)| p).collect();
    assert_eq!(
        inbox,
        ["m0", "m1", "m2"],
        "buffered messages are delivered once a home is known"
    );
    assert_eq!(c.node(1).buffered(&counter()), 0);
}

#[test]
fn min_registered_regions_gates_allocation() {
    let mut c = Cluster::new();
    let mut t = type_config(10);
    t.min_registered_regions = 2;
    c.add_node(config(1, t.clone()));
    c.publish_view();
    c.tell(1, "a", "m");
    c.advance(Duration::from_secs(5));
    assert!(c.inbox("a").is_empty(), "no allocation with one region");
    c.add_node(config(2, t));
    c.publish_view();
    c.settle();
    assert_eq!(c.inbox("a").len(), 1);
}

/// Akka's per-role minimum: each type's gate waits for its own minimum of its own regions. Two
/// types on two members: `counter` needs two regions, `ledger` one, so `ledger` allocates with
/// one member while `counter` waits for the second.
#[test]
fn each_type_waits_for_its_own_minimum_of_regions() {
    let ledger = || {
        let mut t = type_config(10);
        t.name = EntityType::new("ledger");
        t
    };
    let counters = || {
        let mut t = type_config(10);
        t.min_registered_regions = 2;
        t
    };
    let mut c = Cluster::new();
    c.add_node(config(1, counters()).with_entity_type(ledger()));
    c.publish_view();
    c.tell(1, "a", "m");
    let request = c.command(
        1,
        Command::StartEntity {
            entity_type: EntityType::new("ledger"),
            entity: EntityId::new("b"),
        },
    );
    c.advance(Duration::from_secs(5));
    assert!(c.inbox("a").is_empty(), "counter waits for a second region");
    assert!(
        matches!(reply_of(&c, request), Ok(Reply::EntityStarted { .. })),
        "ledger needs one region"
    );
    c.add_node(config(2, counters()).with_entity_type(ledger()));
    c.publish_view();
    c.settle();
    assert_eq!(c.inbox("a").len(), 1);
}

#[test]
fn envelopes_for_another_incarnation_are_counted_and_dropped() {
    let mut c = Cluster::with_nodes(2, 10);
    let stale = Envelope {
        from: member(2),
        to: MemberId::new(1, 0),
        seq: 0,
        message: Message::Sharding {
            entity_type: counter(),
            body: Body::HostShard {
                shard: ShardId(1),
                epoch: Epoch(0),
            },
        },
    };
    c.input(1, Input::Receive(Box::new(stale)));
    assert_eq!(c.node(1).metrics().misaddressed, 1);
    assert!(c.hosting()[&1].is_empty());
}

#[test]
fn what_an_older_incarnation_sent_is_dropped_once_a_newer_one_was_heard() {
    let mut c = Cluster::with_nodes(2, 10);
    let host_shard_from = |from: MemberId, seq| Envelope {
        from,
        to: member(1),
        seq,
        message: Message::Sharding {
            entity_type: counter(),
            body: Body::HostShard {
                shard: ShardId(4),
                epoch: Epoch(0),
            },
        },
    };
    let restarted = MemberId::new(member(2).node.0, member(2).incarnation.0 + 1);
    c.input(1, Input::Receive(Box::new(host_shard_from(restarted, 1))));
    assert_eq!(
        c.node(1).metrics().fenced,
        1,
        "heard (and fenced: not the coordinator)"
    );
    // Numbered above anything heard from it: new on its link, but its process is gone.
    c.input(1, Input::Receive(Box::new(host_shard_from(member(2), 7))));
    let metrics = c.node(1).metrics();
    assert_eq!(metrics.from_older_incarnation, 1);
    assert_eq!(metrics.fenced, 1, "dropped before anyone looked at it");
}

#[test]
fn regions_obey_only_the_coordinator_their_view_names() {
    let mut c = Cluster::with_nodes(2, 10);
    // Node 2 is not the coordinator; its HostShard to node 1 must be fenced off.
    let forged = Envelope {
        from: member(2),
        to: member(1),
        seq: 0,
        message: Message::Sharding {
            entity_type: counter(),
            body: Body::HostShard {
                shard: ShardId(4),
                epoch: Epoch(0),
            },
        },
    };
    c.input(1, Input::Receive(Box::new(forged)));
    c.settle();
    assert_eq!(c.node(1).metrics().fenced, 1);
    assert!(c.hosting()[&1].is_empty());
}

#[test]
fn malformed_peer_input_never_panics() {
    let mut c = Cluster::with_nodes(2, 10);
    let bodies = [
        Body::ShardStopped {
            shard: ShardId(999),
        },
        Body::BeginHandOffAck {
            shard: ShardId(3),
            region: member(7),
            round: HandoffRound(1),
        },
        Body::ShardStarted {
            shard: ShardId(u32::MAX),
        },
        Body::StartEntity {
            shard: ShardId(12345),
            entity: EntityId::new("x"),
            ack: None,
        },
        Body::RegionStatsReply {
            query: StatsQueryId(77),
            shards: vec![],
        },
        Body::HandOff { shard: ShardId(5) },
        Body::RelayHandOffAck {
            shard: ShardId(5),
            coordinator: member(9),
            round: HandoffRound(u64::MAX),
        },
    ];
    for body in bodies {
        for (from, to) in [(2, 1), (1, 2)] {
            let message = Message::Sharding {
                entity_type: counter(),
                body: body.clone(),
            };
            c.input(
                to,
                Input::Receive(Box::new(Envelope {
                    from: member(from),
                    to: member(to),
                    seq: 0,
                    message,
                })),
            );
            c.settle();
        }
    }
    let unknown = Message::Sharding {
        entity_type: EntityType::new("other"),
        body: Body::RegisterAck,
    };
    c.input(
        1,
        Input::Receive(Box::new(Envelope {
            from: member(2),
            to: member(1),
            seq: 0,
            message: unknown,
        })),
    );
    assert_eq!(c.node(1).metrics().unknown_entity_type, 1);
    // The cluster still works.
    c.tell(2, "a", "ok");
    c.settle();
    assert_eq!(c.inbox("a").len(), 1);
}

#[test]
fn start_entity_starts_without_a_message() {
    let mut c = Cluster::with_nodes(1, 10);
    let r = c.command(
        1,
        Command::StartEntity {
            entity_type: counter(),
            entity: EntityId::new("a"),
        },
    );
    c.settle();
    assert_eq!(
        reply_of(&c, r),
        Ok(Reply::EntityStarted {
            entity: EntityId::new("a"),
            shard: shoal_core::shard_of(&EntityId::new("a"), 10),
            region: member(1),
        })
    );
    assert_eq!(c.alive_on(1), ["a"]);
    assert!(c.inbox("a").is_empty());
}

/// Issue 9, fourth finding: `StartEntity` was answered at once, before anything started.
/// Like Akka's `StartEntityAck`, the answer now comes from the region that started the entity
/// (after its shard was allocated), from the one that dropped the request, or from a timeout.
#[test]
fn start_entity_is_answered_once_the_entity_runs() {
    let mut c = Cluster::with_nodes(2, 4);
    let remote = entity_in_shard(1, 4);
    let start = |c: &mut Cluster, entity: &str| {
        let command = Command::StartEntity {
            entity_type: counter(),
            entity: EntityId::new(entity),
        };
        c.command(1, command)
    };
    let r = start(&mut c, &remote);
    c.settle();
    let home = if c.hosting()[&2].contains(&1) { 2 } else { 1 };
    assert_eq!(c.alive_on(home), std::slice::from_ref(&remote));
    let line = |needle: &str| c.trace().iter().position(|l| l.contains(needle));
    let started = line(&format!("n{home} start {remote}")).expect("started");
    let answered = line("EntityStarted").expect("answered");
    assert!(started < answered, "answered only once it runs");
    assert_eq!(
        reply_of(&c, r),
        Ok(Reply::EntityStarted {
            entity: EntityId::new(remote.as_str()),
            shard: ShardId(1),
            region: member(home),
        })
    );
    // A region that drops the request says why: node 2 believes it was downed (its region
    // stopped) while node 1 still routes to it.
    let ids = c.one_entity_per_shard(1, 4, "one");
    let on_2 = c.alive_on(2);
    let dropped = ids
        .iter()
        .find(|id| on_2.contains(id))
        .expect("node 2 hosts")
        .clone();
    c.remove_member(2);
    c.publish_view_to(2);
    c.settle();
    let r = start(&mut c, &dropped);
    c.settle();
    assert_eq!(
        reply_of(&c, r),
        Err(CommandError::NotStarted {
            entity: EntityId::new(dropped.as_str()),
            reason: DeadLetterReason::RegionStopped,
        })
    );
}

/// A start request whose home cannot be reached is answered by a timeout, once.
#[test]
fn start_entity_times_out_when_no_region_answers() {
    let mut c = Cluster::with_nodes(2, 4);
    let ids = c.one_entity_per_shard(1, 4, "one");
    let on_2 = c.alive_on(2);
    let entity = on_2.first().expect("node 2 hosts a shard").clone();
    assert!(ids.contains(&entity));
    c.cut_link(1, 2);
    let r = c.command(
        1,
        Command::StartEntity {
            entity_type: counter(),
            entity: EntityId::new(entity.as_str()),
        },
    );
    c.advance(Duration::from_secs(72));
    assert!(
        c.reply(r).is_none(),
        "a handoff and a passivation may still be under way"
    );
    c.advance(Duration::from_secs(2));
    assert_eq!(
        replies_to(&c, r),
        [Err(CommandError::StartTimedOut {
            entity: EntityId::new(entity.as_str())
        })]
    );
}

#[test]
fn idle_entities_are_passivated() {
    let mut c = Cluster::new();
    let mut t = type_config(10);
    t.passivate_idle_after = Some(Duration::from_secs(10));
    c.add_node(config(1, t));
    c.publish_view();
    c.tell(1, "idle", "m");
    c.tell(1, "busy", "m");
    for _ in 0..6 {
        c.advance(Duration::from_secs(3));
        c.tell(1, "busy", "m");
    }
    c.settle();
    assert_eq!(c.alive_on(1), ["busy"]);
    assert!(
        c.trace()
            .iter()
            .any(|l| l.ends_with("stop idle Passivation(Idle)"))
    );
}

#[test]
fn an_entity_ignoring_its_stop_is_forced_after_the_stop_timeout() {
    let mut c = Cluster::with_nodes(1, 10);
    c.set_behaviour(StopPolicy::IgnoreGraceful);
    c.tell(1, "a", "m1");
    c.settle();
    c.passivate(1, "a");
    c.advance(Duration::from_secs(9));
    assert_eq!(c.alive_on(1), ["a"]);
    c.advance(Duration::from_secs(2));
    assert!(c.alive_on(1).is_empty());
    let forced = c
        .trace()
        .iter()
        .filter(|l| l.ends_with("stop a Forced"))
        .count();
    assert_eq!(forced, 1, "exactly one forced stop");
}

#[test]
fn removed_members_shards_move_only_after_the_removal_margin() {
    let mut c = Cluster::with_nodes(3, 6);
    c.one_entity_per_shard(1, 6, "one");
    let on_3 = c.alive_on(3);
    assert!(!on_3.is_empty());
    // Node 3 is downed and removed while it is still running (a partition).
    c.remove_member(3);
    c.publish_view();
    c.settle();
    assert!(
        c.alive_on(3).is_empty(),
        "the removed member stopped its own entities at once"
    );
    for id in &on_3 {
        c.tell(1, id, "two");
    }
    c.advance(Duration::from_secs(19));
    for id in &on_3 {
        assert_eq!(c.inbox(id).len(), 1, "{id}: no new home within the margin");
    }
    c.advance(Duration::from_secs(3));
    for id in &on_3 {
        let inbox = c.inbox(id);
        assert_eq!(inbox.len(), 2, "{id}: served after the margin");
        assert_ne!(inbox[1].0, 3);
    }
}

/// Issue 9, second finding: the coordinator learnt that a region's member was removed before
/// it received that region's last `ShardStopped` and `RegionStopped` (sent in the same instant),
/// ignored them as coming from a non-member, and left the shard homeless for the removal
/// margin as if the region had crashed. A region's last words are facts about its last life.
#[test]
fn a_region_removed_right_after_its_shutdown_does_not_stall_its_shards() {
    let mut c = Cluster::with_nodes(2, 4);
    let ids = c.one_entity_per_shard(1, 4, "one");
    let on_2 = c.alive_on(2);
    assert!(!on_2.is_empty());
    c.shut_down_until_stopped(2);
    // Node 2 is removed while its last messages are still on their way to the coordinator.
    c.remove_member(2);
    c.publish_view_to(1);
    c.settle();
    for id in &ids {
        c.tell(1, id, "two");
    }
    c.settle();
    for id in &ids {
        let inbox = c.inbox(id);
        assert_eq!(
            inbox.len(),
            2,
            "{id} served at once, not after the margin:\n{}",
            c.trace().join("\n")
        );
        assert_eq!(inbox[1].0, 1);
    }
    assert_eq!(c.hosting()[&1].len(), 4);
}

/// A member removed after Exiting had stopped its regions: its shards move at once even when
/// its `ShardStopped` never arrives (a broken connection), instead of after the margin.
#[test]
fn an_exited_members_shards_move_without_the_removal_margin() {
    let mut c = Cluster::with_nodes(3, 6);
    let ids = c.one_entity_per_shard(1, 6, "one");
    let on_3 = c.alive_on(3);
    assert!(!on_3.is_empty());
    c.shut_down_until_stopped(3);
    // What node 3 still has to say to the coordinator is lost.
    c.cut_link(3, 1);
    c.member_mut(3).status = MemberStatus::Exiting;
    c.publish_view();
    c.settle();
    c.remove_member(3);
    c.publish_view();
    c.settle();
    c.heal();
    for id in &ids {
        c.tell(2, id, "two");
    }
    c.settle();
    for id in &ids {
        assert_eq!(
            c.inbox(id).len(),
            2,
            "{id} served at once, not after the margin"
        );
    }
    assert!(c.alive_on(3).is_empty());
}

/// Issue 9, third finding: the gate waited for every Up member to register, so a member that
/// does not run the type (a node built for another purpose, one not yet updated in a rolling
/// deployment) blocked allocation forever, silently; and as the oldest member it was chosen to
/// run a coordinator it does not have. Membership says which types each member hosts.
#[test]
fn a_member_without_the_type_neither_blocks_allocation_nor_runs_its_coordinator() {
    let mut c = Cluster::new();
    // Node 3 is the oldest member and runs no entity type at all.
    c.add_node(Config::new(NodeId(3), Incarnation(1)));
    for n in [1, 2] {
        c.add_node(config(n, type_config(6)));
    }
    c.publish_view();
    c.settle();
    assert!(c.node(3).coordinator_allocations(&counter()).is_none());
    let ids = c.one_entity_per_shard(2, 6, "one");
    for id in &ids {
        assert_eq!(c.inbox(id).len(), 1, "{id}: allocated at startup");
    }
    // The coordinator's node crashes: the next member hosting the type takes over, waits out
    // the removal margin for the crashed member, and never waits for node 3.
    assert!(c.node(1).coordinator_allocations(&counter()).is_some());
    c.crash(1);
    c.publish_view();
    c.settle();
    assert!(c.node(2).coordinator_allocations(&counter()).is_some());
    for id in &ids {
        c.tell(2, id, "two");
    }
    c.advance(Duration::from_secs(25));
    for id in &ids {
        assert_eq!(c.inbox(id).len(), 2, "{id}: served after the failover");
    }
    let request = c.command(
        2,
        Command::GetCoordinatorState {
            entity_type: counter(),
        },
    );
    c.settle();
    let Ok(Reply::CoordinatorState(state)) = reply_of(&c, request) else {
        panic!("no coordinator state");
    };
    assert!(state.gate.open);
    assert!(state.gate.unregistered.is_empty());
    assert_eq!(state.allocated, 6);
}

/// A member whose view entry says it hosts the type (or does not say) but that never
/// registers holds allocation back: the coordinator says so, names it, and shows it on request.
#[test]
fn allocation_waiting_on_a_silent_member_is_reported() {
    let mut c = Cluster::new();
    for n in [1, 2] {
        c.add_node(config(n, type_config(6)));
    }
    c.add_node(Config::new(NodeId(3), Incarnation(1)));
    // The host supplying views does not say what node 3 hosts: it may host the type.
    c.member_mut(3).hosts = None;
    c.publish_view();
    c.settle();
    let id = entity_in_shard(4, 6);
    c.tell(2, &id, "one");
    c.advance(Duration::from_secs(5));
    assert!(c.inbox(&id).is_empty(), "allocation waits for node 3");
    let waiting: Vec<&Event> = c
        .events()
        .iter()
        .filter(|(n, e)| n.0 == 1 && matches!(e, Event::AllocationWaiting { .. }))
        .map(|(_, e)| e)
        .collect();
    let [Event::AllocationWaiting { gate, shards, .. }] = waiting.as_slice() else {
        panic!("one event, as long as the gate waits for the same: {waiting:?}");
    };
    assert_eq!(gate.unregistered, [member(3)]);
    assert_eq!(shards, &[ShardId(4)]);
    let request = c.command(
        2,
        Command::GetCoordinatorState {
            entity_type: counter(),
        },
    );
    c.settle();
    let Ok(Reply::CoordinatorState(state)) = reply_of(&c, request) else {
        panic!("no coordinator state");
    };
    assert_eq!(state.coordinator, member(1));
    assert!(!state.gate.open);
    assert_eq!(state.gate.unregistered, [member(3)]);
    assert_eq!(state.waiting, [ShardId(4)]);
    // Once the view says node 3 does not host the type, allocation goes ahead.
    c.member_mut(3).hosts = Some(Default::default());
    c.publish_view();
    c.settle();
    assert_eq!(c.inbox(&id).len(), 1);
    // Explained from node 2: the coordinator's gate waited for node 3, then allocated the
    // shard by the strategy, to the region that now hosts it.
    let request = c.command(
        2,
        Command::Explain {
            entity_type: counter(),
            entity: EntityId::new(id.as_str()),
        },
    );
    c.settle();
    let Ok(Reply::Explanation(explanation)) = reply_of(&c, request) else {
        panic!("no explanation");
    };
    assert_eq!(explanation.shard, ShardId(4));
    assert_eq!(explanation.coordinator, Some(member(1)));
    let decisions: Vec<&Decision> = explanation.records.iter().map(|r| &r.decision).collect();
    let [
        Decision::GateWaited { gate, .. },
        Decision::Allocated { region, cause, .. },
    ] = decisions.as_slice()
    else {
        panic!("the gate's wait, then the allocation: {decisions:?}");
    };
    assert_eq!(gate.unregistered, [member(3)]);
    let AllocationCause::Strategy {
        requester, regions, ..
    } = cause
    else {
        panic!("the strategy's choice: {cause:?}");
    };
    assert_eq!((*requester, *regions), (member(2), 2));
    let hosting = c.node(region.node.0).hosted_shards(&counter());
    assert!(hosting.contains(&ShardId(4)), "{region} hosts it");
    let text = explanation.records[0].to_string();
    assert!(text.contains("unregistered: n3#1"), "{text}");
}

/// Found by the simulator (flapping-links seed 21747): the oldest member ran no entity type, a
/// member hosting shards was downed and removed while it still ran them (cut off, it had not
/// heard yet), and the next coordinator ran on a member that joined after that removal: it
/// never saw it, so its gate did not wait out the removal margin. A removal a node learns of
/// only as a tombstone counts from when it learns of it.
#[test]
fn a_coordinator_that_joined_after_a_removal_waits_out_its_margin() {
    let mut c = Cluster::new();
    c.add_node(Config::new(NodeId(1), Incarnation(1)));
    c.add_node(config(2, type_config(4)));
    c.publish_view();
    c.settle();
    let ids = c.one_entity_per_shard(2, 4, "one");
    assert_eq!(c.alive_on(2).len(), 4, "node 2 hosts everything");
    // Node 2 is removed, but does not hear it (cut off): its entities keep running.
    c.remove_member(2);
    c.publish_view_to(1);
    c.settle();
    c.add_node(config(3, type_config(4)));
    c.publish_view_to(1);
    c.publish_view_to(3);
    c.settle();
    assert!(c.node(3).coordinator_allocations(&counter()).is_some());
    for id in &ids {
        c.tell(3, id, "two");
    }
    c.advance(Duration::from_secs(15));
    assert!(
        c.alive_on(3).is_empty(),
        "nothing of node 2's starts within the margin"
    );
    // Within the margin node 2 hears it was removed (as a downed minority decides for itself).
    c.publish_view_to(2);
    c.settle();
    assert!(c.alive_on(2).is_empty());
    c.advance(Duration::from_secs(4));
    assert!(c.alive_on(3).is_empty(), "still within the margin");
    c.advance(Duration::from_secs(2));
    assert_eq!(
        c.alive_on(3).len(),
        4,
        "after the margin, node 3 takes over"
    );
}

#[test]
fn proxies_route_but_never_host() {
    let mut c = Cluster::new();
    c.add_node(config(1, type_config(10)));
    let mut proxy = type_config(10);
    proxy.proxy_only = true;
    c.add_node(config(2, proxy));
    c.publish_view();
    c.settle();
    for i in 0..10 {
        c.tell(2, &format!("p{i}"), "m");
    }
    c.settle();
    assert!(c.hosting()[&2].is_empty());
    assert_eq!(c.alive_on(1).len(), 10);
    let r = c.command(
        2,
        Command::GetCurrentRegions {
            entity_type: counter(),
        },
    );
    c.settle();
    assert_eq!(
        reply_of(&c, r),
        Ok(Reply::CurrentRegions {
            regions: vec![member(1)]
        })
    );
}

#[test]
fn queries_report_state_locations_regions_and_stats() {
    let mut c = Cluster::with_nodes(2, 4);
    let a = entity_in_shard(0, 4);
    let b = entity_in_shard(1, 4);
    c.tell(1, &a, "m");
    c.tell(1, &b, "m");
    c.settle();
    let home_of = |c: &Cluster, id: &str| {
        if c.alive_on(1).contains(&id.to_owned()) {
            1
        } else {
            2
        }
    };
    let (ha, hb) = (home_of(&c, &a), home_of(&c, &b));
    assert_ne!(ha, hb, "least-shard spreads the two shards");

    let r = c.command(
        ha,
        Command::GetShardRegionState {
            entity_type: counter(),
        },
    );
    let shard_a = shoal_core::shard_of(&EntityId::new(a.as_str()), 4);
    let expected = Reply::ShardRegionState {
        shards: vec![(shard_a, vec![EntityId::new(a.as_str())])],
    };
    assert_eq!(reply_of(&c, r), Ok(expected));

    // Node 1 routed both messages, so it knows both homes; a remote one answers for itself.
    let remote = if ha == 1 { &b } else { &a };
    let remote_shard = shoal_core::shard_of(&EntityId::new(remote.as_str()), 4);
    let r = c.command(
        1,
        Command::GetEntityLocation {
            entity_type: counter(),
            entity: EntityId::new(remote.as_str()),
        },
    );
    c.settle();
    let located = Reply::EntityLocation {
        entity: EntityId::new(remote.as_str()),
        shard: remote_shard,
        region: Some(member(2)),
        alive: true,
    };
    assert_eq!(reply_of(&c, r), Ok(located));
    // A region that never routed to a shard does not know its home (as in Akka.NET).
    let never = entity_in_shard(3, 4);
    let r = c.command(
        2,
        Command::GetEntityLocation {
            entity_type: counter(),
            entity: EntityId::new(never.as_str()),
        },
    );
    let unknown = Reply::EntityLocation {
        entity: EntityId::new(never.as_str()),
        shard: ShardId(3),
        region: None,
        alive: false,
    };
    assert_eq!(reply_of(&c, r), Ok(unknown));

    let r = c.command(
        2,
        Command::GetCurrentRegions {
            entity_type: counter(),
        },
    );
    c.settle();
    assert_eq!(
        reply_of(&c, r),
        Ok(Reply::CurrentRegions {
            regions: vec![member(1), member(2)]
        })
    );

    let r = c.command(
        2,
        Command::GetClusterShardingStats {
            entity_type: counter(),
        },
    );
    c.settle();
    let Ok(Reply::ClusterShardingStats { regions, failed }) = reply_of(&c, r) else {
        panic!("stats")
    };
    assert!(failed.is_empty());
    let total: u32 = regions
        .iter()
        .flat_map(|r| r.shards.iter().map(|(_, n)| n))
        .sum();
    assert!(
        c.trace().iter().any(|l| l.contains("GetRegionStats")),
        "the coordinator asked the regions"
    );
    assert!(
        c.trace().iter().any(|l| l.contains("LocateEntity"))
            && c.trace().iter().any(|l| l.contains("EntityLocated"))
    );
    assert_eq!(total, 2);

    // A region that cannot answer is reported as failed after the query timeout.
    c.cut_link(1, 2);
    c.cut_link(2, 1);
    let r = c.command(
        1,
        Command::GetClusterShardingStats {
            entity_type: counter(),
        },
    );
    c.advance(Duration::from_secs(4));
    let Ok(Reply::ClusterShardingStats { failed, .. }) = reply_of(&c, r) else {
        panic!("stats")
    };
    assert_eq!(failed, vec![member(2)]);
}

#[test]
fn coordinator_queries_without_a_coordinator_fail_fast() {
    let mut c = Cluster::new();
    c.add_node(config(1, type_config(4)));
    let r = c.command(
        1,
        Command::GetCurrentRegions {
            entity_type: counter(),
        },
    );
    assert_eq!(reply_of(&c, r), Err(CommandError::NoCoordinator(counter())));
}

#[test]
fn late_shard_stopped_after_a_handoff_timeout_still_deallocates() {
    let mut c = Cluster::with_nodes(2, 4);
    c.one_entity_per_shard(1, 4, "one");
    c.set_behaviour(StopPolicy::Manual);
    c.command(2, Command::GracefulShutdown { entity_type: None });
    // Entities of node 2 do not stop within the 60 s handoff timeout.
    c.advance(Duration::from_secs(61));
    let table = c
        .node(1)
        .coordinator_allocations(&counter())
        .unwrap()
        .clone();
    assert!(
        table.values().any(|r| *r == member(2)),
        "after the timeout the shards stay with node 2"
    );
    c.complete_stops();
    c.advance(Duration::from_secs(1));
    let table = c
        .node(1)
        .coordinator_allocations(&counter())
        .unwrap()
        .clone();
    assert!(
        table.values().all(|r| *r == member(1)),
        "late ShardStopped deallocated: {table:?}"
    );
    assert_eq!(c.hosting()[&2], Vec::<u32>::new());
    assert_eq!(
        c.hosting()[&1].len(),
        table.len(),
        "coordinator table equals what regions host"
    );
}

#[test]
fn coordinator_moves_when_the_oldest_leaves() {
    let mut c = Cluster::with_nodes(3, 6);
    let ids = c.one_entity_per_shard(3, 6, "one");
    c.command(1, Command::GracefulShutdown { entity_type: None });
    c.settle();
    c.member_mut(1).status = MemberStatus::Leaving;
    c.publish_view();
    c.settle();
    assert!(c.node(1).coordinator_allocations(&counter()).is_none());
    let table = c
        .node(2)
        .coordinator_allocations(&counter())
        .expect("node 2 took over")
        .clone();
    assert_eq!(
        table.len(),
        6,
        "every shard is known to the new coordinator"
    );
    assert!(table.values().all(|r| *r != member(1)));
    for id in &ids {
        c.tell(3, id, "two");
    }
    c.settle();
    for id in &ids {
        assert_eq!(
            c.inbox(id)
                .iter()
                .map(|(_, p)| p.as_str())
                .collect::<Vec<_>>(),
            ["one", "two"]
        );
    }
    assert_eq!(c.dead_letters(), 0);
}

#[test]
fn a_downed_member_stops_its_region_and_dead_letters_new_messages() {
    let mut c = Cluster::with_nodes(2, 4);
    for s in 0..4 {
        c.tell(2, &entity_in_shard(s, 4), "m");
    }
    c.settle();
    let was_alive = c.alive_on(2);
    assert!(!was_alive.is_empty());
    c.member_mut(2).status = MemberStatus::Down;
    c.publish_view();
    c.settle();
    assert!(c.alive_on(2).is_empty());
    assert!(c.node(2).is_region_stopped(&counter()));
    c.tell(2, "b", "m");
    assert_eq!(dead_letter_reasons(&c), [DeadLetterReason::RegionStopped]);
    for id in was_alive {
        assert!(
            c.trace()
                .iter()
                .any(|l| l.ends_with(&format!("n2 stop {id} Forced"))),
            "{id} force-stopped"
        );
    }
}

#[test]
fn a_restarted_node_is_a_new_incarnation() {
    let mut c = Cluster::with_nodes(2, 4);
    let ids = c.one_entity_per_shard(1, 4, "one");
    c.crash(2);
    c.publish_view();
    let mut restarted = Config::new(NodeId(2), Incarnation(2)).with_entity_type(type_config(4));
    restarted.seed = 22;
    c.add_node(restarted);
    c.publish_view();
    c.advance(Duration::from_secs(25));
    for id in &ids {
        c.tell(1, id, "two");
    }
    c.settle();
    for id in &ids {
        assert_eq!(c.inbox(id).last().map(|(_, p)| p.as_str()), Some("two"));
    }
    let table = c.node(1).coordinator_allocations(&counter()).unwrap();
    assert!(
        table
            .values()
            .all(|r| r.incarnation == Incarnation(2) || r.node == NodeId(1))
    );
}

#[test]
fn stop_reasons_are_reported_to_the_host() {
    // Handoff stops use StopReason::HandOff (the host sends the entity's stop message).
    let mut c = Cluster::with_nodes(2, 4);
    let id = entity_in_shard(1, 4);
    c.tell(1, &id, "m");
    c.tell(1, &entity_in_shard(0, 4), "m");
    c.settle();
    c.command(2, Command::GracefulShutdown { entity_type: None });
    c.command(1, Command::GracefulShutdown { entity_type: None });
    c.settle();
    let stops: Vec<&String> = c.trace().iter().filter(|l| l.contains(" stop ")).collect();
    assert!(!stops.is_empty());
    assert!(
        stops
            .iter()
            .all(|l| l.ends_with(&format!("{:?}", StopReason::HandOff)))
    );
}

/// A `HostShard` that reaches a region just after it began shutting down is refused; the
/// coordinator moves that never-started shard elsewhere instead of waiting for it forever.
#[test]
fn host_shard_refused_during_shutdown_is_reallocated() {
    let mut c = Cluster::with_nodes(2, 4);
    c.tell(1, &entity_in_shard(0, 4), "first");
    c.settle();
    // The next new shard goes to node 2 (fewest shards); its HostShard is still in flight
    // when node 2 starts shutting down.
    let e = entity_in_shard(1, 4);
    c.tell(1, &e, "m");
    c.command(2, Command::GracefulShutdown { entity_type: None });
    c.advance(Duration::from_secs(30));
    assert_eq!(
        c.inbox(&e),
        vec![(1, "m".to_owned())],
        "{}",
        c.trace().join("\n")
    );
    assert!(c.node(2).is_region_stopped(&counter()));
    assert_eq!(c.dead_letters(), 0);
}

#[test]
fn oversized_payloads_are_dead_letters() {
    let mut c = Cluster::with_nodes(1, 4);
    let max = shoal_core::ShardingSettings::default().max_payload_size;
    c.input(
        1,
        Input::Tell {
            entity_type: counter(),
            entity: EntityId::new("a"),
            payload: Payload(vec![0; max + 1]),
        },
    );
    c.input(
        1,
        Input::Tell {
            entity_type: counter(),
            entity: EntityId::new("a"),
            payload: Payload(vec![0; max]),
        },
    );
    c.settle();
    assert_eq!(dead_letter_reasons(&c), [DeadLetterReason::PayloadTooLarge]);
    assert_eq!(
        c.inbox("a").len(),
        1,
        "a payload of exactly the limit is delivered"
    );
    let mut cfg = config(1, type_config(4));
    cfg.settings.max_payload_size = shoal_core::MAX_PAYLOAD_SIZE + 1;
    assert!(matches!(
        Node::new(cfg, Instant::ZERO),
        Err(ConfigError::InvalidMaxPayloadSize(_))
    ));
}

/// The external strategy: a desired location set on any node reaches the coordinator (every node
/// keeps it), new shards go there, and the rebalance tick moves a misplaced shard there.
#[test]
fn external_allocation_follows_locations_set_on_any_node() {
    let mut c = Cluster::new();
    for n in 1..=3 {
        let mut t = type_config(4);
        t.allocation = shoal_core::AllocationStrategyConfig::External;
        c.add_node(config(n, t));
    }
    c.publish_view();
    c.settle();
    let set = |c: &mut Cluster, shard: u32, node: u64| {
        let command = Command::SetShardLocation {
            entity_type: counter(),
            shard: ShardId(shard),
            node: NodeId(node),
        };
        let r = c.command(2, command);
        c.settle();
        assert_eq!(reply_of(c, r), Ok(Reply::Accepted));
    };
    set(&mut c, 2, 3);
    c.tell(1, &entity_in_shard(2, 4), "m");
    // No desired location: the requester's region.
    c.tell(1, &entity_in_shard(1, 4), "m");
    c.settle();
    assert_eq!(c.hosting()[&3], [2]);
    assert_eq!(c.hosting()[&1], [1]);
    set(&mut c, 1, 2);
    c.advance(Duration::from_secs(11));
    assert_eq!(
        c.hosting()[&2],
        [1],
        "the rebalance tick moved shard 1 to node 2"
    );
    let r = c.command(
        1,
        Command::SetShardLocation {
            entity_type: counter(),
            shard: ShardId(9),
            node: NodeId(1),
        },
    );
    assert_eq!(
        reply_of(&c, r),
        Err(CommandError::ShardOutOfRange {
            entity_type: counter(),
            shard: ShardId(9)
        })
    );
    assert!(c.trace().iter().any(|l| l.contains("SetShardLocations")));
}

/// A sharding message of the counter type from member `from` to member `to`.
fn from_peer(from: u64, to: u64, body: Body) -> Input {
    Input::Receive(Box::new(Envelope {
        from: member(from),
        to: member(to),
        seq: 0,
        message: Message::Sharding {
            entity_type: counter(),
            body,
        },
    }))
}

fn replies_to(c: &Cluster, request: RequestId) -> Vec<Result<Reply, CommandError>> {
    c.events()
        .iter()
        .filter_map(|(_, e)| match e {
            Event::Reply { request: r, result } if *r == request => Some(result.clone()),
            _ => None,
        })
        .collect()
}

/// Every remote query is answered exactly once: by the member asked, or by a timeout when the
/// answer is lost; late, repeated or unsolicited answers are rejected rather than relayed as a
/// second reply (node_inputs fuzz target, regression: a peer's `ClusterShardingStats` for a
/// request nobody asked was relayed to the application).
#[test]
fn remote_queries_are_answered_exactly_once() {
    let mut c = Cluster::with_nodes(2, 4);
    for shard in 0..4 {
        c.tell(1, &entity_in_shard(shard, 4), "m");
    }
    c.settle();
    // An entity on node 1 that node 2 has routed to, so node 2 asks node 1 where it is.
    let on_1 = c.hosting()[&1][0];
    let remote = entity_in_shard(on_1, 4);
    c.tell(2, &remote, "m");
    c.settle();
    let coordinator = member(1);

    // An answer nobody asked for is counted and dropped.
    let stray = RequestId(777);
    let rejected = c.node(2).metrics().rejected;
    let body = Body::CurrentRegions {
        request: stray,
        regions: vec![],
    };
    c.input(2, from_peer(1, 2, body));
    assert!(replies_to(&c, stray).is_empty());
    assert_eq!(c.node(2).metrics().rejected, rejected + 1);

    // The coordinator's answer is lost: the query times out, once; the late answer is dropped.
    c.cut_link(1, 2);
    let r = c.command(
        2,
        Command::GetCurrentRegions {
            entity_type: counter(),
        },
    );
    // A second query under the same id while the first is in flight is refused at once.
    let again = Input::Command {
        request: r,
        command: Command::GetCurrentRegions {
            entity_type: counter(),
        },
    };
    c.input(2, again);
    assert_eq!(
        replies_to(&c, r),
        vec![Err(CommandError::RequestInFlight(r))]
    );
    c.advance(Duration::from_secs(7));
    assert_eq!(
        replies_to(&c, r),
        vec![
            Err(CommandError::RequestInFlight(r)),
            Err(CommandError::QueryTimedOut { asked: coordinator })
        ]
    );
    let late = Body::CurrentRegions {
        request: r,
        regions: vec![member(1)],
    };
    c.input(2, from_peer(1, 2, late));
    assert_eq!(replies_to(&c, r).len(), 2, "the late answer is not relayed");
    c.heal();

    // An answer from a member that was not asked is not relayed either; the real one is.
    let r = c.command(
        2,
        Command::GetEntityLocation {
            entity_type: counter(),
            entity: EntityId::new(remote.as_str()),
        },
    );
    let impostor = Body::EntityLocated {
        request: r,
        entity: EntityId::new(remote.as_str()),
        shard: ShardId(on_1),
        hosted: true,
        alive: false,
    };
    c.input(2, from_peer(3, 2, impostor));
    assert!(replies_to(&c, r).is_empty());
    c.settle();
    let replies = replies_to(&c, r);
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert!(matches!(
        &replies[0],
        Ok(Reply::EntityLocation { region: Some(m), alive: true, .. }) if *m == member(1)
    ));
}

/// A peer running with another `number_of_shards` (a deployment error) cannot make this node
/// host or allocate a shard the type does not have, nor deliver an entity under a shard it does
/// not hash to; what it forwarded is dead-lettered, not lost (node_inputs fuzz target,
/// regression: a `GetShardHome` for shard 9 of 8 was allocated and hosted).
#[test]
fn shards_that_do_not_fit_the_type_are_refused() {
    let mut c = Cluster::with_nodes(2, 8);
    c.settle();
    let rejected = c.node(1).metrics().rejected;
    c.input(1, from_peer(2, 1, Body::GetShardHome { shard: ShardId(9) }));
    c.settle();
    assert!(c.hosting().values().flatten().all(|s| *s < 8));
    assert_eq!(
        c.node(1)
            .coordinator_allocations(&counter())
            .map(|t| t.len()),
        Some(0)
    );
    let entity = entity_in_shard(3, 8);
    let wrong_shard = Body::Forward {
        shard: ShardId(4),
        entity: EntityId::new(entity.as_str()),
        payload: Payload(b"m".to_vec()),
    };
    c.input(1, from_peer(2, 1, wrong_shard));
    c.settle();
    assert!(c.inbox(&entity).is_empty());
    assert_eq!(
        dead_letter_reasons(&c),
        vec![DeadLetterReason::ShardMismatch]
    );
    assert_eq!(c.node(1).metrics().rejected, rejected + 2);
}

#[test]
fn application_messages_reach_only_the_incarnation_they_are_for() {
    let node = |n| {
        let node = Node::new(config(n, type_config(10)), Instant::ZERO).expect("valid");
        Driver::new(node, Instant::ZERO)
    };
    let (mut one, mut two) = (node(1), node(2));
    let view = || {
        MembershipView::new(vec![
            Member::up(member(1), 1, &[]),
            Member::up(member(2), 2, &[]),
        ])
    };
    let handle = |d: &mut Driver, input| {
        let mut out: Vec<Effect> = Vec::new();
        d.handle_input(Instant::ZERO, input, &mut out);
        out
    };
    handle(&mut one, Input::MembershipChanged(view()));
    handle(&mut two, Input::MembershipChanged(view()));
    let send = |to, bytes: &[u8]| Input::SendApp {
        to,
        payload: Payload(bytes.to_vec()),
    };
    let app_sends = |out: Vec<Effect>| -> Vec<Envelope> {
        out.into_iter()
            .filter_map(|e| match e {
                Effect::Send(t) if matches!(t.envelope.message, Message::App { .. }) => {
                    Some(*t.envelope)
                }
                _ => None,
            })
            .collect()
    };
    let events = |out: Vec<Effect>| -> Vec<Event> {
        out.into_iter()
            .filter_map(|e| match e {
                Effect::Event(e @ (Event::AppMessage { .. } | Event::AppDeadLetter { .. })) => {
                    Some(e)
                }
                _ => None,
            })
            .collect()
    };

    // Numbered on the link like everything else, delivered once.
    let [first] = app_sends(handle(&mut one, send(member(2), b"a")))
        .try_into()
        .expect("sent");
    let [second] = app_sends(handle(&mut one, send(member(2), b"b")))
        .try_into()
        .expect("sent");
    assert!(second.seq > first.seq && first.seq > 0, "numbered in order");
    let arrived = events(handle(&mut two, Input::Receive(Box::new(first.clone()))));
    let expected = Event::AppMessage {
        from: member(1),
        payload: Payload(b"a".to_vec()),
    };
    assert_eq!(arrived, [expected]);
    assert!(
        events(handle(&mut two, Input::Receive(Box::new(first)))).is_empty(),
        "a copy is dropped"
    );

    // To this member itself: delivered at once, locally.
    let local = events(handle(&mut one, send(member(1), b"me")));
    let expected = Event::AppMessage {
        from: member(1),
        payload: Payload(b"me".to_vec()),
    };
    assert_eq!(local, [expected]);

    // Node 2 restarts as incarnation 2: a reply to incarnation 1 is not sent, and one already
    // in flight is not delivered to the new incarnation.
    let restarted = MemberId::new(2, 2);
    let mut three = Driver::new(
        Node::new(
            Config::new(NodeId(2), Incarnation(2)).with_entity_type(type_config(10)),
            Instant::ZERO,
        )
        .expect("valid"),
        Instant::ZERO,
    );
    let later = MembershipView::new(vec![
        Member::up(member(1), 1, &[]),
        Member::up(restarted, 3, &[]),
    ]);
    handle(&mut one, Input::MembershipChanged(later.clone()));
    handle(&mut three, Input::MembershipChanged(later));
    let dropped = events(handle(&mut one, send(member(2), b"late")));
    let expected = Event::AppDeadLetter {
        to: member(2),
        payload: Payload(b"late".to_vec()),
        reason: DeadLetterReason::MemberGone,
    };
    assert_eq!(dropped, [expected]);
    assert!(
        events(handle(&mut three, Input::Receive(Box::new(second)))).is_empty(),
        "never delivered to another incarnation"
    );
    assert_eq!(three.node().metrics().misaddressed, 1);

    // Too large to send.
    let huge = vec![0; config(1, type_config(10)).settings.max_payload_size + 1];
    let refused = events(handle(&mut one, send(restarted, &huge)));
    assert!(matches!(
        refused.as_slice(),
        [Event::AppDeadLetter {
            reason: DeadLetterReason::PayloadTooLarge,
            ..
        }]
    ));
}

#[test]
fn what_a_hosts_bounded_queues_refuse_becomes_dead_letters() {
    let node = Node::new(config(1, type_config(10)), Instant::ZERO).expect("valid");
    let mut one = Driver::new(node, Instant::ZERO);
    let mut handle = |input| {
        let mut out: Vec<Effect> = Vec::new();
        one.handle_input(Instant::ZERO, input, &mut out);
        out
    };
    let view = MembershipView::new(vec![
        Member::up(member(1), 1, &[]),
        Member::up(member(2), 2, &[]),
    ]);
    handle(Input::MembershipChanged(view));
    let envelope = |from: MemberId, message: Message| Envelope {
        from,
        to: member(2),
        seq: 7,
        message,
    };
    let sharding = |body: Body| Message::Sharding {
        entity_type: counter(),
        body,
    };
    let entity = EntityId::new(entity_in_shard(3, 10));
    let forward = sharding(Body::Forward {
        shard: ShardId(3),
        entity: entity.clone(),
        payload: Payload(b"hello".to_vec()),
    });
    let start = sharding(Body::StartEntity {
        shard: ShardId(3),
        entity: entity.clone(),
        ack: Some(StartAck {
            requester: member(2),
            request: RequestId(9),
        }),
    });
    let app = Message::App {
        payload: Payload(b"reply".to_vec()),
    };
    let protocol = sharding(Body::ShardStopped { shard: ShardId(3) });
    assert!(envelope(member(1), forward.clone()).is_user_traffic());
    assert!(envelope(member(1), start.clone()).is_user_traffic());
    assert!(envelope(member(1), app.clone()).is_user_traffic());
    assert!(!envelope(member(1), protocol.clone()).is_user_traffic());
    let refused = |message| Input::OutboundQueueFull {
        envelope: Box::new(envelope(member(1), message)),
    };
    let reason = DeadLetterReason::OutboundQueueFull;

    // A letter: a dead letter with its payload.
    let out = handle(refused(forward));
    let expected = Effect::Event(Event::DeadLetter {
        entity_type: counter(),
        entity: entity.clone(),
        payload: Some(Payload(b"hello".to_vec())),
        reason,
    });
    assert_eq!(out, [expected]);

    // A start request: a dead letter, and its requester hears it was dropped.
    let out = handle(refused(start));
    let answered = out.iter().any(|e| {
        matches!(e, Effect::Send(t) if t.envelope.to == member(2) && matches!(
            t.envelope.message.body(),
            Some(Body::StartEntityAck { request: RequestId(9), outcome: StartOutcome::Dropped(r), .. })
                if *r == reason
        ))
    });
    assert!(answered, "{out:?}");
    assert!(out.iter().any(|e| matches!(
        e,
        Effect::Event(Event::DeadLetter { payload: None, reason: r, .. }) if *r == reason
    )));

    // An application message: an application dead letter.
    let out = handle(refused(app));
    let expected = Effect::Event(Event::AppDeadLetter {
        to: member(2),
        payload: Payload(b"reply".to_vec()),
        reason,
    });
    assert_eq!(out, [expected]);

    // The protocol's own: nothing for the application (its timers recover it).
    assert!(handle(refused(protocol.clone())).is_empty());

    // An envelope this node did not send is not its to report.
    let foreign = Input::OutboundQueueFull {
        envelope: Box::new(envelope(member(2), protocol)),
    };
    assert!(handle(foreign).is_empty());
    assert_eq!(one.node().metrics().rejected, 1);

    // A full mailbox.
    let mut out: Vec<Effect> = Vec::new();
    let full = Input::MailboxFull {
        entity_type: counter(),
        entity: entity.clone(),
        payload: Payload(b"late".to_vec()),
    };
    one.handle_input(Instant::ZERO, full, &mut out);
    let expected = Effect::Event(Event::DeadLetter {
        entity_type: counter(),
        entity,
        payload: Some(Payload(b"late".to_vec())),
        reason: DeadLetterReason::MailboxFull,
    });
    assert_eq!(out, [expected]);
}

/// Akka's "Trying to register to coordinator at [...], but no acknowledgement. Total [...]
/// buffered messages.": the host's views do not say which types members run, so the view
/// names the oldest member, which runs no entity type, for the coordinator. The region on the
/// other member registers in vain; from its fifth attempt on, every retry interval, it says
/// whom it waits for, how often it tried and how many messages wait. Once a member that runs
/// the type is the oldest, it registers and the warnings stop.
#[test]
fn a_region_whose_coordinator_never_answers_says_so() {
    let warnings = |c: &Cluster| -> Vec<(MemberId, bool, u32, u32)> {
        (c.events().iter())
            .filter_map(|(_, e)| match e {
                Event::CoordinatorUnanswered {
                    coordinator,
                    registered,
                    attempts,
                    buffered,
                    ..
                } => Some((
                    coordinator.expect("named"),
                    *registered,
                    *attempts,
                    *buffered,
                )),
                _ => None,
            })
            .collect()
    };
    let mut c = Cluster::new();
    c.add_node(Config::new(NodeId(1), Incarnation(1)));
    c.add_node(config(2, type_config(10)));
    for n in [1, 2] {
        c.member_mut(n).hosts = None;
    }
    c.publish_view();
    c.advance(Duration::from_secs(5));
    assert!(warnings(&c).is_empty(), "nothing waits yet");
    for i in 0..3 {
        c.tell(2, &format!("e{i}"), "m");
    }
    c.advance(Duration::from_secs(20));
    let seen = warnings(&c);
    assert!(seen.len() >= 5, "about one per retry interval: {seen:?}");
    for (coordinator, registered, attempts, buffered) in &seen {
        assert_eq!(*coordinator, member(1), "names the member it waits for");
        assert!(!registered);
        assert!(*attempts >= 5, "{seen:?}");
        assert_eq!(*buffered, 3);
    }
    assert!(
        seen.windows(2).all(|w| w[0].2 < w[1].2),
        "attempts grow: {seen:?}"
    );
    assert!(c.inbox("e0").is_empty());

    // Member 1 leaves the view: member 2 runs the coordinator, registers, and delivers.
    c.remove_member(1);
    c.publish_view();
    c.advance(Duration::from_secs(30));
    assert_eq!(c.inbox("e0").len(), 1);
    let before = warnings(&c).len();
    c.advance(Duration::from_secs(20));
    assert_eq!(warnings(&c).len(), before, "answered: no more warnings");
}

#[test]
fn due_timers_name_the_role_and_the_timer() {
    // A node joining through itself: its first join attempt is due at once, and the region
    // of its type ticks; nothing is due once they have run.
    let mut c = config(1, type_config(10));
    c.membership = Some(MembershipSettings::new([NodeId(1)]));
    let mut node = Node::new(c, Instant::ZERO).expect("valid");
    let due = node.due_timers(Instant::ZERO);
    assert!(
        due.contains(&"membership: join attempt".to_string()),
        "{due:?}"
    );
    assert!(
        due.iter()
            .all(|name| name.starts_with("membership: ") || name.starts_with("region counter: ")),
        "{due:?}"
    );
    node.handle_timeout(Instant::ZERO);
    while node.poll_effect().is_some() {}
    assert_eq!(node.due_timers(Instant::ZERO), Vec::<String>::new());
    let next = node.poll_timeout().expect("a timer is set");
    assert!(
        !node.due_timers(next).is_empty(),
        "the next timer is named when it is due"
    );
}

/// An active-entity limit per region, divided among its shards: the least recently used
/// entity goes first, through the passivation path (its next message starts it again, after
/// the stop, in order); a shard started later takes its share from the others; the limit
/// changes at run time, and the command is refused for a type without one or for zero.
#[test]
fn the_active_entity_limit_is_divided_among_shards_and_changes_at_run_time() {
    use shoal_core::PassivationCause;
    use shoal_core::passivation::{ActiveEntityLimit, ReplacementPolicy};
    let mut t = type_config(2);
    t.passivate_idle_after = None;
    t.active_entity_limit = Some(ActiveEntityLimit {
        per_region: 4,
        policy: ReplacementPolicy::LeastRecentlyUsed,
    });
    let mut c = Cluster::new();
    c.add_node(config(1, t).with_entity_type({
        let mut other = type_config(2);
        other.name = EntityType::new("unlimited");
        other
    }));
    c.publish_view();
    c.settle();
    // Every id of shard 0 of 2: the first shard hosted gets the whole limit.
    let in_shard = |shard: u32, n: usize| -> Vec<String> {
        (0..)
            .map(|i| format!("e{i}"))
            .filter(|id| shoal_core::shard_of(&EntityId::new(id.as_str()), 2).0 == shard)
            .take(n)
            .collect()
    };
    let zero = in_shard(0, 6);
    for id in &zero[..5] {
        c.tell(1, id, "m1");
        c.settle();
    }
    let mut alive = c.alive_on(1);
    alive.sort();
    let mut expected: Vec<String> = zero[1..5].to_vec();
    expected.sort();
    assert_eq!(
        alive, expected,
        "the oldest of five under a limit of four went"
    );
    let limit_stops = |c: &Cluster| {
        c.trace()
            .iter()
            .filter(|l| l.ends_with(&format!("Passivation({:?})", PassivationCause::Limit)))
            .count()
    };
    assert_eq!(limit_stops(&c), 1);
    // The first entity's next message starts it again; the least recently used goes.
    c.tell(1, &zero[0], "m2");
    c.settle();
    assert_eq!(c.inbox(&zero[0]).len(), 2, "nothing lost to the limit");
    assert!(!c.alive_on(1).contains(&zero[1]));
    // Shard 1 starts: the limit is re-divided, two each, and shard 0 passivates two.
    let one = in_shard(1, 1);
    c.tell(1, &one[0], "m1");
    c.settle();
    assert_eq!(c.alive_on(1).len(), 3);
    // Lowered to two at run time: one each.
    let r = c.command(
        1,
        Command::SetActiveEntityLimit {
            entity_type: counter(),
            limit: 2,
        },
    );
    c.settle();
    assert_eq!(reply_of(&c, r), Ok(Reply::Accepted));
    assert_eq!(c.alive_on(1).len(), 2);
    let r = c.command(
        1,
        Command::SetActiveEntityLimit {
            entity_type: counter(),
            limit: 0,
        },
    );
    assert_eq!(
        reply_of(&c, r),
        Err(CommandError::ZeroActiveEntityLimit(counter()))
    );
    let unlimited = EntityType::new("unlimited");
    let r = c.command(
        1,
        Command::SetActiveEntityLimit {
            entity_type: unlimited.clone(),
            limit: 5,
        },
    );
    assert_eq!(
        reply_of(&c, r),
        Err(CommandError::NoActiveEntityLimit(unlimited))
    );
    let mut bad = type_config(2);
    bad.active_entity_limit = Some(ActiveEntityLimit {
        per_region: 0,
        policy: ReplacementPolicy::default(),
    });
    assert!(matches!(
        Node::new(config(2, bad), Instant::ZERO).unwrap_err(),
        ConfigError::ZeroActiveEntityLimit(_)
    ));
}
