//! Role tests for the gossip state: merge, seen sets and convergence, leader and its actions.

use super::*;

fn m(n: u64) -> MemberId {
    MemberId::new(n, 1)
}

fn joining(n: u64) -> GossipMember {
    GossipMember::joining(
        m(n),
        BTreeSet::new(),
        AppVersion::default(),
        BTreeSet::new(),
    )
}

/// A converged three-member cluster (all Up, all seen), as member 1 holds it.
fn three_up() -> Gossip {
    let mut g = Gossip::founding(joining(1));
    g.add_joining(m(1), joining(2));
    g.add_joining(m(1), joining(3));
    g.seen.extend([m(2), m(3)]);
    assert!(g.leader_actions(m(1), 1, &BTreeMap::new()).is_some());
    g.seen.extend([m(2), m(3)]);
    g
}

fn status(g: &Gossip, n: u64) -> Option<MemberStatus> {
    g.member(m(n)).map(|m| m.status)
}

#[test]
fn the_leader_moves_joining_members_up_in_address_order_at_convergence() {
    let mut g = Gossip::founding(joining(1));
    g.add_joining(m(1), joining(3));
    g.add_joining(m(1), joining(2));
    assert!(
        g.leader_actions(m(1), 4, &BTreeMap::new()).is_none(),
        "min-nr-of-members not reached"
    );
    assert!(g.leader_actions(m(1), 3, &BTreeMap::new()).is_some());
    let ups: Vec<(u64, u64)> = g.members().map(|m| (m.id.node.0, m.up_number)).collect();
    assert_eq!(ups, [(1, 1), (2, 2), (3, 3)]);
    assert_eq!(
        g.seen().to_set(),
        BTreeSet::from([m(1)]),
        "a new state, seen by the leader only"
    );
    assert!(
        g.leader_actions(m(1), 3, &BTreeMap::new()).is_none(),
        "not converged: 2 and 3 have not seen it"
    );
}

#[test]
fn only_the_leader_acts() {
    let mut g = three_up();
    g.add_joining(m(1), joining(4));
    g.seen.extend([m(2), m(3)]);
    assert_eq!(g.leader(m(2)), Some(m(1)));
    assert!(g.leader_actions(m(2), 1, &BTreeMap::new()).is_none());
    assert!(g.leader_actions(m(1), 1, &BTreeMap::new()).is_some());
    assert_eq!(status(&g, 4), Some(MemberStatus::Up));
}

#[test]
fn merging_is_a_join_later_statuses_and_tombstones_win() {
    let base = three_up();
    let mut a = base.clone();
    let mut b = base.clone();
    a.set_status(m(1), m(2), MemberStatus::Leaving);
    a.add_joining(m(1), joining(5));
    b.set_status(m(3), m(2), MemberStatus::Down);
    b.add_joining(m(3), joining(4));
    let mut a2 = a.clone();
    assert_eq!(a2.receive(m(1), b.clone()), Received::Merged);
    let mut b2 = b.clone();
    assert_eq!(b2.receive(m(3), a.clone()), Received::Merged);
    assert!(a2.same_state(&b2), "merge is commutative");
    assert_eq!(status(&a2, 2), Some(MemberStatus::Down));
    assert_eq!(status(&a2, 4), Some(MemberStatus::Joining));
    assert_eq!(status(&a2, 5), Some(MemberStatus::Joining));
    assert_eq!(a2.seen().to_set(), BTreeSet::from([m(1)]));
    // Strictly newer or older states are recognised as such.
    let mut behind = base.clone();
    assert_eq!(behind.receive(m(2), b.clone()), Received::Newer);
    assert_eq!(
        behind.seen().to_set(),
        BTreeSet::from([m(2), m(3)]),
        "b's seen set plus the receiver"
    );
    let mut ahead = b.clone();
    assert_eq!(ahead.receive(m(3), base.clone()), Received::Older);

    // A removed member never comes back through an older gossip.
    let mut c = base.clone();
    Arc::make_mut(&mut c.members).remove(&m(3));
    Arc::make_mut(&mut c.removed).insert(m(3));
    let mut old = base.clone();
    assert_eq!(old.receive(m(2), c.clone()), Received::Newer);
    assert!(old.is_removed(m(3)) && old.member(m(3)).is_none());
    assert_eq!(c.receive(m(1), base.clone()), Received::Older);

    // Removed sets that each hold what the other lacks merge into their union.
    let mut d = base.clone();
    Arc::make_mut(&mut d.removed).insert(m(9));
    let mut both = c.clone();
    assert_eq!(both.receive(m(1), d.clone()), Received::Merged);
    assert!(both.is_removed(m(3)) && both.is_removed(m(9)));
    // A state that only lacks a removal of ours is older, whoever's members are shared.
    let mut e = d.clone();
    assert_eq!(e.receive(m(1), base), Received::Older);
}

#[test]
fn seen_sets_grow_on_the_same_state_and_restart_on_a_new_one() {
    let g = three_up();
    let mut other = g.clone();
    other.seen = BTreeSet::from([m(2)]).into();
    let mut mine = g.clone();
    mine.seen = BTreeSet::from([m(1)]).into();
    assert_eq!(mine.receive(m(1), other), Received::Same);
    assert_eq!(mine.seen().to_set(), BTreeSet::from([m(1), m(2)]));
    let mut newer = g;
    newer.set_status(m(3), m(3), MemberStatus::Leaving);
    assert_eq!(mine.receive(m(1), newer), Received::Newer);
    assert_eq!(mine.seen().to_set(), BTreeSet::from([m(1), m(3)]));
}

/// The digest folds each member's known digest: a state decoded from the wire (nothing
/// known) digests as the state it was encoded from, and a member changed in place (its known
/// digest forgotten) changes the state's digest, in the copy that changed it only.
#[test]
fn a_state_digests_alike_however_its_members_digests_were_known() {
    let mut g = three_up();
    let before = g.digest();
    let mut changed = g.clone();
    assert!(changed.set_status(m(1), m(2), MemberStatus::Leaving));
    let after = changed.digest();
    assert_ne!(after, before, "a member changed");
    let mut decoded: Gossip =
        postcard::from_bytes(&postcard::to_allocvec(&changed).unwrap()).expect("a state decodes");
    assert_eq!(decoded.digest(), after, "decoded, nothing known");
    let mut g = Gossip {
        digest: DigestCache::default(),
        ..g
    };
    assert_eq!(g.digest(), before, "the copy that did not change");
    // The digest is of the encoding: two states differing in any member differ.
    let mut up_numbers = changed.clone();
    if let Some(member) = Arc::make_mut(&mut up_numbers.members).get_mut(&m(3)) {
        GossipMember::edit(member).up_number += 1;
    }
    up_numbers.digest = DigestCache::default();
    assert_ne!(up_numbers.digest(), after, "an up number changed");
}

/// A state keeps its stamp while it holds (a seen set growing does not change it), gets a
/// new one from its member's counter after every change, and a newer state adopted from a peer
/// drops the peer's stamp (the peer's counter names the peer's states, not ours).
#[test]
fn a_state_keeps_its_stamp_until_it_changes() {
    let mut counter = 0;
    let mut mine = three_up();
    let first = mine.stamp(&mut counter);
    assert_eq!(mine.stamp(&mut counter), first, "asked again, unchanged");
    let mut same = mine.clone();
    same.seen = BTreeSet::from([m(2)]).into();
    assert_eq!(mine.receive(m(1), same), Received::Same);
    assert_eq!(
        mine.stamp(&mut counter),
        first,
        "the seen set is not the state"
    );
    assert!(mine.set_status(m(1), m(2), MemberStatus::Leaving));
    let second = mine.stamp(&mut counter);
    assert_ne!(second, first, "a local change");
    // A peer's newer state, stamped by the peer with the number we last gave.
    let (mut peer, mut peer_counter) = (mine.clone(), 0);
    assert!(peer.set_status(m(3), m(3), MemberStatus::Leaving));
    while peer.stamp(&mut peer_counter) != second {
        peer = peer.clone();
        peer.digest = DigestCache::default();
    }
    assert_eq!(mine.receive(m(1), peer), Received::Newer);
    let third = mine.stamp(&mut counter);
    assert!(
        third != second && third != first,
        "a newer state is stamped anew"
    );
    // An older state changes nothing: the stamp stays.
    assert_eq!(mine.receive(m(1), three_up()), Received::Older);
    assert_eq!(mine.stamp(&mut counter), third);
}

#[test]
fn the_seen_set_holds_members_only() {
    let g = three_up();
    // A peer's seen set naming a stranger (a bug or a forged frame) adds only the members.
    let mut other = g.clone();
    other.seen = BTreeSet::from([m(2), m(9)]).into();
    let mut mine = g.clone();
    mine.seen = BTreeSet::from([m(1)]).into();
    assert_eq!(mine.receive(m(1), other), Received::Same);
    assert_eq!(mine.seen().to_set(), BTreeSet::from([m(1), m(2)]));
    // A member that is none itself does not mark the state seen, on receipt or on a change.
    let mut outsider = g.clone();
    outsider.seen = BTreeSet::from([m(2)]).into();
    assert_eq!(outsider.receive(m(8), g), Received::Same);
    assert_eq!(outsider.seen().to_set(), BTreeSet::from([m(1), m(2), m(3)]));
    assert!(outsider.set_status(m(8), m(3), MemberStatus::Leaving));
    assert_eq!(outsider.seen().to_set(), BTreeSet::new());
}

#[test]
fn an_unreachable_member_blocks_convergence_until_it_is_down() {
    let mut g = three_up();
    assert!(g.converged());
    g.observe(m(1), m(3), false);
    g.seen.extend([m(2), m(3)]);
    assert!(!g.converged(), "unreachable and Up");
    assert!(!g.view().members()[2].reachable);
    g.set_status(m(1), m(3), MemberStatus::Down);
    g.seen.insert(m(2));
    assert!(g.converged(), "Down members may be unreachable");
    assert!(g.leader_actions(m(1), 1, &BTreeMap::new()).is_some());
    assert!(g.is_removed(m(3)), "unreachable Down members are removed");
    assert!(
        g.unreachable().is_empty(),
        "observations of removed members are forgotten"
    );
}

#[test]
fn the_leader_is_the_first_reachable_up_member() {
    let mut g = three_up();
    g.observe(m(2), m(1), false);
    assert_eq!(g.leader(m(2)), Some(m(2)), "member 1 is unreachable");
    assert_eq!(
        g.leader(m(1)),
        Some(m(1)),
        "a member never considers itself unreachable"
    );
    let founding = Gossip::founding(joining(5));
    assert_eq!(
        founding.leader(m(5)),
        Some(m(5)),
        "no Up member: the first reachable"
    );
}

/// Found by the simulator (flapping-links seed 9309849678269407483): every Up member had been
/// downed, and the members joining since named the first Down member, whose process was gone,
/// their leader: nobody moved them Up or removed the Down members, for good. As in Akka, a
/// Down member never leads.
#[test]
fn a_down_member_never_leads_so_members_joining_after_every_up_member_was_downed_go_up() {
    let mut g = three_up();
    g.add_joining(m(1), joining(4));
    for n in 1..=3 {
        g.set_status(m(4), m(n), MemberStatus::Down);
    }
    assert_eq!(
        g.leader(m(4)),
        Some(m(4)),
        "the first member that is not Down"
    );
    g.seen.insert(m(4));
    assert!(g.leader_actions(m(4), 1, &BTreeMap::new()).is_some());
    assert_eq!(status(&g, 4), Some(MemberStatus::Up));
}

#[test]
fn a_leaving_member_exits_when_ready_and_is_removed_once_it_saw_that() {
    let mut g = three_up();
    g.set_status(m(3), m(3), MemberStatus::Leaving);
    g.seen.extend([m(1), m(2)]);
    assert!(
        g.leader_actions(m(1), 1, &BTreeMap::new()).is_none(),
        "not ready: its regions still hand off"
    );
    g.set_ready_to_exit(m(3));
    g.seen.extend([m(1), m(2)]);
    assert!(g.leader_actions(m(1), 1, &BTreeMap::new()).is_some());
    assert_eq!(status(&g, 3), Some(MemberStatus::Exiting));
    g.seen.insert(m(2));
    assert!(
        g.leader_actions(m(1), 1, &BTreeMap::new()).is_none(),
        "member 3 has not seen itself Exiting"
    );
    g.seen.insert(m(3));
    assert!(g.leader_actions(m(1), 1, &BTreeMap::new()).is_some());
    assert!(g.is_removed(m(3)));
}

#[test]
fn a_new_incarnation_marks_the_old_one_down() {
    let mut g = three_up();
    let restarted = GossipMember::joining(
        MemberId::new(2, 2),
        BTreeSet::new(),
        AppVersion::default(),
        BTreeSet::new(),
    );
    assert!(g.add_joining(m(1), restarted.clone()));
    assert_eq!(status(&g, 2), Some(MemberStatus::Down));
    assert!(!g.add_joining(m(1), restarted), "already joining");
}

/// Akka's `role.<name>.min-nr-of-members`: joining members stay Joining until enough members
/// of each listed role are known.
#[test]
fn the_leader_waits_for_enough_members_of_each_role() {
    let with_role = |n: u64, role: &str| {
        let roles = [role.to_owned()].into();
        GossipMember::joining(m(n), roles, AppVersion::default(), BTreeSet::new())
    };
    let mut g = Gossip::founding(with_role(1, "frontend"));
    g.add_joining(m(1), with_role(2, "backend"));
    let min: BTreeMap<String, usize> = [("backend".to_owned(), 2)].into();
    assert!(
        g.leader_actions(m(1), 1, &min).is_none(),
        "one backend member of two"
    );
    g.add_joining(m(1), with_role(3, "backend"));
    assert!(g.leader_actions(m(1), 1, &min).is_some());
    assert!(g.members().all(|m| m.status == MemberStatus::Up));
}

/// A full gossip whose digest is known is measured from the length counted with the digest,
/// a seen set from the length it keeps; the frame measured is the frame `encode` writes, with
/// or without the digest, for the messages that carry a state or a seen set, whatever the
/// seen set (up to a two-byte count) and link number.
#[test]
fn a_gossip_frame_measured_from_its_digest_is_the_frame_written() {
    use crate::codec::{encode, frame_len};
    use crate::message::ClusterMessage;
    use crate::message::{Envelope, Message};

    let mut g = three_up();
    Arc::make_mut(&mut g.removed).insert(m(9));
    let many: Vec<MemberId> = (1..300).map(|n| m(n * 1_000)).collect();
    for seen in [vec![], vec![m(1)], vec![m(1), m(2), m(3)], many] {
        g.seen = seen.into_iter().collect::<BTreeSet<_>>().into();
        for digest_known in [false, true] {
            let mut state = g.clone();
            if digest_known {
                state.digest();
                assert!(state.encoded_len().is_some());
            } else {
                assert_eq!(state.encoded_len(), None);
            }
            let seen = ClusterMessage::GossipSeen {
                state: StateDigest(u64::MAX, 3),
                seen: state.seen.clone(),
                answer: digest_known,
            };
            let messages = [
                ClusterMessage::Gossip(Box::new(state.clone())),
                ClusterMessage::Welcome(Box::new(state)),
                seen,
            ];
            for (message, seq) in messages.into_iter().zip([1, 300_000, 5]) {
                let envelope = Envelope {
                    from: m(1),
                    to: m(2),
                    seq,
                    message: Message::Cluster(message),
                };
                let written = encode(&envelope).expect("fits").len();
                assert_eq!(frame_len(&envelope), Ok(written), "{envelope:?}");
            }
        }
    }
}

/// In-process copies of a state share one member map; the merge skips joining a map with
/// itself, but not when the other side removed one of its members.
#[test]
fn a_shared_member_map_still_loses_a_member_the_other_side_removed() {
    let base = three_up();
    let mut same = base.clone();
    same.reachability = Reachability::default();
    let mut removing = base.clone();
    Arc::make_mut(&mut removing.removed).insert(m(3));
    assert!(
        Arc::ptr_eq(&removing.members, &base.members),
        "still shared"
    );
    let mut mine = base.clone();
    assert_eq!(mine.receive(m(1), removing), Received::Merged);
    assert!(mine.member(m(3)).is_none() && mine.is_removed(m(3)));
    let mut again = base;
    assert_eq!(again.receive(m(1), same), Received::Same);
}
