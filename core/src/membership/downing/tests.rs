//! Role tests for downing decisions.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::*;
use crate::id::AppVersion;
use crate::members::{GossipMember, MemberStatus};

/// How many members monitor each (the production default).
const RING: usize = 9;

fn m(n: u64) -> MemberId {
    MemberId::new(n, 1)
}

fn at(secs: u64) -> Instant {
    Instant::ZERO + Duration::from_secs(secs)
}

/// `n` Up members, as member `me` holds the state, with `unreachable` observed by `observer`.
fn cluster(n: u64, me: u64, observer: u64, unreachable: &[u64]) -> Gossip {
    let join = |i| {
        GossipMember::joining(
            m(i),
            BTreeSet::new(),
            AppVersion::default(),
            BTreeSet::new(),
        )
    };
    let mut g = Gossip::founding(join(1));
    for i in 2..=n {
        g.add_joining(m(1), join(i));
    }
    let all: Vec<MemberId> = (1..=n).map(m).collect();
    let mut seen = g.clone();
    for id in &all {
        seen.receive(*id, g.clone());
    }
    g = seen;
    assert!(g.leader_actions(m(1), 1, &BTreeMap::new()).is_some());
    for u in unreachable {
        g.observe(m(observer), m(*u), false);
    }
    let _ = me;
    g
}

fn keep_majority(stable_secs: u64) -> Downer {
    Downer::new(
        Downing::KeepMajority {
            stable_after: Duration::from_secs(stable_secs),
        },
        RING,
        at(0),
    )
}

/// No failure detector's record: confirmations keep the clock (see `Downer::observe`).
fn never_heard(_: MemberId) -> Option<Instant> {
    None
}

fn ids(ns: &[u64]) -> BTreeSet<MemberId> {
    ns.iter().map(|n| m(*n)).collect()
}

#[test]
fn the_majority_downs_the_minority_after_stable_after() {
    let g = cluster(5, 1, 1, &[4, 5]);
    let mut d = keep_majority(20);
    d.observe(at(1), m(1), &g, &never_heard);
    assert_eq!(d.deadline(), Some(at(21)));
    assert!(
        d.decide(at(20), m(1), &g).is_empty(),
        "not stable long enough"
    );
    assert_eq!(d.decide(at(21), m(1), &g), ids(&[4, 5]));
    let mut other = keep_majority(20);
    other.observe(at(1), m(2), &g, &never_heard);
    assert!(
        other.decide(at(21), m(2), &g).is_empty(),
        "only the leader acts"
    );
}

/// Found by the simulator: a member that does not lead kept a past deadline armed (a timer
/// busy loop). One decision per stable situation; a change re-arms.
#[test]
fn a_stable_situation_is_decided_once() {
    let g = cluster(5, 2, 1, &[4, 5]);
    let mut d = keep_majority(20);
    d.observe(at(0), m(2), &g, &never_heard);
    assert!(
        d.decide(at(20), m(2), &g).is_empty(),
        "member 2 does not lead"
    );
    assert_eq!(
        d.deadline(),
        Some(at(35)),
        "only the unstable bound remains (7/4 of stable-after)"
    );
    d.observe(at(30), m(2), &cluster(5, 2, 1, &[5]), &never_heard);
    assert_eq!(
        d.deadline(),
        Some(at(35)),
        "a change re-arms, the bound stays"
    );
    d.observe(at(31), m(2), &cluster(5, 2, 1, &[]), &never_heard);
    assert_eq!(d.deadline(), None, "nobody unreachable: nothing to decide");
}

/// Found by the simulator (flapping-links seed 300237): members joining a minority side during
/// a partition kept resetting its stability clock, so it downed itself only after the majority
/// had moved its shards (double activation). Joins no longer reset the clock, and a member
/// unable to decide for 7/4 of stable-after downs itself.
#[test]
fn joins_do_not_delay_a_decision_and_instability_is_bounded() {
    let mut g = cluster(4, 3, 3, &[1, 2]);
    let mut d = keep_majority(10);
    d.observe(at(0), m(3), &g, &never_heard);
    g.add_joining(
        m(3),
        GossipMember::joining(
            m(9),
            BTreeSet::new(),
            AppVersion::default(),
            BTreeSet::new(),
        ),
    );
    d.observe(at(5), m(3), &g, &never_heard);
    assert_eq!(
        d.decide(at(10), m(3), &g),
        ids(&[3]),
        "decided on time, despite the join"
    );
    // A side whose view keeps changing downs itself at 7/4 of stable-after.
    let mut d = keep_majority(10);
    d.observe(at(0), m(1), &cluster(5, 1, 1, &[5]), &never_heard);
    for t in [6, 12] {
        let flap = if t == 6 { vec![4, 5] } else { vec![5] };
        d.observe(at(t), m(1), &cluster(5, 1, 1, &flap), &never_heard);
    }
    assert!(d.decide(at(17), m(1), &cluster(5, 1, 1, &[5])).is_empty());
    assert_eq!(
        d.decide(at(18), m(1), &cluster(5, 1, 1, &[5])),
        ids(&[1]),
        "unstable too long"
    );
}

#[test]
fn the_minority_downs_itself() {
    // Member 4's view: 1, 2 and 3 unreachable.
    let g = cluster(5, 4, 4, &[1, 2, 3]);
    let mut d = keep_majority(20);
    d.observe(at(0), m(4), &g, &never_heard);
    assert_eq!(
        d.decide(at(20), m(4), &g),
        ids(&[4]),
        "each member downs itself"
    );
    // Member 5 decides for itself too, without waiting for member 4 (which stops).
    let mut d5 = keep_majority(20);
    d5.observe(at(0), m(5), &g, &never_heard);
    assert_eq!(d5.decide(at(20), m(5), &g), ids(&[5]));
}

#[test]
fn a_tie_goes_to_the_side_with_the_lowest_address() {
    let g = cluster(4, 1, 1, &[3, 4]);
    let mut d = keep_majority(5);
    d.observe(at(0), m(1), &g, &never_heard);
    assert_eq!(d.decide(at(5), m(1), &g), ids(&[3, 4]));
    let other = cluster(4, 3, 3, &[1, 2]);
    let mut d = keep_majority(5);
    d.observe(at(0), m(3), &other, &never_heard);
    assert_eq!(d.decide(at(5), m(3), &other), ids(&[3]), "downs itself");
}

#[test]
fn any_change_restarts_the_stability_clock() {
    let g = cluster(5, 1, 1, &[5]);
    let mut d = keep_majority(10);
    d.observe(at(0), m(1), &g, &never_heard);
    let g2 = cluster(5, 1, 1, &[4, 5]);
    d.observe(at(4), m(1), &g2, &never_heard);
    assert!(d.decide(at(10), m(1), &g2).is_empty());
    assert_eq!(d.decide(at(14), m(1), &g2), ids(&[4, 5]));
    d.observe(at(15), m(1), &cluster(5, 1, 1, &[]), &never_heard);
    assert_eq!(d.deadline(), None, "nobody unreachable");
}

#[test]
fn auto_down_downs_whatever_it_cannot_reach_even_as_a_minority() {
    let g = cluster(5, 4, 4, &[1, 2, 3]);
    let mut d = Downer::new(
        Downing::AutoDown {
            after: Duration::from_secs(5),
        },
        RING,
        at(0),
    );
    d.observe(at(0), m(4), &g, &never_heard);
    assert_eq!(d.decide(at(5), m(4), &g), ids(&[1, 2, 3]));
    let mut off = Downer::new(Downing::Off, RING, at(0));
    off.observe(at(0), m(4), &g, &never_heard);
    assert!(off.decide(at(1000), m(4), &g).is_empty());
}

#[test]
fn observations_from_the_far_side_do_not_count() {
    // Member 1's gossip also carries member 4's row (from before the partition settled):
    // 4 cannot reach 1, 2 and 3. Member 1's side still sees only 4 and 5 unreachable.
    let mut g = cluster(5, 1, 1, &[4, 5]);
    for s in [1, 2, 3] {
        g.observe(m(4), m(s), false);
    }
    assert_eq!(g.unreachable_from(m(1)), ids(&[4, 5]));
    assert_eq!(g.unreachable_from(m(4)), ids(&[1, 2, 3]));
    let mut d = keep_majority(1);
    d.observe(at(0), m(1), &g, &never_heard);
    assert_eq!(d.decide(at(1), m(1), &g), ids(&[4, 5]));
}

/// Found by the simulator (flapping-links seed 8, minimized to two partitions): the leader moved
/// a joining member Up right before a 2|2 partition; one side counted it Up and won the tie,
/// the other still saw it Joining, counted 3 members and won as a majority. Both sides now
/// count Joining members, so exactly one side wins.
#[test]
fn both_sides_count_a_member_in_transition_the_same() {
    // Side {1, 2} saw 2 move Up; side {3, 4} still sees 2 Joining.
    let up_side = cluster(4, 1, 1, &[3, 4]);
    let join = |i| {
        GossipMember::joining(
            m(i),
            BTreeSet::new(),
            AppVersion::default(),
            BTreeSet::new(),
        )
    };
    let mut joining_side = Gossip::founding(join(1));
    joining_side.add_joining(m(1), join(3));
    joining_side.add_joining(m(1), join(4));
    for i in [3, 4] {
        joining_side.mark_seen(m(i));
    }
    assert!(
        joining_side
            .leader_actions(m(1), 1, &BTreeMap::new())
            .is_some()
    );
    joining_side.add_joining(m(1), join(2));
    assert_eq!(
        joining_side.member(m(2)).map(|m| m.status),
        Some(MemberStatus::Joining)
    );
    joining_side.observe(m(3), m(1), false);
    joining_side.observe(m(3), m(2), false);
    let mut a = keep_majority(1);
    a.observe(at(0), m(1), &up_side, &never_heard);
    let mut b = keep_majority(1);
    b.observe(at(0), m(3), &joining_side, &never_heard);
    assert_eq!(
        a.decide(at(1), m(1), &up_side),
        ids(&[3, 4]),
        "the tie goes to member 1"
    );
    assert_eq!(
        b.decide(at(1), m(3), &joining_side),
        ids(&[3]),
        "3 and 4 lose"
    );
}

/// Found by the simulator (partitions seed 30, minimized to two partitions): during a 1|1 split
/// of two members, a restarted node joined on one side; counting it (Joining) gave that side a
/// majority while the other side won the tie it saw. A side does not count its own Joining
/// members at all.
#[test]
fn a_member_joining_during_a_partition_does_not_count_for_its_side() {
    // Members 2 and 3 (Up), split; member 1 (a new incarnation) joins on 3's side.
    let join = |i| {
        GossipMember::joining(
            m(i),
            BTreeSet::new(),
            AppVersion::default(),
            BTreeSet::new(),
        )
    };
    let mut g3 = Gossip::founding(join(2));
    g3.add_joining(m(2), join(3));
    g3.mark_seen(m(3));
    assert!(g3.leader_actions(m(2), 1, &BTreeMap::new()).is_some());
    let mut g2 = g3.clone();
    g2.observe(m(2), m(3), false);
    g3.observe(m(3), m(2), false);
    g3.add_joining(m(3), join(1));
    let mut d2 = keep_majority(1);
    d2.observe(at(0), m(2), &g2, &never_heard);
    let mut d3 = keep_majority(1);
    d3.observe(at(0), m(3), &g3, &never_heard);
    assert_eq!(
        d2.decide(at(1), m(2), &g2),
        ids(&[3]),
        "2 wins the 1|1 tie (lowest address)"
    );
    assert_eq!(
        d3.decide(at(1), m(3), &g3),
        ids(&[3]),
        "3 loses despite its joiner"
    );
}

/// Found by the simulator (flapping-links seed 11): counting our own Joining members against
/// ourselves made both sides of a 4|2 split (with a member joining on the larger side) lose, and
/// the whole cluster downed itself. Our own Joining members are not counted at all (Akka's rule).
#[test]
fn our_own_joining_members_do_not_count_against_us() {
    let join = |i| {
        GossipMember::joining(
            m(i),
            BTreeSet::new(),
            AppVersion::default(),
            BTreeSet::new(),
        )
    };
    let mut g = Gossip::founding(join(2));
    for i in 3..=6 {
        g.add_joining(m(2), join(i));
        g.mark_seen(m(i));
    }
    assert!(g.leader_actions(m(2), 1, &BTreeMap::new()).is_some());
    g.add_joining(
        m(2),
        GossipMember::joining(
            MemberId::new(1, 2),
            BTreeSet::new(),
            AppVersion::default(),
            BTreeSet::new(),
        ),
    );
    let mut big = g.clone();
    big.observe(m(3), m(2), false);
    big.observe(m(3), m(5), false);
    let mut d = keep_majority(1);
    d.observe(at(0), m(3), &big, &never_heard);
    assert_eq!(
        d.decide(at(1), m(3), &big),
        ids(&[2, 5]),
        "3's side wins; 3 leads it (2 is unreachable, 1 only joins)"
    );
    let mut small = g;
    small.observe(m(2), m(3), false);
    small.observe(m(2), m(4), false);
    small.observe(m(2), m(6), false);
    small.observe(m(2), MemberId::new(1, 2), false);
    let mut d = keep_majority(1);
    d.observe(at(0), m(2), &small, &never_heard);
    assert_eq!(d.decide(at(1), m(2), &small), ids(&[2]), "2 and 5 lose");
}

/// Found by the simulator (flapping-links seed 400867): a member downed another on a stale
/// picture (a partition moved before it was detected), then, alone, won a 1|1 tie against what
/// was left because Down members no longer counted; the member it had downed, alive on the
/// other side, did the same. Unreachable members we downed count against us until removed.
#[test]
fn members_we_downed_count_against_us_until_removed() {
    let mut g = cluster(3, 2, 2, &[1, 3]);
    g.set_status(m(2), m(1), MemberStatus::Down);
    let mut d = keep_majority(7);
    d.observe(at(0), m(2), &g, &never_heard);
    assert_eq!(
        d.decide(at(7), m(2), &g),
        ids(&[2]),
        "alone against 1 and 3: downs itself"
    );
}

/// Found by the simulator (partitions seed 1128): member 2 downed 1 on a stale picture, still
/// counting 3 for itself (the partition had just moved to cut 3 off too); 3, believing itself
/// alone, downed itself. Member 1, reaching only the Down 3, won the 1|1 tie against 2 by the
/// lowest address, and 2 lived on as well. A Down member counts against us even when we reach
/// it: the other side may have counted it, still Up, for itself.
#[test]
fn a_reachable_down_member_counts_against_us() {
    let mut g = cluster(3, 1, 1, &[2]);
    g.set_status(m(3), m(3), MemberStatus::Down);
    let mut d = keep_majority(7);
    d.observe(at(0), m(1), &g, &never_heard);
    assert_eq!(
        d.decide(at(7), m(1), &g),
        ids(&[1]),
        "1 of 3 (3 may have counted for 2): 1 downs itself"
    );
}

/// Found by the simulator (swarm seed 20015120, minimized to three actions): member 4 was
/// leaving; the leader (on side {1, 2}) moved it to Exiting right before a one-way partition cut
/// {1, 2} off from {3, 4, 5}. Side {1, 2} no longer counted the Exiting member and won the 2|2
/// tie it saw; side {3, 4, 5} still saw member 4 Leaving, counted it for itself and won 3 of 5:
/// both sides kept their shards. A member Exiting on one side may still be Leaving (and counted)
/// on the other, so an unreachable Exiting member counts against us.
#[test]
fn an_unreachable_exiting_member_counts_against_us() {
    let mut leaving = cluster(5, 3, 3, &[]);
    assert!(leaving.set_status(m(4), m(4), MemberStatus::Leaving));
    assert!(leaving.set_ready_to_exit(m(4)));
    let mut exiting = leaving.clone();
    assert!(exiting.set_status(m(1), m(4), MemberStatus::Exiting));
    // Side {1, 2} holds the newer state (4 Exiting) and cannot reach 3, 4 and 5.
    for s in [3, 4, 5] {
        exiting.observe(m(1), m(s), false);
    }
    // Side {3, 4, 5} still sees 4 Leaving and cannot reach 1 and 2.
    for s in [1, 2] {
        leaving.observe(m(3), m(s), false);
    }
    let mut small = keep_majority(7);
    small.observe(at(0), m(1), &exiting, &never_heard);
    let mut large = keep_majority(7);
    large.observe(at(0), m(3), &leaving, &never_heard);
    assert_eq!(
        small.decide(at(7), m(1), &exiting),
        ids(&[1]),
        "2 of 5 (4 may still count over there): 1 and 2 lose"
    );
    assert_eq!(
        large.decide(at(7), m(3), &leaving),
        ids(&[1, 2]),
        "3 of 5: 3, 4 and 5 win"
    );
}

/// Found by the simulator (swarm seed 7302570): two members were unreachable; the new
/// incarnation of one of them joined, which marked the old one Down and restarted the leader's
/// stability clock. The leader then decided after its side's other members had given up as
/// unstable (7/4 of stable-after from the first unreachability), and they all downed themselves.
/// An unreachable member marked Down counts the same as before, so the clock keeps running.
#[test]
fn an_unreachable_member_marked_down_does_not_restart_the_clock() {
    let mut g = cluster(5, 1, 1, &[4, 5]);
    let mut d = keep_majority(7);
    d.observe(at(0), m(1), &g, &never_heard);
    g.set_status(m(1), m(5), MemberStatus::Down);
    d.observe(at(5), m(1), &g, &never_heard);
    assert_eq!(
        d.deadline(),
        Some(at(7)),
        "still due 7 s after the last real change"
    );
    assert_eq!(
        d.decide(at(7), m(1), &g),
        ids(&[4]),
        "only the member not yet Down is downed"
    );
    g.set_status(m(1), m(4), MemberStatus::Down);
    d.observe(at(7), m(1), &g, &never_heard);
    assert_eq!(
        d.deadline(),
        None,
        "every unreachable member is Down: nothing pending"
    );
}

/// Found by the simulator (flapping-links seed 1039587): the record that made 3 unreachable was
/// another member's, and `me` still heard 3 long after the clock on it started (the record was
/// stale); `me` then observing 3 itself changes what the decision rests on, so the clock runs
/// again from when `me` last heard 3, even though the set of unreachable members did not change.
#[test]
fn a_members_own_observation_of_a_member_it_heard_during_the_clock_restarts_it() {
    let g = cluster(3, 1, 2, &[3]);
    let mut d = keep_majority(7);
    d.observe(at(0), m(1), &g, &never_heard);
    let mut own = g.clone();
    own.observe(m(1), m(3), false);
    assert_eq!(own.unreachable_from(m(1)), g.unreachable_from(m(1)));
    let heard_at_6 = |id: MemberId| (id == m(3)).then_some(at(6));
    d.observe(at(8), m(1), &own, &heard_at_6);
    assert!(d.decide(at(8), m(1), &own).is_empty(), "restarted at 6");
    assert!(
        d.decide(at(12), m(1), &own).is_empty(),
        "no decision on the old clock"
    );
    assert_eq!(
        d.deadline(),
        Some(at(12) + Duration::from_millis(250)),
        "unstable first"
    );
}

/// Found by the simulator (coordinator-crash seed 27182830252): a crashed member was declared
/// by every other member within a second; the leader heard it through a slow link, so its own
/// detector declared it 7 s later. Its decision, due on the others' records, waited for that
/// detector (`postpone`), and the confirmation, coming after the clock had run, restarted it:
/// the decision fell past the unstable bound of the others, which downed themselves. `me` had
/// not heard the member since just after the clock started: the clock runs from then.
#[test]
fn a_slow_detectors_confirmation_after_the_clock_ran_keeps_it() {
    let g = cluster(3, 1, 2, &[3]);
    let mut d = keep_majority(7);
    d.observe(at(0), m(1), &g, &never_heard);
    d.postpone(at(8));
    assert!(d.decide(at(7), m(1), &g).is_empty(), "held back");
    let mut own = g.clone();
    own.observe(m(1), m(3), false);
    let heard_at_1 = |id: MemberId| (id == m(3)).then_some(at(1));
    d.observe(at(8), m(1), &own, &heard_at_1);
    assert_eq!(d.deadline(), Some(at(8)), "due 7 s after 1, held back to 8");
    assert_eq!(d.decide(at(8), m(1), &own), ids(&[3]));
}

/// Found by the simulator's check of runs without survivors (partitions seed 11010510): each
/// member's own detector confirmed the partition up to six seconds after the first, and each
/// confirmation restarted the leader's clock, until its decision fell after the unstable bound
/// and the majority downed itself. While the clock on a picture still runs, `me` confirming a
/// member its side already cannot reach keeps it.
#[test]
fn a_members_own_confirmation_keeps_a_running_clock() {
    let g = cluster(3, 1, 2, &[3]);
    let mut d = keep_majority(7);
    d.observe(at(0), m(1), &g, &never_heard);
    let mut own = g.clone();
    own.observe(m(1), m(3), false);
    d.observe(at(5), m(1), &own, &never_heard);
    assert_eq!(
        d.decide(at(7), m(1), &own),
        ids(&[3]),
        "decided on the clock from 0"
    );
}

/// Found by the simulator (flapping-links seed 1092827): a member the others see unreachable,
/// though it reaches them all, runs its unstable bound from when it hears so, and downs itself
/// if that does not clear: the others may down it on their own clock, started earlier.
#[test]
fn a_member_seen_unreachable_by_others_runs_its_unstable_bound() {
    let g = cluster(3, 2, 1, &[2]);
    let mut d = keep_majority(8);
    d.observe(at(0), m(2), &g, &never_heard);
    assert!(
        d.decide(at(13), m(2), &g).is_empty(),
        "before 7/4 of stable-after"
    );
    assert_eq!(d.decide(at(14), m(2), &g), ids(&[2]));
}

#[test]
fn a_doubt_matters_only_if_it_could_change_which_side_wins() {
    // Seven members, 1 unreachable: the leader's side holds six.
    let g = cluster(7, 2, 2, &[1]);
    let d = keep_majority(7);
    assert!(
        !d.doubt_matters(m(2), &g, &ids(&[4])),
        "five of seven still win without one quiet member"
    );
    assert!(
        !d.doubt_matters(m(2), &g, &ids(&[4, 5])),
        "four of seven still win"
    );
    assert!(
        d.doubt_matters(m(2), &g, &ids(&[4, 5, 6])),
        "three of seven would lose: the decision waits"
    );
    // Four members, 1 unreachable: one quiet member turns a win into a tie that 1's side wins.
    let g = cluster(4, 2, 2, &[1]);
    assert!(d.doubt_matters(m(2), &g, &ids(&[3])));
    assert!(!d.doubt_matters(m(2), &g, &BTreeSet::new()), "no doubt");
    // A side that loses anyway is not held back either.
    let g = cluster(5, 2, 2, &[1, 3, 4]);
    assert!(!d.doubt_matters(m(2), &g, &ids(&[5])));
    let auto = Downer::new(
        Downing::AutoDown {
            after: Duration::from_secs(7),
        },
        RING,
        at(0),
    );
    assert!(
        auto.doubt_matters(m(2), &g, &ids(&[5])),
        "auto-down keeps waiting on any doubt"
    );
    assert!(!auto.doubt_matters(m(2), &g, &BTreeSet::new()));
}

/// What `me` decides under `strategy` (stable-after 10 s) in a cluster of `n` Up members
/// (member 1 the oldest) where `observer` sees `unreachable` cut off.
fn decision(
    strategy: Downing,
    n: u64,
    me: u64,
    observer: u64,
    unreachable: &[u64],
) -> BTreeSet<MemberId> {
    let g = cluster(n, me, observer, unreachable);
    let mut d = Downer::new(strategy, RING, at(0));
    d.observe(at(1), m(me), &g, &never_heard);
    assert!(
        d.decide(at(10), m(me), &g).is_empty(),
        "not stable long enough"
    );
    d.decide(at(11), m(me), &g)
}

const TEN: Duration = Duration::from_secs(10);

#[test]
fn static_quorum_keeps_the_side_holding_the_quorum() {
    let quorum = |quorum_size| Downing::StaticQuorum {
        stable_after: TEN,
        quorum_size,
    };
    assert_eq!(decision(quorum(3), 5, 1, 1, &[4, 5]), ids(&[4, 5]));
    assert_eq!(decision(quorum(3), 5, 4, 4, &[1, 2, 3]), ids(&[4]));
    // Four of five against a quorum of 4: the side of three is too small as well.
    assert_eq!(decision(quorum(4), 5, 1, 1, &[4, 5]), ids(&[1]));
    // Five members where the quorum was chosen for three: two sides could each hold one.
    assert_eq!(decision(quorum(2), 5, 1, 1, &[5]), ids(&[1]));
}

#[test]
fn keep_oldest_keeps_the_oldest_members_side_however_small() {
    let oldest = |down_if_alone| Downing::KeepOldest {
        stable_after: TEN,
        down_if_alone,
    };
    assert_eq!(
        decision(oldest(false), 5, 1, 1, &[3, 4, 5]),
        ids(&[3, 4, 5])
    );
    assert_eq!(decision(oldest(false), 5, 3, 3, &[1, 2]), ids(&[3]));
    // The oldest alone: it keeps the cluster unless it downs itself when alone.
    assert_eq!(
        decision(oldest(false), 5, 1, 1, &[2, 3, 4, 5]),
        ids(&[2, 3, 4, 5])
    );
    assert_eq!(decision(oldest(false), 5, 2, 2, &[1]), ids(&[2]));
    assert_eq!(decision(oldest(true), 5, 1, 1, &[2, 3, 4, 5]), ids(&[1]));
    assert_eq!(decision(oldest(true), 5, 2, 2, &[1]), ids(&[1]));
    // Not alone: down-if-alone changes nothing.
    assert_eq!(decision(oldest(true), 5, 1, 1, &[3, 4, 5]), ids(&[3, 4, 5]));
    assert_eq!(decision(oldest(true), 5, 3, 3, &[1, 2]), ids(&[3]));
    // Two members: the oldest alone keeps going (the other may have crashed).
    assert_eq!(decision(oldest(true), 2, 1, 1, &[2]), ids(&[2]));
    assert_eq!(decision(oldest(true), 2, 2, 2, &[1]), ids(&[2]));
}

/// An oldest member cut off from everyone it monitors, in a cluster larger than the ring: the
/// members it does not monitor are not its side, so alone it downs itself, while under the
/// old count (every member without a record counted ours) it kept the cluster as the oldest
/// of a side of three, and the others downed it as the oldest alone: both sides survived.
#[test]
fn members_nobody_on_our_side_monitors_are_not_counted_ours() {
    let members: Vec<MemberId> = (1..=12).map(m).collect();
    let watched: Vec<u64> = crate::membership::detector::monitored(m(1), &members, RING)
        .iter()
        .map(|id| id.node.0)
        .collect();
    assert_eq!(watched.len(), 9);
    let g = cluster(12, 1, 1, &watched);
    let unwatched: BTreeSet<MemberId> = (2..=12).filter(|n| !watched.contains(n)).map(m).collect();
    assert_eq!(unvouched(m(1), &g, RING), unwatched);
    let oldest = Downing::KeepOldest {
        stable_after: TEN,
        down_if_alone: true,
    };
    assert_eq!(decision(oldest, 12, 1, 1, &watched), ids(&[1]));
    // Not even counted by a winning side: nobody is downed for being unvouched.
    let majority = Downing::KeepMajority { stable_after: TEN };
    let g = cluster(12, 2, 2, &[1]);
    assert!(
        unvouched(m(2), &g, RING).is_empty(),
        "the ring reaches round"
    );
    assert_eq!(decision(majority, 12, 2, 2, &[1]), ids(&[1]));
    // Everyone is vouched for in a healthy cluster, however large.
    let g = cluster(40, 7, 7, &[]);
    assert!(unvouched(m(7), &g, RING).is_empty());
}

#[test]
fn down_all_downs_every_side() {
    let all = Downing::DownAll { stable_after: TEN };
    assert_eq!(decision(all, 5, 1, 1, &[5]), ids(&[1]));
    assert_eq!(decision(all, 5, 5, 5, &[1, 2, 3, 4]), ids(&[5]));
}

#[test]
fn every_strategy_is_bounded_when_it_cannot_decide() {
    for strategy in [
        Downing::StaticQuorum {
            stable_after: TEN,
            quorum_size: 3,
        },
        Downing::KeepOldest {
            stable_after: TEN,
            down_if_alone: true,
        },
        Downing::DownAll { stable_after: TEN },
    ] {
        let mut d = Downer::new(strategy, RING, at(0));
        d.observe(at(0), m(1), &cluster(5, 1, 1, &[5]), &never_heard);
        for t in [6, 12] {
            let flap: &[u64] = if t == 6 { &[4, 5] } else { &[5] };
            d.observe(at(t), m(1), &cluster(5, 1, 1, flap), &never_heard);
        }
        let bound = Instant::ZERO + Duration::from_millis(17_500);
        assert_eq!(
            d.deadline(),
            Some(bound),
            "{strategy:?}: 7/4 of stable-after"
        );
        assert_eq!(d.decide(bound, m(1), &cluster(5, 1, 1, &[5])), ids(&[1]));
    }
}

fn lease_majority() -> Downing {
    Downing::LeaseMajority {
        stable_after: TEN,
        acquire_delay_for_minority: Duration::from_secs(2),
        lease_ttl: Duration::from_secs(40),
    }
}

/// `me`'s downer under lease-majority, decided at 11 s on `g`: the lease call it makes then.
fn lease_decision(me: u64, g: &Gossip) -> (Downer, Option<crate::lease::LeaseCall>) {
    let mut d = Downer::new(lease_majority(), RING, at(0));
    d.observe(at(1), m(me), g, &never_heard);
    assert!(d.decide(at(11), m(me), g).is_empty(), "the lease decides");
    let call = d.poll_lease_call(at(11), m(me));
    (d, call)
}

#[test]
fn lease_majority_keeps_the_side_whose_leader_gets_the_lease() {
    use crate::lease::{FencingToken, LeaseAnswer, LeaseCall, LeaseName};
    // The majority's leader asks at once; granted, it downs the other side.
    let g = cluster(5, 1, 1, &[4, 5]);
    let (mut d, call) = lease_decision(1, &g);
    let call = call.expect("the majority asks at once");
    assert!(matches!(
        &call,
        LeaseCall::Acquire { name: LeaseName::Downing, ttl, .. } if *ttl == Duration::from_secs(40)
    ));
    let granted = LeaseAnswer::Granted(FencingToken(1));
    assert_eq!(
        d.handle_lease_answer(at(11), m(1), &g, &call, &granted),
        ids(&[4, 5])
    );
    assert!(
        d.handle_lease_answer(at(11), m(1), &g, &call, &granted)
            .is_empty(),
        "one answer per ask"
    );
    // A member that does not lead asks nothing, and waits for its leader.
    assert!(lease_decision(2, &g).1.is_none());
    // The minority's leader asks after the delay; refused, it asks again every tenth of
    // stable-after, and its side downs itself at the unstable bound.
    let g = cluster(5, 4, 4, &[1, 2, 3]);
    let (mut d, call) = lease_decision(4, &g);
    assert!(call.is_none(), "the minority waits");
    assert_eq!(d.deadline(), Some(at(13)));
    let mut asked = at(13);
    let bound = Instant::ZERO + Duration::from_millis(18_500);
    while asked < bound {
        let call = d.poll_lease_call(asked, m(4)).expect("asked when due");
        assert!(
            d.handle_lease_answer(asked, m(4), &g, &call, &LeaseAnswer::Refused)
                .is_empty(),
            "refused, nobody is downed"
        );
        asked += Duration::from_secs(1);
        assert_eq!(d.deadline(), Some(asked.min(bound)));
    }
    assert_eq!(
        d.decide(bound, m(4), &g),
        ids(&[4]),
        "7/4 of stable-after from 1 s"
    );
    assert_eq!(
        d.poll_lease_call(bound, m(4)),
        None,
        "no ask after the bound"
    );
    // An answer arriving once the partition healed decides nothing, and is not repeated.
    let g = cluster(5, 1, 1, &[4, 5]);
    let (mut d, call) = lease_decision(1, &g);
    d.observe(at(12), m(1), &cluster(5, 1, 1, &[]), &never_heard);
    let healed = cluster(5, 1, 1, &[]);
    let call = call.expect("asked");
    assert!(
        d.handle_lease_answer(at(12), m(1), &healed, &call, &LeaseAnswer::Refused)
            .is_empty()
    );
    assert_eq!(d.deadline(), None);
}

#[test]
fn a_failed_or_refused_lease_ask_is_granted_on_a_repeat_before_the_unstable_bound() {
    use crate::lease::{FencingToken, LeaseAnswer};
    // A store that fails, then answers: the side that asked wins after all.
    let g = cluster(5, 1, 1, &[4, 5]);
    let (mut d, call) = lease_decision(1, &g);
    let failed = LeaseAnswer::Failed("store down".into());
    let call = call.expect("asked");
    assert!(
        d.handle_lease_answer(at(11), m(1), &g, &call, &failed)
            .is_empty()
    );
    assert_eq!(d.poll_lease_call(at(11), m(1)), None, "not at once");
    let call = d.poll_lease_call(at(12), m(1)).expect("asked again");
    let granted = LeaseAnswer::Granted(FencingToken(2));
    assert_eq!(
        d.handle_lease_answer(at(12), m(1), &g, &call, &granted),
        ids(&[4, 5])
    );
    // Refused while an earlier grant (its holder since crashed) still ran: granted once it ran
    // out, the side survives.
    let (mut d, call) = lease_decision(1, &g);
    let call = call.expect("asked");
    assert!(
        d.handle_lease_answer(at(11), m(1), &g, &call, &LeaseAnswer::Refused)
            .is_empty()
    );
    let call = d.poll_lease_call(at(12), m(1)).expect("asked again");
    assert_eq!(
        d.handle_lease_answer(at(12), m(1), &g, &call, &granted),
        ids(&[4, 5])
    );
}

#[test]
fn the_holder_of_a_running_grant_decides_again_though_it_does_not_lead() {
    use crate::lease::{FencingToken, LeaseAnswer};
    // 2 leads nothing (1 is the leader) but holds a grant from an earlier decision.
    let g = cluster(5, 2, 1, &[5]);
    let mut d = Downer::new(lease_majority(), RING, at(0));
    d.observe(at(1), m(2), &g, &never_heard);
    assert!(d.decide(at(11), m(2), &g).is_empty());
    assert_eq!(d.poll_lease_call(at(11), m(2)), None, "2 does not lead");
    d.lease = Some(LeaseAsk::Due(at(11)));
    let call = d.poll_lease_call(at(11), m(2)).expect("asked");
    let granted = LeaseAnswer::Granted(FencingToken(1));
    assert_eq!(
        d.handle_lease_answer(at(11), m(2), &g, &call, &granted),
        ids(&[5])
    );
    assert!(
        d.holds_lease(at(50)) && !d.holds_lease(at(51)),
        "40 s from the ask"
    );
    // Healed (5 removed, say); then a member of its side crashes: 2 decides again while its
    // grant runs.
    d.observe(at(15), m(2), &cluster(5, 2, 1, &[]), &never_heard);
    let g = cluster(5, 2, 1, &[4, 5]);
    d.observe(at(20), m(2), &g, &never_heard);
    assert!(d.decide(at(30), m(2), &g).is_empty());
    let call = d.poll_lease_call(at(30), m(2)).expect("the holder asks");
    assert_eq!(
        d.handle_lease_answer(at(30), m(2), &g, &call, &granted),
        ids(&[4, 5])
    );
}

#[test]
fn a_side_whose_picture_does_not_settle_asks_for_the_lease_before_the_unstable_bound() {
    use crate::lease::{FencingToken, LeaseAnswer};
    // 5 has been unreachable since 1 s, 4 since 7 s: the picture never stays stable for 10 s.
    // At 5/4 of stable-after the leader asks anyway; granted, it downs 5 only: 4, cut off for
    // less than stable-after, may not have seen anything unreachable before 7 s, and could run
    // until 7/4 of stable-after from then.
    let mut d = Downer::new(lease_majority(), RING, at(0));
    d.observe(at(1), m(1), &cluster(5, 1, 1, &[5]), &never_heard);
    let g = cluster(5, 1, 1, &[4, 5]);
    d.observe(at(7), m(1), &g, &never_heard);
    let asks = Instant::ZERO + Duration::from_millis(13_500);
    assert_eq!(d.deadline(), Some(asks), "5/4 of stable-after from 1 s");
    assert!(d.decide(asks, m(1), &g).is_empty(), "the lease decides");
    let call = d.poll_lease_call(asks, m(1)).expect("the leader asks");
    let granted = LeaseAnswer::Granted(FencingToken(1));
    assert_eq!(
        d.handle_lease_answer(asks, m(1), &g, &call, &granted),
        ids(&[5])
    );
    // 5's Down spread; 4 has been cut off for stable-after at 17 s: asked again, before the
    // unstable bound (18.5 s), and downed. Meanwhile the holder covers its side.
    let mut g = g;
    g.set_status(m(1), m(5), MemberStatus::Down);
    d.observe(at(14), m(1), &g, &never_heard);
    while let Some(notice) = d.deadline().filter(|t| *t < at(17)) {
        assert!(d.decide(notice, m(1), &g).is_empty());
        assert!(d.poll_cover_notice(notice, m(1), &g).is_some());
    }
    assert_eq!(d.deadline(), Some(at(17)));
    assert!(d.decide(at(17), m(1), &g).is_empty());
    let call = d.poll_lease_call(at(17), m(1)).expect("asked again");
    assert_eq!(
        d.handle_lease_answer(at(17), m(1), &g, &call, &granted),
        ids(&[4])
    );
    g.set_status(m(1), m(4), MemberStatus::Down);
    d.observe(at(18), m(1), &g, &never_heard);
    assert!(d.decide(at(18), m(1), &g).is_empty(), "the side survives");
    // The holder goes on covering 2 and 3 until both have seen the state with 4 Down: one
    // that heard it late would otherwise outlive its cover and down itself.
    let notice = d.deadline().expect("a cover is still due");
    let cover = d.poll_cover_notice(notice, m(1), &g).expect("covered");
    assert_eq!(cover.to, ids(&[2, 3]));
    g.mark_seen(m(2));
    let notice = d.deadline().expect("3 has not seen it");
    assert!(d.poll_cover_notice(notice, m(1), &g).is_some());
    g.mark_seen(m(3));
    let notice = d.deadline().expect("a last look");
    assert!(
        d.poll_cover_notice(notice, m(1), &g).is_none(),
        "all have seen it"
    );
    assert_eq!(d.deadline(), None, "nothing more to do");
    // Asked once per unsettled stretch: refused, the ask is repeated until the unstable bound,
    // which then downs the side as before.
    let mut d = Downer::new(lease_majority(), RING, at(0));
    d.observe(at(1), m(1), &cluster(5, 1, 1, &[5]), &never_heard);
    let g = cluster(5, 1, 1, &[4, 5]);
    d.observe(at(7), m(1), &g, &never_heard);
    assert!(d.decide(asks, m(1), &g).is_empty());
    let call = d.poll_lease_call(asks, m(1)).expect("asked");
    assert!(
        d.handle_lease_answer(asks, m(1), &g, &call, &LeaseAnswer::Refused)
            .is_empty()
    );
    let bound = Instant::ZERO + Duration::from_millis(18_500);
    let mut now = asks;
    while let Some(due) = d.deadline().filter(|at| *at < bound) {
        now = due;
        assert!(d.decide(now, m(1), &g).is_empty());
        let call = d.poll_lease_call(now, m(1)).expect("repeated");
        d.handle_lease_answer(now, m(1), &g, &call, &LeaseAnswer::Refused);
    }
    assert!(now > asks, "repeated at least once");
    assert_eq!(d.decide(bound, m(1), &g), ids(&[1]), "the unstable bound");
    // Other strategies still down every member at the unstable bound (see
    // `every_strategy_is_bounded_when_it_cannot_decide`); a member that does not lead asks
    // nothing.
    let mut d = Downer::new(lease_majority(), RING, at(0));
    d.observe(at(1), m(2), &cluster(5, 2, 2, &[5]), &never_heard);
    let g = cluster(5, 2, 2, &[4, 5]);
    d.observe(at(7), m(2), &g, &never_heard);
    assert!(d.decide(asks, m(2), &g).is_empty());
    assert_eq!(d.poll_lease_call(asks, m(2)), None, "2 does not lead");
}

#[test]
fn a_grant_downs_only_the_members_cut_off_for_stable_after_or_exiting() {
    use crate::lease::{FencingToken, LeaseAnswer};
    // A stable picture (5 cut off since 1 s): the leader asks at 11 s. Its answer comes at
    // 12 s, after 3 was cut off too (at 11.5 s) and 4, Exiting, at 11.8 s: 3 waits for the
    // next decision, 4 (its shards moved already) and 5 are downed.
    let mut d = Downer::new(lease_majority(), RING, at(0));
    d.observe(at(1), m(1), &cluster(5, 1, 1, &[5]), &never_heard);
    assert!(d.decide(at(11), m(1), &cluster(5, 1, 1, &[5])).is_empty());
    let call = d.poll_lease_call(at(11), m(1)).expect("the leader asks");
    let mut g = cluster(5, 1, 1, &[3, 4, 5]);
    g.set_status(m(1), m(4), MemberStatus::Exiting);
    d.observe(
        Instant::ZERO + Duration::from_millis(11_500),
        m(1),
        &g,
        &never_heard,
    );
    let granted = LeaseAnswer::Granted(FencingToken(1));
    assert_eq!(
        d.handle_lease_answer(at(12), m(1), &g, &call, &granted),
        ids(&[4, 5])
    );
}

#[test]
fn the_holder_of_the_lease_covers_the_members_it_reaches_past_their_unstable_bound() {
    use crate::lease::{FencingToken, LeaseAnswer};
    // 5 unreachable since 1 s, 4 since 7 s: the leader asks at 13.5 s and is granted for 40 s.
    let g = cluster(5, 1, 1, &[4, 5]);
    let mut d = Downer::new(lease_majority(), RING, at(0));
    d.observe(at(1), m(1), &cluster(5, 1, 1, &[5]), &never_heard);
    d.observe(at(7), m(1), &g, &never_heard);
    let asks = Instant::ZERO + Duration::from_millis(13_500);
    assert!(d.decide(asks, m(1), &g).is_empty());
    let call = d.poll_lease_call(asks, m(1)).expect("the leader asks");
    let granted = LeaseAnswer::Granted(FencingToken(1));
    d.handle_lease_answer(asks, m(1), &g, &call, &granted);
    // It covers 2 and 3 (not 4, cut off) for half of stable-after, every eighth of it.
    let notice = d
        .poll_cover_notice(asks, m(1), &g)
        .expect("covered at once");
    assert_eq!(notice.cover, Duration::from_secs(5));
    assert_eq!(notice.to, ids(&[2, 3]));
    assert_eq!(d.poll_cover_notice(asks, m(1), &g), None, "once per round");
    // Its own unstable bound (18.5 s) passes while it holds the grant. It asks again at 17 s
    // (4 cut off for stable-after), and, someone still unreachable, with half of that grant
    // left (37 s).
    let mut asked = Vec::new();
    let mut notices = 1;
    while let Some(now) = d.deadline().filter(|t| *t <= at(40)) {
        assert!(
            d.decide(now, m(1), &g).is_empty(),
            "no self-downing at {now}"
        );
        if let Some(call) = d.poll_lease_call(now, m(1)) {
            asked.push(now);
            d.handle_lease_answer(now, m(1), &g, &call, &granted);
        }
        notices += usize::from(d.poll_cover_notice(now, m(1), &g).is_some());
    }
    assert_eq!(asked, [at(17), at(37)]);
    assert!(notices >= 21, "every 1.25 s from 13.5 s: {notices}");
    // Granted again until 77 s: it keeps going.
    assert!(d.decide(at(60), m(1), &g).is_empty());
}

#[test]
fn a_cover_holds_a_members_unstable_bound_back_only_while_it_runs() {
    // 2 does not lead; 5 has been unreachable (to 1) since 1 s: 2's bound is at 18.5 s.
    let g = cluster(5, 2, 1, &[5]);
    let covered = |cover: Duration, from: u64| {
        let mut d = Downer::new(lease_majority(), RING, at(0));
        d.observe(at(1), m(2), &g, &never_heard);
        assert!(d.decide(at(11), m(2), &g).is_empty(), "2 does not lead");
        d.handle_cover(at(17), m(2), m(from), cover, &g);
        d
    };
    let bound = Instant::ZERO + Duration::from_millis(18_500);
    let mut d = covered(Duration::from_millis(2_500), 1);
    assert_eq!(
        d.deadline(),
        Some(Instant::ZERO + Duration::from_millis(19_500))
    );
    assert!(
        d.decide(bound, m(2), &g).is_empty(),
        "covered by the holder"
    );
    assert_eq!(d.decide(d.deadline().unwrap(), m(2), &g), ids(&[2]));
    // A cover is never longer than half of stable-after, whatever the message says.
    let d = covered(Duration::from_secs(60), 1);
    assert_eq!(d.deadline(), Some(at(22)));
    // A cover from a member 2 itself observes unreachable does not count.
    let g = cluster(5, 2, 2, &[5]);
    let mut d = Downer::new(lease_majority(), RING, at(0));
    d.observe(at(1), m(2), &g, &never_heard);
    assert!(d.decide(at(11), m(2), &g).is_empty(), "2 does not lead");
    d.handle_cover(at(17), m(2), m(5), Duration::from_millis(2_500), &g);
    assert_eq!(d.decide(bound, m(2), &g), ids(&[2]), "the bound as before");
    // Other strategies take no cover.
    let mut d = keep_majority(10);
    d.observe(at(1), m(2), &cluster(5, 2, 1, &[5]), &never_heard);
    d.handle_cover(at(17), m(2), m(1), Duration::from_millis(2_500), &g);
    assert_eq!(d.decide(bound, m(2), &g), ids(&[2]));
}

/// Indirectly connected members (unreachable from some members, reachable from others) are
/// downed rather than splitting the decision: every member reads the records of the members
/// it reaches in address order, and skips those of a member an earlier one cannot reach, so
/// members holding the same records see the same member cut off. Akka downs both ends of each
/// broken link; here only the end an earlier-ranked observer cannot reach goes.
#[test]
fn a_member_unreachable_from_some_and_reachable_from_others_is_downed_by_one_decision() {
    // The link between 1 and 3 is broken both ways; everyone else reaches everyone.
    let mut g = cluster(5, 1, 1, &[3]);
    g.observe(m(3), m(1), false);
    let decisions: Vec<BTreeSet<MemberId>> = (1..=5)
        .map(|me| {
            let mut d = keep_majority(10);
            d.observe(at(1), m(me), &g, &never_heard);
            d.decide(at(11), m(me), &g)
        })
        .collect();
    // 1 takes itself for the leader, and 2 (1 is unreachable in a record) does too: both
    // down 3 (1's record ranks first), the same decision. 3, which cannot reach 1, counts
    // itself on a majority of four and does not lead; it learns of its Down through 2.
    let none = BTreeSet::new();
    assert_eq!(
        decisions,
        [ids(&[3]), ids(&[3]), none.clone(), none.clone(), none]
    );
    for me in [2, 4, 5] {
        assert_eq!(g.unreachable_from(m(me)), ids(&[3]), "{me} sees 3 cut off");
    }
    // A link broken one way (3 hears everyone; 1 does not hear 3): 3 is cut off for the
    // others, and sees nothing cut off itself, but its unstable bound runs, as the others
    // may down it.
    let g = cluster(5, 3, 1, &[3]);
    let mut d = keep_majority(10);
    d.observe(at(1), m(3), &g, &never_heard);
    assert!(d.decide(at(11), m(3), &g).is_empty());
    let bound = Instant::ZERO + Duration::from_millis(18_500);
    assert_eq!(d.decide(bound, m(3), &g), ids(&[3]));
}

/// Found by the simulator (swarm seed 7300003601): 2 crashed and was downed; 4, which had left,
/// exited meanwhile and became unreachable as Exiting. It kept a decision pending, so every
/// member's unstable bound ran on from 2's unreachability through the convergence that removes
/// 4, and a member that heard of the removal late downed itself. An unreachable Exiting member
/// needs no decision: the leader removes it.
#[test]
fn an_unreachable_exiting_member_keeps_no_decision_pending() {
    let mut g = cluster(5, 3, 3, &[2]);
    let mut d = keep_majority(7);
    d.observe(at(0), m(3), &g, &never_heard);
    assert_eq!(
        d.deadline(),
        Some(at(7)),
        "a decision about 2 is due after stable-after"
    );
    assert!(g.set_status(m(1), m(4), MemberStatus::Exiting));
    g.observe(m(3), m(4), false);
    d.observe(at(5), m(3), &g, &never_heard);
    g.set_status(m(1), m(2), MemberStatus::Down);
    d.observe(at(8), m(3), &g, &never_heard);
    assert_eq!(
        d.deadline(),
        None,
        "2 is Down and 4 Exiting: nothing is pending, no unstable bound runs"
    );
    assert!(d.decide(at(13), m(3), &g).is_empty());
    assert!(
        d.decide(at(20), m(3), &g).is_empty(),
        "past 7/4 of stable-after from 2's unreachability"
    );
}
