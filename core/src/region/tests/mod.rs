//! Region role tests: one call, then the exact effects it produced. The region is member 2; the
//! coordinator runs on member 1 (the oldest); member 3 is another region.

use super::*;
use crate::config::EntityTypeConfig;
use crate::effect::{Effect, EntityEffect, Transmit};
use crate::id::HandoffRound;
use crate::members::{Member, MemberStatus, MembershipView};
use crate::message::{Envelope, Handled, Message, Payload, RegionShards};
use crate::reason::StopReason;

fn m(n: u64) -> MemberId {
    MemberId::new(n, 1)
}

fn ty() -> EntityType {
    EntityType::new("counter")
}

fn at(millis: u64) -> Instant {
    Instant::from_millis(millis)
}

fn view(down: bool) -> MembershipView {
    let mut me = Member::up(m(2), 2, &[]);
    if down {
        me.status = MemberStatus::Down;
    }
    MembershipView::new(vec![Member::up(m(1), 1, &[]), me, Member::up(m(3), 3, &[])])
}

/// [`view`] after member 1 left: the coordinator moves to member 4, older than 2 and 3.
fn coordinator_moved() -> MembershipView {
    MembershipView::new(vec![
        Member::up(m(4), 1, &[]),
        Member::up(m(2), 2, &[]),
        Member::up(m(3), 3, &[]),
    ])
}

/// The first entity id of shard `s` (4 shards).
fn entity(s: u32) -> EntityId {
    (0..)
        .map(|i| EntityId::new(format!("e{i}")))
        .find(|e| shard_of(e, 4).0 == s)
        .expect("some id per shard")
}

struct Fixture {
    region: Region,
    rng: Rng,
    out: Effects,
}

impl Fixture {
    /// The region gets `view`, with the coordinator's place the node works out for it.
    fn handle_view(&mut self, now: Instant, view: &MembershipView) {
        let r = &self.region;
        let coordinator = view.coordinator_of(&r.entity_type, r.role.as_deref());
        self.region
            .handle_membership(now, view, coordinator, &mut self.rng, &mut self.out);
    }

    fn new(proxy: bool) -> Self {
        Self::with(proxy, |_| {})
    }

    /// A region of a type `configure`d further.
    fn with(proxy: bool, configure: impl FnOnce(&mut EntityTypeConfig)) -> Self {
        let mut config = EntityTypeConfig::new("counter");
        config.number_of_shards = 4;
        config.passivate_idle_after = None;
        configure(&mut config);
        let region = Region::new(m(2), &config, &ShardingSettings::default(), proxy, at(0));
        Self {
            region,
            rng: Rng::new(7),
            out: Effects::new(m(2)),
        }
    }

    /// Member of the view, registered with member 1.
    fn registered() -> Self {
        Self::registered_with(|_| {})
    }

    /// [`Fixture::registered`], for a type `configure`d further.
    fn registered_with(configure: impl FnOnce(&mut EntityTypeConfig)) -> Self {
        let mut f = Self::with(false, configure);
        f.handle_view(at(0), &view(false));
        f.recv(1, Body::RegisterAck);
        f.out.take();
        f
    }

    /// [`Fixture::registered`], hosting shard 1 with an entity running (it got "m1"), and
    /// "waiting" buffered for shard 2, whose home is not known.
    fn hosting_one_with_a_letter_waiting() -> Self {
        let mut f = Self::registered();
        f.recv(
            1,
            Body::HostShard {
                shard: ShardId(1),
                epoch: Epoch(0),
            },
        );
        f.tell(1, "m1");
        f.tell(2, "waiting");
        f
    }

    fn recv(&mut self, n: u64, body: Body) -> Handled {
        self.region.handle_message(at(0), m(n), body, &mut self.out)
    }

    fn tell(&mut self, s: u32, payload: &str) {
        let p = Letter::Message(Payload::from(payload.as_bytes()));
        self.region.handle_tell(at(0), entity(s), p, &mut self.out);
    }

    fn take(&mut self) -> Vec<Effect> {
        self.out.take()
    }
}

fn send(to: u64, body: Body) -> Effect {
    Effect::Send(Transmit {
        address: None,
        envelope: Box::new(Envelope {
            from: m(2),
            to: m(to),
            seq: 0,
            message: Message::Sharding {
                entity_type: ty(),
                body,
            },
        }),
    })
}

fn forward(s: u32, payload: &str) -> Body {
    Body::Forward {
        shard: ShardId(s),
        entity: entity(s),
        payload: Payload::from(payload.as_bytes()),
    }
}

fn event(e: Event) -> Effect {
    Effect::Event(e)
}

/// The coordinator answered where shard `s` lives (`home`), `waited` after it was asked.
fn home_answered(s: u32, home: u64, waited: Duration) -> Effect {
    event(Event::ShardHomeAnswered {
        entity_type: ty(),
        shard: ShardId(s),
        home: m(home),
        waited,
    })
}

#[test]
fn registers_with_the_coordinator_the_view_names() {
    let mut f = Fixture::new(false);
    f.handle_view(at(0), &view(false));
    assert_eq!(
        f.take(),
        [send(
            1,
            Body::Register {
                shards: vec![],
                handing_off: vec![]
            }
        )]
    );
    assert_eq!(f.recv(1, Body::RegisterAck), Handled::Accepted);
    assert_eq!(
        f.take(),
        [event(Event::RegionRegistered {
            entity_type: ty(),
            coordinator: m(1)
        })]
    );
}

#[test]
fn registration_is_retried_with_growing_delays_up_to_the_retry_interval() {
    let mut f = Fixture::new(false);
    f.handle_view(at(0), &view(false));
    f.take();
    let mut attempts = Vec::new();
    let mut now = at(0);
    while attempts.len() < 6 {
        now = f.region.registration.next_attempt.expect("retry armed");
        f.region.handle_timeout(now, &mut f.rng, &mut f.out);
        let sent = f.take().into_iter().filter(|e| matches!(e, Effect::Send(t) if matches!(t.envelope.message.body(), Some(Body::Register { .. })))).count();
        if sent == 1 {
            attempts.push(now);
        }
    }
    let gaps: Vec<u64> = attempts
        .windows(2)
        .map(|w| (w[1].as_nanos() - w[0].as_nanos()) / 1_000_000)
        .collect();
    assert!(
        gaps.windows(2).all(|g| g[1] >= g[0] * 9 / 10),
        "delays grow: {gaps:?}"
    );
    assert!(
        gaps.iter().all(|g| *g <= 2_200),
        "capped near retry_interval: {gaps:?}"
    );
    assert!(now > at(2_000));
}

#[test]
fn an_unknown_shard_is_buffered_and_asked_for_once() {
    let mut f = Fixture::registered();
    f.tell(1, "m1");
    assert_eq!(
        f.take(),
        [send(1, Body::GetShardHome { shard: ShardId(1) })]
    );
    f.tell(1, "m2");
    assert_eq!(f.take(), []);
    assert_eq!(f.region.buffered(), 2);
}

#[test]
fn nothing_is_asked_before_registration_then_everything_is() {
    let mut f = Fixture::new(false);
    f.handle_view(at(0), &view(false));
    f.take();
    f.tell(1, "m1");
    f.tell(2, "m1");
    assert_eq!(f.take(), []);
    f.recv(1, Body::RegisterAck);
    assert_eq!(
        f.take(),
        [
            event(Event::RegionRegistered {
                entity_type: ty(),
                coordinator: m(1)
            }),
            send(1, Body::GetShardHome { shard: ShardId(1) }),
            send(1, Body::GetShardHome { shard: ShardId(2) }),
        ]
    );
}

#[test]
fn a_remote_home_gets_the_buffered_messages_in_order() {
    let mut f = Fixture::registered();
    f.tell(1, "m1");
    f.tell(1, "m2");
    f.take();
    f.recv(
        1,
        Body::ShardHome {
            shard: ShardId(1),
            region: m(3),
        },
    );
    assert_eq!(
        f.take(),
        [
            home_answered(1, 3, Duration::ZERO),
            send(3, forward(1, "m1")),
            send(3, forward(1, "m2"))
        ]
    );
    f.tell(1, "m3");
    assert_eq!(f.take(), [send(3, forward(1, "m3"))]);
}

/// The wait for a home runs from the first request, through the retry tick's repeats, to the
/// answer; a home the region did not ask for (a new coordinator's homes) is no answer.
#[test]
fn the_wait_for_a_home_runs_from_the_first_request_to_the_answer() {
    let mut f = Fixture::registered();
    f.tell(1, "m1");
    f.region.handle_timeout(at(2_000), &mut f.rng, &mut f.out);
    assert!(
        f.take()
            .contains(&send(1, Body::GetShardHome { shard: ShardId(1) })),
        "asked again"
    );
    let home = Body::ShardHome {
        shard: ShardId(1),
        region: m(3),
    };
    f.region.handle_message(at(2_250), m(1), home, &mut f.out);
    let effects = f.take();
    assert_eq!(
        effects[0],
        home_answered(1, 3, Duration::from_millis(2_250))
    );
    let homes = vec![RegionShards {
        region: m(3),
        shards: vec![ShardId(2)],
    }];
    f.recv(1, Body::ShardHomes { homes });
    assert_eq!(f.take(), [], "nobody asked");
}

/// Found by the simulator (rolling-restart seed 799887892): homes are the word of the
/// coordinator that gave them. A new coordinator may be handing a shard off before this region
/// registers with it; routing on the old home then reaches the old owner after it stopped the
/// shard, and the messages come round behind newer ones. After a coordinator change the region
/// asks again.
#[test]
fn a_new_coordinator_replaces_the_old_ones_homes() {
    let mut f = Fixture::registered();
    let homes = vec![RegionShards {
        region: m(3),
        shards: vec![ShardId(1)],
    }];
    f.recv(1, Body::ShardHomes { homes });
    f.tell(1, "m1");
    assert_eq!(f.take(), [send(3, forward(1, "m1"))]);
    f.handle_view(at(0), &coordinator_moved());
    f.take();
    f.tell(1, "m2");
    let sent = f.take();
    assert!(
        !sent.contains(&send(3, forward(1, "m2"))),
        "routed on the old coordinator's home: {sent:?}"
    );
    assert_eq!(f.region.buffered(), 1);
}

#[test]
fn host_shard_starts_the_shard_and_delivers_its_buffer() {
    let mut f = Fixture::registered();
    f.tell(1, "m1");
    f.take();
    f.recv(
        1,
        Body::HostShard {
            shard: ShardId(1),
            epoch: Epoch(0),
        },
    );
    assert_eq!(
        f.take(),
        [
            home_answered(1, 2, Duration::ZERO),
            send(1, Body::ShardStarted { shard: ShardId(1) }),
            event(Event::ShardStarted {
                entity_type: ty(),
                shard: ShardId(1)
            }),
            Effect::Entity(EntityEffect::Start {
                entity_type: ty(),
                entity: entity(1),
                shard: ShardId(1),
                epoch: Epoch(0),
                lease_token: None,
            }),
            Effect::Entity(EntityEffect::Deliver {
                entity_type: ty(),
                entity: entity(1),
                payload: Payload::from(&b"m1"[..])
            }),
        ]
    );
}

#[test]
fn begin_handoff_is_acknowledged_directly_by_the_owner() {
    let mut f = Fixture::registered();
    f.recv(
        1,
        Body::BeginHandOff {
            shard: ShardId(1),
            owner: m(2),
            round: HandoffRound(7),
        },
    );
    assert_eq!(
        f.take(),
        [send(
            1,
            Body::BeginHandOffAck {
                shard: ShardId(1),
                region: m(2),
                round: HandoffRound(7),
            }
        )]
    );
}

#[test]
fn begin_handoff_is_acknowledged_through_the_owner() {
    let mut f = Fixture::registered();
    f.recv(
        1,
        Body::ShardHome {
            shard: ShardId(1),
            region: m(3),
        },
    );
    f.recv(
        1,
        Body::BeginHandOff {
            shard: ShardId(1),
            owner: m(3),
            round: HandoffRound(7),
        },
    );
    assert_eq!(
        f.take(),
        [send(
            3,
            Body::RelayHandOffAck {
                shard: ShardId(1),
                coordinator: m(1),
                round: HandoffRound(7),
            }
        )]
    );
    // The home is forgotten: new messages buffer and wait for the new home.
    f.tell(1, "m1");
    assert_eq!(
        f.take(),
        [send(1, Body::GetShardHome { shard: ShardId(1) })]
    );
}

#[test]
fn a_relayed_ack_goes_to_the_named_coordinator() {
    let mut f = Fixture::registered();
    f.recv(
        3,
        Body::RelayHandOffAck {
            shard: ShardId(1),
            coordinator: m(1),
            round: HandoffRound(7),
        },
    );
    assert_eq!(
        f.take(),
        [send(
            1,
            Body::BeginHandOffAck {
                shard: ShardId(1),
                region: m(3),
                round: HandoffRound(7),
            }
        )]
    );
}

#[test]
fn handoff_of_a_shard_not_hosted_is_answered_at_once() {
    let mut f = Fixture::registered();
    f.recv(1, Body::HandOff { shard: ShardId(1) });
    assert_eq!(
        f.take(),
        [send(1, Body::ShardStopped { shard: ShardId(1) })]
    );
}

#[test]
fn coordinator_messages_from_another_member_are_fenced() {
    let mut f = Fixture::registered();
    assert_eq!(
        f.recv(
            3,
            Body::HostShard {
                shard: ShardId(1),
                epoch: Epoch(0)
            }
        ),
        Handled::Fenced
    );
    assert_eq!(
        f.recv(3, Body::HandOff { shard: ShardId(1) }),
        Handled::Fenced
    );
    assert_eq!(f.take(), []);
}

#[test]
fn a_conflicting_home_for_a_hosted_shard_is_rejected() {
    let mut f = Fixture::registered();
    f.recv(
        1,
        Body::HostShard {
            shard: ShardId(1),
            epoch: Epoch(0),
        },
    );
    f.take();
    assert_eq!(
        f.recv(
            1,
            Body::ShardHome {
                shard: ShardId(1),
                region: m(3)
            }
        ),
        Handled::Rejected
    );
    assert_eq!(f.take(), []);
    f.tell(1, "still here");
    assert_eq!(f.take().len(), 2, "start + deliver locally");
}

#[test]
fn host_shard_while_the_old_instance_stops_waits_for_the_stop() {
    let mut f = Fixture::registered();
    f.recv(
        1,
        Body::HostShard {
            shard: ShardId(1),
            epoch: Epoch(0),
        },
    );
    f.tell(1, "m1");
    f.take();
    f.recv(1, Body::HandOff { shard: ShardId(1) });
    assert_eq!(
        f.take(),
        [Effect::Entity(EntityEffect::Stop {
            entity_type: ty(),
            entity: entity(1),
            reason: StopReason::HandOff
        })]
    );
    f.recv(
        1,
        Body::HostShard {
            shard: ShardId(1),
            epoch: Epoch(0),
        },
    );
    assert_eq!(f.take(), []);
    f.region
        .handle_entity_stopped(at(0), &entity(1), &mut f.out);
    assert_eq!(
        f.take(),
        [
            event(Event::ShardStopped {
                entity_type: ty(),
                shard: ShardId(1)
            }),
            send(1, Body::ShardStopped { shard: ShardId(1) }),
            send(1, Body::ShardStarted { shard: ShardId(1) }),
            event(Event::ShardStarted {
                entity_type: ty(),
                shard: ShardId(1)
            }),
        ]
    );
}

#[test]
fn a_downed_member_stops_everything_and_dead_letters_its_buffers() {
    let mut f = Fixture::hosting_one_with_a_letter_waiting();
    f.take();
    f.handle_view(at(0), &view(true));
    let dead = |s, payload: &str| {
        event(Event::DeadLetter {
            entity_type: ty(),
            entity: entity(s),
            payload: Some(Payload::from(payload.as_bytes())),
            reason: DeadLetterReason::RegionStopped,
        })
    };
    assert_eq!(
        f.take(),
        [
            Effect::Entity(EntityEffect::Stop {
                entity_type: ty(),
                entity: entity(1),
                reason: StopReason::Forced
            }),
            dead(2, "waiting"),
            event(Event::RegionStopped { entity_type: ty() }),
        ]
    );
    f.tell(3, "late");
    assert_eq!(f.take(), [dead(3, "late")]);
}

#[test]
fn graceful_shutdown_of_an_empty_region_stops_it_and_it_becomes_a_proxy() {
    let mut f = Fixture::registered();
    f.region.handle_graceful_shutdown(&mut f.out);
    assert_eq!(
        f.take(),
        [
            send(1, Body::GracefulShutdownReq),
            send(1, Body::RegionStopped),
            event(Event::RegionStopped { entity_type: ty() }),
        ]
    );
    f.region.handle_timeout(at(1), &mut f.rng, &mut f.out);
    assert_eq!(f.take(), [send(1, Body::RegisterProxy)]);
}

/// Found by the simulator (swarm seeds 99003289, 99006094): the last members of a cluster left
/// together, and the one left alone while leaving had no coordinator to hand its shards to (a
/// coordinator runs on an Up member): it stayed Leaving for good. With nobody left that is, or
/// may become, Up and runs the type, the region stops its shards itself and dead-letters what
/// waits for a home; another member that is still Up (or Joining) is waited for.
#[test]
fn a_region_shutting_down_with_nobody_to_take_over_stops_its_shards_itself() {
    let mut f = Fixture::hosting_one_with_a_letter_waiting();
    f.region.handle_graceful_shutdown(&mut f.out);
    f.take();
    let leaving = |n| {
        let mut member = Member::up(m(n), n, &[]);
        member.status = MemberStatus::Leaving;
        member
    };
    // Member 3 runs the type and is Joining: it may take over once Up.
    let mut joining = Member::up(m(3), 3, &[]);
    joining.status = MemberStatus::Joining;
    f.handle_view(at(1), &MembershipView::new(vec![leaving(2), joining]));
    assert_eq!(f.take(), [], "a member that may become Up is waited for");
    // Only members of another type, or leaving, are left.
    let other_type = Member::up(m(4), 4, &[]).hosting(&[EntityType::new("other")]);
    let alone = MembershipView::new(vec![leaving(2), leaving(3), other_type]);
    f.handle_view(at(2), &alone);
    let dead = event(Event::DeadLetter {
        entity_type: ty(),
        entity: entity(2),
        payload: Some(Payload::from("waiting".as_bytes())),
        reason: DeadLetterReason::RegionStopped,
    });
    let stop = Effect::Entity(EntityEffect::Stop {
        entity_type: ty(),
        entity: entity(1),
        reason: StopReason::HandOff,
    });
    assert_eq!(f.take(), [stop, dead]);
    f.region
        .handle_entity_stopped(at(3), &entity(1), &mut f.out);
    assert_eq!(
        f.take(),
        [
            event(Event::ShardStopped {
                entity_type: ty(),
                shard: ShardId(1)
            }),
            event(Event::RegionStopped { entity_type: ty() }),
        ]
    );
    assert!(f.region.is_stopped());
}

/// Found by the simulator (mass-shutdown seeds 100869, 100089): a region that stopped
/// gracefully routes as a proxy until its member is removed, so what it forwarded last may
/// still be on its way then. When it is removed it tells every other member hosting the type
/// (not members that host other types only) that it forwards nothing more; each relays that to
/// the coordinator behind those forwards. A region that never stopped gracefully (downed)
/// says nothing: the coordinator counts it as having acknowledged.
#[test]
fn a_region_that_exits_after_stopping_gracefully_announces_it_through_the_owners() {
    for graceful in [true, false] {
        let mut f = Fixture::registered();
        if graceful {
            f.region.handle_graceful_shutdown(&mut f.out);
        }
        f.take();
        let other_type = Member::up(m(4), 4, &[]).hosting(&[EntityType::new("other")]);
        let without_me = MembershipView::new(vec![
            Member::up(m(1), 1, &[]),
            Member::up(m(3), 3, &[]),
            other_type,
        ]);
        f.handle_view(at(1), &without_me);
        let relay = Body::RelayExit { coordinator: m(1) };
        if graceful {
            assert_eq!(f.take(), [send(1, relay.clone()), send(3, relay)]);
        } else {
            let stopped = event(Event::RegionStopped { entity_type: ty() });
            assert_eq!(f.take(), [stopped]);
        }
    }
    let mut owner = Fixture::registered();
    let relay = Body::RelayExit { coordinator: m(1) };
    assert_eq!(owner.recv(3, relay), Handled::Accepted);
    let exited = Body::RegionExited { region: m(3) };
    assert_eq!(owner.take(), [send(1, exited)]);
}

#[test]
fn a_proxy_never_hosts() {
    let mut f = Fixture::new(true);
    f.handle_view(at(0), &view(false));
    assert_eq!(f.take(), [send(1, Body::RegisterProxy)]);
    f.recv(1, Body::RegisterAck);
    f.take();
    assert_eq!(
        f.recv(
            1,
            Body::HostShard {
                shard: ShardId(1),
                epoch: Epoch(0)
            }
        ),
        Handled::Rejected
    );
    assert_eq!(f.take(), []);
}

#[test]
fn the_retry_tick_asks_again_for_buffered_shards() {
    let mut f = Fixture::registered();
    f.tell(1, "m1");
    f.take();
    f.region.handle_timeout(at(2_000), &mut f.rng, &mut f.out);
    assert_eq!(
        f.take(),
        [send(1, Body::GetShardHome { shard: ShardId(1) })]
    );
    assert_eq!(f.region.poll_timeout(), Some(at(4_000)));
}

/// A registered region whose shard-home requests go unanswered warns from the fifth round on,
/// every retry interval, and stops once a home arrives.
#[test]
fn unanswered_shard_home_requests_are_reported_from_the_fifth_round() {
    let mut f = Fixture::registered();
    f.tell(1, "m1");
    f.tell(1, "m2");
    f.take();
    let warning = |attempts| {
        event(Event::CoordinatorUnanswered {
            entity_type: ty(),
            coordinator: Some(m(1)),
            registered: true,
            attempts,
            buffered: 2,
        })
    };
    let ask = send(1, Body::GetShardHome { shard: ShardId(1) });
    for round in 1..=6 {
        f.region
            .handle_timeout(at(2_000 * round), &mut f.rng, &mut f.out);
        let attempts = u32::try_from(round).expect("a few rounds");
        let expected = match attempts {
            1..=4 => vec![ask.clone()],
            _ => vec![ask.clone(), warning(attempts)],
        };
        assert_eq!(f.take(), expected, "round {round}");
    }
    f.recv(
        1,
        Body::ShardHome {
            shard: ShardId(1),
            region: m(3),
        },
    );
    f.take();
    f.region.handle_timeout(at(14_000), &mut f.rng, &mut f.out);
    assert_eq!(f.take(), [], "answered: nothing to ask, nothing to report");
}

/// Found by the simulator (seeds 2026, 1153): a home on a member outside the region's view (a
/// crashed incarnation the coordinator had not noticed) was cached and messages were lost.
#[test]
fn a_home_on_a_member_outside_the_view_is_not_cached() {
    let mut f = Fixture::registered();
    f.tell(1, "m1");
    f.take();
    assert_eq!(
        f.recv(
            1,
            Body::ShardHome {
                shard: ShardId(1),
                region: MemberId::new(3, 0)
            }
        ),
        Handled::Rejected
    );
    assert_eq!(f.take(), [], "still buffered");
    f.region.handle_timeout(at(2_000), &mut f.rng, &mut f.out);
    assert_eq!(
        f.take(),
        [send(1, Body::GetShardHome { shard: ShardId(1) })],
        "asked again"
    );
}

/// Found in review: a hosted shard whose `ShardStarted` was lost is acknowledged again when the
/// coordinator resends `HostShard`, even while the region shuts down.
#[test]
fn a_hosted_shard_is_acknowledged_again_while_shutting_down() {
    let mut f = Fixture::registered();
    f.recv(
        1,
        Body::HostShard {
            shard: ShardId(1),
            epoch: Epoch(0),
        },
    );
    f.region.handle_graceful_shutdown(&mut f.out);
    f.take();
    f.recv(
        1,
        Body::HostShard {
            shard: ShardId(1),
            epoch: Epoch(0),
        },
    );
    assert_eq!(
        f.take(),
        [send(1, Body::ShardStarted { shard: ShardId(1) })]
    );
    f.recv(
        1,
        Body::HostShard {
            shard: ShardId(2),
            epoch: Epoch(0),
        },
    );
    assert_eq!(f.take(), [send(1, Body::GracefulShutdownReq)]);
}

#[test]
fn the_buffer_budget_and_the_timers_are_checked_against_what_is_held() {
    let mut f = Fixture::registered();
    f.tell(1, "a");
    f.tell(1, "b");
    assert_eq!(f.region.buffered(), 2);
    assert_eq!(f.region.check_invariants(), Ok(()));
    // Budget taken for a letter nobody buffered.
    assert!(f.region.budget.try_take());
    let broken = f.region.check_invariants().expect_err("caught");
    assert!(
        broken.contains("holds 3 letters, the buffers 2"),
        "{broken}"
    );
    f.region.budget.release(1);
    // A timer for a shard the region does not host.
    f.region.timers.set(ShardId(3), Some(at(10)));
    let broken = f.region.check_invariants().expect_err("caught");
    assert!(
        broken.contains("s3 has a timer but is not hosted"),
        "{broken}"
    );
}

mod fenced;
