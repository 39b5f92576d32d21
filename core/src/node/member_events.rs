//! What changed for each member between two views, told as events (as foca's notifications
//! name the member they are about): up, unreachable, reachable, downed, removed. Every host
//! reports these; none has to diff views itself.

use crate::effect::{Effects, Event};
use crate::members::{Member, MemberStatus, MembershipView};

/// Emits the events between `old` and `new`, in member order. Both views are sorted by id,
/// so one merge walk finds every change (building the view walked every member already).
pub(super) fn emit_member_changes(old: &MembershipView, new: &MembershipView, out: &mut Effects) {
    let (mut before, mut after) = (
        old.members().iter().peekable(),
        new.members().iter().peekable(),
    );
    loop {
        match (before.peek(), after.peek()) {
            (Some(b), Some(a)) if b.id == a.id => {
                changed(Some(b), a, out);
                before.next();
                after.next();
            }
            (Some(b), Some(a)) if b.id < a.id => {
                removed(b, out);
                before.next();
            }
            (_, Some(a)) => {
                changed(None, a, out);
                after.next();
            }
            (Some(b), None) => {
                removed(b, out);
                before.next();
            }
            (None, None) => break,
        }
    }
}

/// The events of a member still (or newly) in the view: `before` is what the old view said.
fn changed(before: Option<&Member>, now: &Member, out: &mut Effects) {
    if before.is_some_and(|b| b.status == now.status && b.reachable == now.reachable) {
        return;
    }
    let (member, address) = (now.id, now.address.clone());
    let was = |status| before.is_some_and(|b| b.status == status);
    if now.status == MemberStatus::Up && !was(MemberStatus::Up) {
        out.event(Event::MemberUp {
            member,
            address: address.clone(),
        });
    }
    if now.status == MemberStatus::Down && !was(MemberStatus::Down) {
        out.event(Event::MemberDowned {
            member,
            address: address.clone(),
        });
    }
    // A member first seen counts as reachable before: only losing it is news.
    let was_reachable = before.is_none_or(|b| b.reachable);
    if was_reachable && !now.reachable {
        out.event(Event::MemberUnreachable { member, address });
    } else if !was_reachable && now.reachable {
        out.event(Event::MemberReachable { member, address });
    }
}

fn removed(before: &Member, out: &mut Effects) {
    out.event(Event::MemberRemoved {
        member: before.id,
        address: before.address.clone(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::effect::Effect;
    use crate::id::{Address, MemberId};

    fn member(id: u64, status: MemberStatus, reachable: bool) -> Member {
        let mut m = Member::up(MemberId::new(id, 1), id, &[]);
        m.status = status;
        m.reachable = reachable;
        m.address = Some(Address::new(format!("10.0.0.{id}:2552")));
        m
    }

    fn changes(old: &MembershipView, new: &MembershipView) -> Vec<Event> {
        let mut out = Effects::new(MemberId::new(9, 1));
        emit_member_changes(old, new, &mut out);
        out.take()
            .into_iter()
            .map(|effect| match effect {
                Effect::Event(event) => event,
                other => panic!("only events expected, got {other:?}"),
            })
            .collect()
    }

    #[test]
    fn view_changes_become_member_events_once_each() {
        let address = |id: u64| Some(Address::new(format!("10.0.0.{id}:2552")));
        let (m1, m2) = (MemberId::new(1, 1), MemberId::new(2, 1));
        let first = MembershipView::new(vec![
            member(1, MemberStatus::Up, true),
            member(2, MemberStatus::Joining, true),
        ]);
        let up1 = Event::MemberUp {
            member: m1,
            address: address(1),
        };
        assert_eq!(changes(&MembershipView::default(), &first), vec![up1]);
        assert_eq!(changes(&first, &first), vec![], "no change, no event");
        let second = MembershipView::new(vec![
            member(1, MemberStatus::Up, false),
            member(2, MemberStatus::Up, true),
        ]);
        assert_eq!(
            changes(&first, &second),
            vec![
                Event::MemberUnreachable {
                    member: m1,
                    address: address(1)
                },
                Event::MemberUp {
                    member: m2,
                    address: address(2)
                },
            ]
        );
        let third = MembershipView::new(vec![
            member(1, MemberStatus::Down, false),
            member(2, MemberStatus::Up, true),
        ]);
        assert_eq!(
            changes(&second, &third),
            vec![Event::MemberDowned {
                member: m1,
                address: address(1)
            }]
        );
        let fourth = MembershipView::new(vec![member(2, MemberStatus::Up, true)]);
        assert_eq!(
            changes(&third, &fourth),
            vec![Event::MemberRemoved {
                member: m1,
                address: address(1)
            }]
        );
        let fifth = MembershipView::new(vec![member(2, MemberStatus::Up, false)]);
        let sixth = MembershipView::new(vec![member(2, MemberStatus::Up, true)]);
        assert_eq!(
            changes(&fifth, &sixth),
            vec![Event::MemberReachable {
                member: m2,
                address: address(2)
            }]
        );
    }
}
