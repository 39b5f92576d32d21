//! Membership scenarios on nodes that manage membership themselves, over the scripted cluster's
//! network with a fixed latency: every status change each node observes is recorded and pinned
//! with insta (a three-node join, a graceful leave, a 2|3 partition).

use std::time::Duration;

use shoal_core::{
    Command, Config, Downing, EntityTypeConfig, Incarnation, Instant, MemberId, MembershipSettings,
    NodeId,
};
use sim::scripted::Cluster;

const LATENCY: Duration = Duration::from_millis(2);

/// A cluster whose messages take 2 ms.
fn cluster() -> Cluster {
    let mut c = Cluster::new();
    c.set_latency(LATENCY, LATENCY, 0);
    c
}

/// Starts node `n`, joining through `seeds`, with keep-majority downing (5 s stable-after) or
/// `downing`.
fn start(c: &mut Cluster, n: u64, seeds: &[u64], downing: Option<Downing>) {
    let mut s = MembershipSettings::new(seeds.iter().map(|n| NodeId(*n)));
    s.seed_node_timeout = Duration::from_secs(2);
    s.retry_join_after = Duration::from_secs(2);
    s.downing = downing.unwrap_or(Downing::KeepMajority {
        stable_after: Duration::from_secs(5),
    });
    let mut config =
        Config::new(NodeId(n), Incarnation(1)).with_entity_type(EntityTypeConfig::new("t"));
    config.membership = Some(s);
    c.start(config);
}

/// Sends `command` to node `n`, noted in the log.
fn command(c: &mut Cluster, n: u64, command: Command) {
    c.note(format!("{} n{n} {command:?}", c.now()));
    c.command(n, command);
}

/// Node `n` leaves, noted in the log.
fn leave(c: &mut Cluster, n: u64) {
    c.note(format!("{} n{n} leaves", c.now()));
    c.command(n, Command::Leave);
}

fn log_of(c: &Cluster) -> String {
    c.membership_log().join("\n")
}

#[test]
fn three_nodes_join_through_the_first_seed() {
    let mut c = cluster();
    for n in 1..=3 {
        start(&mut c, n, &[1, 2, 3], None);
    }
    c.at(10);
    insta::assert_snapshot!(log_of(&c));
    // Every member knows which entity types the others host (they joined saying so).
    let t = shoal_core::EntityType::new("t");
    let view = c.node(1).view().clone();
    assert_eq!(view.members().len(), 3);
    for m in view.members() {
        assert_eq!(
            m.hosts,
            Some(std::sync::Arc::new([t.clone()].into())),
            "{}",
            m.id
        );
    }
    assert_eq!(view.coordinator_of(&t, None), Some(MemberId::new(1, 1)));
}

#[test]
fn a_member_leaves_gracefully() {
    let mut c = cluster();
    for n in 1..=3 {
        start(&mut c, n, &[1, 2, 3], None);
    }
    c.at(10);
    c.clear_membership_log();
    leave(&mut c, 3);
    c.at(30);
    insta::assert_snapshot!(log_of(&c));
}

#[test]
fn a_two_three_partition_downs_the_minority() {
    let mut c = cluster();
    for n in 1..=5 {
        start(&mut c, n, &[1, 2, 3, 4, 5], None);
    }
    c.at(10);
    c.clear_membership_log();
    c.partition(&[4, 5]);
    c.at(40);
    let log = log_of(&c);
    assert!(log.contains("n4 left the cluster (downed)"), "{log}");
    assert!(log.contains("n5 left the cluster (downed)"), "{log}");
    insta::assert_snapshot!(log);
}

/// Akka's `Cluster.leave(address)`: a member asks another to leave; that one hands off and
/// leaves as if it had decided to.
#[test]
fn a_member_makes_another_leave() {
    let mut c = cluster();
    for n in 1..=3 {
        start(&mut c, n, &[1, 2, 3], None);
    }
    c.at(10);
    c.clear_membership_log();
    command(
        &mut c,
        1,
        Command::LeaveMember {
            member: MemberId::new(3, 1),
        },
    );
    c.at(30);
    let log = log_of(&c);
    assert!(log.contains("n3 sees n3#1: Up -> Leaving"), "{log}");
    assert!(log.contains("n3 left the cluster (removed)"), "{log}");
    assert!(log.contains("n1 sees n3#1: removed"), "{log}");
}

/// Akka's `Cluster.down(address)`: with automatic downing off, a partition downs nobody; an
/// operator's `Down` removes the unreachable member, which downs itself once it hears it.
#[test]
fn an_operator_downs_a_member_when_downing_is_off() {
    let mut c = cluster();
    let off = Some(Downing::Off);
    for n in 1..=3 {
        start(&mut c, n, &[1, 2, 3], off);
    }
    c.at(10);
    c.clear_membership_log();
    c.partition(&[3]);
    c.at(40);
    assert!(
        !c.membership_log().iter().any(|l| l.contains("Down")),
        "nobody downs anyone: {:?}",
        c.membership_log()
    );
    command(
        &mut c,
        1,
        Command::Down {
            member: MemberId::new(3, 1),
        },
    );
    c.at(50);
    let log = log_of(&c);
    assert!(
        log.contains("n2 sees n3#1: Up (unreachable) -> Down (unreachable)"),
        "{log}"
    );
    assert!(log.contains("n1 sees n3#1: removed"), "{log}");
    c.heal();
    c.at(70);
    let log = log_of(&c);
    assert!(log.contains("n3 left the cluster (downed)"), "{log}");
}

/// An Exiting member cut off before it hears of its removal gives up waiting after a few gossip
/// rounds. Its roles must see it removed then (their region stops routing and announces its
/// exit): before, its view still listed it Exiting until the process ended (mass-shutdown seed
/// 111339, where a handoff waited for that region).
#[test]
fn an_exiting_member_that_never_hears_of_its_removal_sees_itself_removed() {
    let mut c = cluster();
    // Cut off, it would otherwise down itself (keep-majority) before it gives up waiting.
    let off = Some(Downing::Off);
    for n in 1..=3 {
        start(&mut c, n, &[1, 2, 3], off);
    }
    c.at(10);
    leave(&mut c, 3);
    let me = MemberId::new(3, 1);
    let exiting = |c: &Cluster| {
        let view = c.node(3).view();
        view.member(me)
            .is_some_and(|m| m.status == shoal_core::MemberStatus::Exiting)
    };
    for ms in 0..10_000 {
        if exiting(&c) {
            break;
        }
        c.run_until(Instant::ZERO + Duration::from_secs(10) + Duration::from_millis(ms));
    }
    assert!(exiting(&c), "n3 became Exiting");
    for other in [1, 2] {
        c.cut_link(other, 3);
    }
    c.clear_membership_log();
    c.at(40);
    let log = log_of(&c);
    assert!(log.contains("n3 sees n3#1: removed"), "{log}");
    assert!(log.contains("n3 left the cluster (removed)"), "{log}");
    assert!(c.node(3).view().member(me).is_none());
}
