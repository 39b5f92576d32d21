//! Role tests for the membership state machine: one call, the messages it sends.

use std::time::Duration;

use super::*;
use crate::effect::{Effect, Transmit};
use crate::id::SeedNode;
use crate::id::{Address, AppVersion};
use crate::message::{Envelope, Message};

fn m(n: u64) -> MemberId {
    MemberId::new(n, 1)
}

fn at(ms: u64) -> Instant {
    Instant::ZERO + Duration::from_millis(ms)
}

/// A joining member with no roles, no hosted types and the default version.
fn joiner(id: MemberId) -> GossipMember {
    GossipMember::joining(id, BTreeSet::new(), AppVersion::default(), BTreeSet::new())
}

fn machine(n: u64, seeds: &[u64]) -> Membership {
    let seeds = seeds.iter().map(|s| NodeId(*s));
    machine_at(
        n,
        Address::of_node(NodeId(n)),
        MembershipSettings::new(seeds),
    )
}

fn machine_at(n: u64, address: Address, settings: MembershipSettings) -> Membership {
    Membership::new(m(n), joiner(m(n)).at(address), settings, at(0))
}

/// The cluster messages a call sent, as (receiver, message).
fn sent(out: &mut Effects) -> Vec<(MemberId, ClusterMessage)> {
    let sent = sent_at(out).into_iter();
    sent.map(|(to, _, message)| (to, message)).collect()
}

/// The cluster messages a call sent, as (receiver, the address it was sent to, message).
fn sent_at(out: &mut Effects) -> Vec<(MemberId, Option<Address>, ClusterMessage)> {
    let (effects, _) = out.drain();
    effects
        .into_iter()
        .filter_map(|e| match e {
            Effect::Send(Transmit { address, envelope }) => match *envelope {
                Envelope {
                    to,
                    message: Message::Cluster(c),
                    ..
                } => Some((to, address, c)),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

#[test]
fn a_lone_first_seed_forms_a_cluster_and_becomes_up() {
    let (mut a, mut out, mut rng) = (machine(1, &[1]), Effects::new(m(1)), Rng::new(1));
    assert_eq!(a.poll_timeout(), Some(at(0)));
    a.handle_timeout(at(0), &mut rng, &mut out);
    assert_eq!(a.phase(), Phase::Member);
    assert_eq!(a.status(), Some(MemberStatus::Up));
    let view = a
        .take_view(&MembershipView::default())
        .expect("a first view");
    assert_eq!(view.oldest_up(None), Some(m(1)));
    a.dirty = true;
    assert!(a.take_view(&view).is_none(), "unchanged");
}

#[test]
fn a_node_joins_through_a_seed() {
    // Real-looking addresses, so that none can be confused with a node id's default.
    let (seed_at, joiner_at) = (Address::new("10.0.0.1:7355"), Address::new("10.0.0.2:7355"));
    let seeds = || MembershipSettings::new([SeedNode::new(NodeId(1), seed_at.clone())]);
    let (mut seed, mut so) = (machine_at(1, seed_at.clone(), seeds()), Effects::new(m(1)));
    let (mut joiner, mut jo) = (
        machine_at(2, joiner_at.clone(), seeds()),
        Effects::new(m(2)),
    );
    let mut rng = Rng::new(7);
    seed.handle_timeout(at(0), &mut rng, &mut so);
    sent(&mut so);

    // Nobody knows the joiner yet: each message names the address it goes to.
    joiner.handle_timeout(at(0), &mut rng, &mut jo);
    let to_seed = anyone_at(NodeId(1));
    let init = ClusterMessage::InitJoin {
        address: joiner_at.clone(),
    };
    let seed_addr = Some(seed_at.clone());
    assert_eq!(sent_at(&mut jo), [(to_seed, seed_addr, init.clone())]);
    seed.handle_message(at(1), m(2), init, &mut rng, &mut so);
    let ack = ClusterMessage::InitJoinAck;
    assert_eq!(sent_at(&mut so), [(m(2), Some(joiner_at.clone()), ack)]);
    joiner.handle_message(at(2), m(1), ClusterMessage::InitJoinAck, &mut rng, &mut jo);
    let [(to, join)] = sent(&mut jo).try_into().expect("one Join");
    assert_eq!(to, m(1));
    seed.handle_message(at(3), m(2), join, &mut rng, &mut so);
    let welcome = sent_at(&mut so)
        .into_iter()
        .find_map(|(to, address, msg)| {
            matches!(msg, ClusterMessage::Welcome(_)).then_some((to, address, msg))
        })
        .expect("a Welcome");
    assert_eq!((welcome.0, welcome.1), (m(2), Some(joiner_at.clone())));
    joiner.handle_message(at(4), m(1), welcome.2, &mut rng, &mut jo);
    assert_eq!(joiner.phase(), Phase::Member);
    // Joining members need not have seen a state for it to converge: the leader moved the
    // joiner Up as it added it, and the welcome says so.
    assert_eq!(joiner.status(), Some(MemberStatus::Up));
    for round in 0..4 {
        for (to, msg) in sent(&mut jo) {
            if to == m(1) {
                seed.handle_message(at(10 + round), m(2), msg, &mut rng, &mut so);
            }
        }
        for (to, msg) in sent(&mut so) {
            if to == m(2) {
                joiner.handle_message(at(10 + round), m(1), msg, &mut rng, &mut jo);
            }
        }
    }
    assert!(
        seed.gossip.seen().contains(&m(2)),
        "the seed learned the joiner saw it"
    );
    let view = joiner
        .take_view(&MembershipView::default())
        .expect("a view");
    assert_eq!(view.members().len(), 2);
    assert_eq!(view.oldest_up(None), Some(m(1)), "the seed is older");
    let address_of = |id| view.member(id).and_then(|member| member.address.clone());
    assert_eq!(address_of(m(1)), Some(seed_at), "gossip carries addresses");
    assert_eq!(address_of(m(2)), Some(joiner_at));
}

#[test]
fn a_non_first_seed_keeps_asking_and_never_forms_a_cluster_alone() {
    let (mut b, mut out, mut rng) = (machine(2, &[1, 2]), Effects::new(m(2)), Rng::new(1));
    b.handle_timeout(at(0), &mut rng, &mut out);
    assert_eq!(
        sent(&mut out),
        [(
            anyone_at(NodeId(1)),
            ClusterMessage::InitJoin {
                address: Address::of_node(NodeId(2))
            }
        )]
    );
    b.handle_timeout(at(60_000), &mut rng, &mut out);
    assert_eq!(b.phase(), Phase::Joining);
    assert_eq!(
        sent(&mut out).len(),
        1,
        "asked again after retry_join_after"
    );
}

#[test]
fn a_restarted_first_seed_never_forms_a_second_cluster() {
    let mut settings = MembershipSettings::new(vec![NodeId(1), NodeId(2)]);
    settings.may_form_cluster = false;
    let me = MemberId::new(1, 2);
    let mut a = Membership::new(me, joiner(me), settings, at(0));
    let (mut out, mut rng) = (Effects::new(me), Rng::new(1));
    for s in 0..60 {
        a.handle_timeout(at(s * 1000), &mut rng, &mut out);
    }
    assert_eq!(a.phase(), Phase::Joining, "it keeps asking the other seeds");
}

/// Member 1 alone in its cluster, member 2 added as Joining (not acted on yet).
fn lone_member_with_joiner() -> (Membership, Effects, Rng) {
    let (mut a, mut out, mut rng) = (machine(1, &[1]), Effects::new(m(1)), Rng::new(1));
    a.handle_timeout(at(0), &mut rng, &mut out);
    a.gossip.add_joining(m(1), joiner(m(2)));
    (a, out, rng)
}

#[test]
fn heartbeats_feed_detectors_and_silence_makes_a_member_unreachable() {
    let (mut a, mut out, mut rng) = lone_member_with_joiner();
    a.gossip.mark_seen(m(2));
    a.act(at(0), true, &mut rng, &mut out);
    sent(&mut out);
    // Member 2 answers every heartbeat for 5 s, then goes silent.
    for s in 1..=5 {
        a.handle_timeout(at(s * 1000), &mut rng, &mut out);
        assert!(sent(&mut out).contains(&(m(2), ClusterMessage::Heartbeat { sequence: s })));
        a.handle_message(
            at(s * 1000 + 5),
            m(2),
            ClusterMessage::HeartbeatRsp { sequence: s },
            &mut rng,
            &mut out,
        );
    }
    let mut unreachable_at = None;
    for s in 6..=20 {
        a.handle_timeout(at(s * 1000), &mut rng, &mut out);
        if unreachable_at.is_none() && a.gossip.observes_unreachable(m(1), m(2)) {
            unreachable_at = Some(s);
        }
    }
    let secs = unreachable_at.expect("silence is noticed");
    assert!((8..=12).contains(&secs), "noticed after {secs} s");
    let view = a.take_view(&MembershipView::default()).expect("changed");
    assert!(!view.member(m(2)).expect("still a member").reachable);
    // It answers again: reachable again.
    a.handle_message(
        at(21_000),
        m(2),
        ClusterMessage::HeartbeatRsp { sequence: 99 },
        &mut rng,
        &mut out,
    );
    assert!(!a.gossip.observes_unreachable(m(1), m(2)));
}

/// Found by the simulator (flapping-links seed 10800001737): a majority that had downed and
/// removed a member kept answering its heartbeats, so that member counted its side as whole
/// again and never downed itself. A Down member's heartbeat is answered with the state that
/// says so.
#[test]
fn a_down_member_s_heartbeat_is_answered_with_the_state() {
    let (mut a, mut out, mut rng) = lone_member_with_joiner();
    a.act(at(0), true, &mut rng, &mut out);
    sent(&mut out);
    let heartbeat = ClusterMessage::Heartbeat { sequence: 7 };
    a.handle_message(at(10), m(2), heartbeat.clone(), &mut rng, &mut out);
    let answer = (m(2), ClusterMessage::HeartbeatRsp { sequence: 7 });
    assert_eq!(sent(&mut out), [answer]);
    assert!(a.gossip.set_status(m(1), m(2), MemberStatus::Down));
    a.handle_message(at(20), m(2), heartbeat, &mut rng, &mut out);
    match &sent(&mut out)[..] {
        [(to, ClusterMessage::Gossip(state))] if *to == m(2) => {
            let member = state.member(m(2)).expect("a member still");
            assert_eq!(member.status, MemberStatus::Down, "it learns it is Down");
        }
        other => panic!("a Down member gets our state, not {other:?}"),
    }
}

/// Found by the simulator (coordinator-crash seed 13): a crashed member whose new incarnation
/// joined at once was marked Down before anyone observed it unreachable, and nobody monitored
/// Down members, so it was never removed and its shards never moved. Down members are
/// monitored until they are unreachable.
#[test]
fn a_down_member_is_monitored_until_unreachable_and_then_removed() {
    let (mut a, mut out, mut rng) = lone_member_with_joiner();
    a.gossip.mark_seen(m(2));
    a.act(at(0), true, &mut rng, &mut out);
    a.gossip.set_status(m(1), m(2), MemberStatus::Down);
    sent(&mut out);
    let mut heartbeats = 0;
    for s in 1..=20 {
        a.handle_timeout(at(s * 1000), &mut rng, &mut out);
        heartbeats += sent(&mut out)
            .iter()
            .filter(|(to, msg)| *to == m(2) && matches!(msg, ClusterMessage::Heartbeat { .. }))
            .count();
    }
    assert!(heartbeats > 0, "the Down member is still monitored");
    assert!(a.gossip.is_removed(m(2)), "removed once unreachable");
}

/// Found by the simulator (flapping-links seed 200250): a decision taken while a monitored
/// member was going quiet (a partition still being detected) rested on a stale picture of the
/// member's own side. Downing waits until the member answers or is declared unreachable.
#[test]
fn downing_waits_while_a_monitored_member_goes_quiet() {
    let mut settings = MembershipSettings::new(vec![NodeId(1)]);
    settings.downing = crate::membership::Downing::KeepMajority {
        stable_after: Duration::from_secs(5),
    };
    let mut a = Membership::new(m(1), joiner(m(1)), settings, at(0));
    let (mut out, mut rng) = (Effects::new(m(1)), Rng::new(1));
    a.handle_timeout(at(0), &mut rng, &mut out);
    for n in [2, 3] {
        a.gossip.add_joining(m(1), joiner(m(n)));
        a.gossip.mark_seen(m(n));
    }
    a.act(at(0), true, &mut rng, &mut out);
    // Both answer heartbeats for a while; then member 3 is observed unreachable by member 1
    // (a decision becomes due 5 s later), while member 2 starts to go quiet.
    for s in 1..=5 {
        a.handle_timeout(at(s * 1000), &mut rng, &mut out);
        for n in [2, 3] {
            let rsp = ClusterMessage::HeartbeatRsp { sequence: s };
            a.handle_message(at(s * 1000 + 5), m(n), rsp, &mut rng, &mut out);
        }
    }
    a.gossip.observe(m(1), m(3), false);
    a.act(at(5_010), true, &mut rng, &mut out);
    let due = a.downer.deadline().expect("a decision is due");
    assert_eq!(due, at(10_010));
    // Member 2 answers until 8 s, then nothing: at 10 s it is 2 s late (in doubt), and the
    // decision that would count it on member 1's side is held back.
    for s in 6..=8 {
        a.handle_timeout(at(s * 1000), &mut rng, &mut out);
        let rsp = ClusterMessage::HeartbeatRsp { sequence: s };
        a.handle_message(at(s * 1000 + 5), m(2), rsp, &mut rng, &mut out);
    }
    a.handle_timeout(at(12_500), &mut rng, &mut out);
    assert_eq!(a.status(), Some(MemberStatus::Up));
    assert_eq!(
        a.gossip.member(m(3)).map(|m| m.status),
        Some(MemberStatus::Up),
        "not downed while member 2 is in doubt"
    );
    assert!(
        a.downer.deadline().is_some_and(|at| at > self::at(12_500)),
        "held back, not dropped"
    );
}

/// Found by the simulator's check of runs without survivors (coordinator-crash seed 7003827):
/// a decision held back because a heartbeat answer was late was looked at again a heartbeat
/// later, just before the next round's answers, where one more late answer held it back again;
/// round after round it slipped past the unstable bound and the whole majority downed itself
/// over one crashed member. It is looked at again a quarter heartbeat later, and taken once
/// the late answer is in.
#[test]
fn a_decision_held_back_by_a_late_answer_is_taken_once_the_answer_is_in() {
    let mut settings = MembershipSettings::new(vec![NodeId(1)]);
    settings.downing = crate::membership::Downing::KeepMajority {
        stable_after: Duration::from_secs(5),
    };
    let mut a = Membership::new(m(1), joiner(m(1)), settings, at(0));
    let (mut out, mut rng) = (Effects::new(m(1)), Rng::new(1));
    a.handle_timeout(at(0), &mut rng, &mut out);
    for n in [2, 3] {
        a.gossip.add_joining(m(1), joiner(m(n)));
        a.gossip.mark_seen(m(n));
    }
    a.act(at(0), true, &mut rng, &mut out);
    for s in 1..=5 {
        a.handle_timeout(at(s * 1000), &mut rng, &mut out);
        for n in [2, 3] {
            let rsp = ClusterMessage::HeartbeatRsp { sequence: s };
            a.handle_message(at(s * 1000 + 5), m(n), rsp, &mut rng, &mut out);
        }
    }
    a.gossip.observe(m(1), m(3), false);
    a.act(at(5_010), true, &mut rng, &mut out);
    assert_eq!(a.downer.deadline(), Some(at(10_010)));
    // Member 2 answers until 8 s; its answer to the 9 s round is late, in at 10.4 s.
    for s in 6..=10 {
        a.handle_timeout(at(s * 1000), &mut rng, &mut out);
        if s <= 8 {
            let rsp = ClusterMessage::HeartbeatRsp { sequence: s };
            a.handle_message(at(s * 1000 + 5), m(2), rsp, &mut rng, &mut out);
        }
    }
    let down = |a: &Membership| a.gossip.member(m(3)).map(|m| m.status) == Some(MemberStatus::Down);
    a.handle_timeout(at(10_010), &mut rng, &mut out);
    assert!(!down(&a), "member 2 is 2 s quiet: in doubt");
    assert_eq!(
        a.downer.deadline(),
        Some(at(10_260)),
        "looked at again soon"
    );
    a.handle_timeout(at(10_260), &mut rng, &mut out);
    assert!(!down(&a), "still in doubt");
    let late = ClusterMessage::HeartbeatRsp { sequence: 9 };
    a.handle_message(at(10_400), m(2), late, &mut rng, &mut out);
    a.handle_timeout(at(10_510), &mut rng, &mut out);
    assert!(down(&a), "taken once the late answer is in");
}

/// Found by the simulator's check of runs without survivors (swarm seed 9000090): a member that
/// left gracefully went quiet as it exited while a decision about a partitioned member was
/// due; the decision waited for it, the clock restarted once it was unreachable, and the
/// unstable bound downed the whole majority. An Exiting member going quiet is stopping, not
/// being cut off: no doubt.
#[test]
fn an_exiting_member_going_quiet_does_not_hold_a_decision_back() {
    let mut settings = MembershipSettings::new(vec![NodeId(1)]);
    settings.downing = crate::membership::Downing::KeepMajority {
        stable_after: Duration::from_secs(5),
    };
    let mut a = Membership::new(m(1), joiner(m(1)), settings, at(0));
    let (mut out, mut rng) = (Effects::new(m(1)), Rng::new(1));
    a.handle_timeout(at(0), &mut rng, &mut out);
    for n in 2..=4 {
        a.gossip.add_joining(m(1), joiner(m(n)));
        a.gossip.mark_seen(m(n));
    }
    a.act(at(0), true, &mut rng, &mut out);
    for s in 1..=5 {
        a.handle_timeout(at(s * 1000), &mut rng, &mut out);
        for n in 2..=4 {
            let rsp = ClusterMessage::HeartbeatRsp { sequence: s };
            a.handle_message(at(s * 1000 + 5), m(n), rsp, &mut rng, &mut out);
        }
    }
    a.gossip.set_status(m(1), m(2), MemberStatus::Exiting);
    a.gossip.observe(m(1), m(4), false);
    a.act(at(5_010), true, &mut rng, &mut out);
    assert_eq!(a.downer.deadline(), Some(at(10_010)));
    // Member 2 exits: it answers until 8 s, then nothing; at 10 s it is 2 s quiet, not yet
    // unreachable. Member 3 answers throughout.
    for s in 6..=10 {
        a.handle_timeout(at(s * 1000), &mut rng, &mut out);
        for n in [2, 3].into_iter().filter(|n| *n == 3 || s <= 8) {
            let rsp = ClusterMessage::HeartbeatRsp { sequence: s };
            a.handle_message(at(s * 1000 + 5), m(n), rsp, &mut rng, &mut out);
        }
    }
    a.handle_timeout(at(10_010), &mut rng, &mut out);
    assert_eq!(
        a.gossip.member(m(4)).map(|m| m.status),
        Some(MemberStatus::Down),
        "decided on time: the exiting member's silence is no doubt"
    );
}

/// Found by the simulator (swarm seed 7302570): a member that downed itself stopped without
/// telling anyone, so the others saw a live-looking member go unreachable, moved it Up while
/// it was joining, and had to detect and down it again; a leader's decision waited for the next
/// gossip round while its side's members neared their instability bound. A downing decision is
/// gossiped at once to several members.
#[test]
fn a_downing_decision_is_spread_at_once() {
    let mut settings = MembershipSettings::new(vec![NodeId(1)]);
    settings.downing = crate::membership::Downing::KeepMajority {
        stable_after: Duration::from_secs(5),
    };
    let mut a = Membership::new(m(1), joiner(m(1)), settings, at(0));
    let (mut out, mut rng) = (Effects::new(m(1)), Rng::new(1));
    a.handle_timeout(at(0), &mut rng, &mut out);
    for n in 2..=7 {
        a.gossip.add_joining(m(1), joiner(m(n)));
        a.gossip.mark_seen(m(n));
    }
    a.act(at(0), true, &mut rng, &mut out);
    // Member 1 alone cannot reach 2, 3, 4 and 5: a minority, it downs itself after 5 s.
    for n in 2..=5 {
        a.gossip.observe(m(1), m(n), false);
    }
    a.act(at(10), true, &mut rng, &mut out);
    sent(&mut out);
    a.handle_timeout(at(5_010), &mut rng, &mut out);
    assert_eq!(a.phase(), Phase::Downed);
    let told: BTreeSet<MemberId> = sent(&mut out)
        .into_iter()
        .filter(|(_, msg)| matches!(msg, ClusterMessage::Gossip(g) if g.member(m(1)).is_some_and(|me| me.status == MemberStatus::Down)))
        .map(|(to, _)| to)
        .collect();
    assert_eq!(
        told,
        [m(6), m(7)].into(),
        "every member it still reaches hears that it is Down"
    );
}

/// Member 1 alone with joiners `2..=n` in its state (seen by 1 only).
fn first_seed_with_joiners(n: u64) -> (Membership, Effects, Rng) {
    let (mut a, mut out, mut rng) = (machine(1, &[1]), Effects::new(m(1)), Rng::new(1));
    a.handle_timeout(at(0), &mut rng, &mut out);
    for j in 2..=n {
        a.gossip.add_joining(m(1), joiner(m(j)));
    }
    sent(&mut out);
    (a, out, rng)
}

#[test]
fn a_state_learned_from_a_peer_is_talked_back_not_pushed_on() {
    let (a, _, mut rng) = first_seed_with_joiners(3);
    let (mut b, mut bo) = (machine(2, &[1]), Effects::new(m(2)));
    let state = ClusterMessage::Gossip(Box::new(a.gossip));
    b.handle_message(at(5), m(1), state, &mut rng, &mut bo);
    assert_eq!(b.phase(), Phase::Member, "the state lists member 2");
    // Akka's talkback: the sender learns that member 2 holds its state; member 3 hears of it
    // from the gossip rounds, not from a push at once.
    assert_eq!(sent(&mut bo), [(m(1), b.gossip_status(false))]);
    assert!(b.gossip.seen().contains(&m(2)));
}

#[test]
fn gossip_rounds_come_three_times_as_often_while_few_have_seen_the_state() {
    let (mut a, mut out, mut rng) = first_seed_with_joiners(4);
    let interval = a.settings.gossip_interval;
    let first = a.next_gossip;
    a.handle_timeout(first, &mut rng, &mut out);
    // Seen by one member of four: fewer than half.
    assert_eq!(a.next_gossip, first + interval / 3);
    a.gossip.mark_seen(m(2));
    a.handle_timeout(a.next_gossip, &mut rng, &mut out);
    let second = first + interval / 3;
    // Seen by two of four: half, no more speed-up.
    assert_eq!(a.next_gossip, second + interval);
}
