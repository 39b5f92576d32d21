//! Whether a member is ready for traffic, in the sense of Akka Management's sharding health
//! check: it is Up and not leaving, and for every entity type its region (or proxy) has
//! registered with the type's coordinator. Whether that coordinator allocates shards (its
//! allocation gate is open) is known here only where it runs on this member; a host asks the
//! others (`Command::GetCoordinatorState`) to complete the answer. A host serves readiness as
//! a call and an HTTP endpoint; the node reports changes of what it knows itself as
//! [`Event::ReadinessChanged`].

use serde::{Deserialize, Serialize};

use super::{Node, TypeRoles};
use crate::effect::Event;
use crate::id::{EntityType, MemberId};
use crate::members::MemberStatus;

/// A member's readiness, with what it is made of.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
pub struct Readiness {
    /// The member.
    pub member: MemberId,
    /// Its status in its own view (`None` before it is in one).
    pub status: Option<MemberStatus>,
    /// Whether it was asked to leave.
    pub leaving: bool,
    /// Each entity type's part, in type order.
    pub types: Vec<TypeReadiness>,
}

/// One entity type's part in a member's readiness.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
pub struct TypeReadiness {
    /// The type.
    pub entity_type: EntityType,
    /// The coordinator its region registers with, once the view names one.
    pub coordinator: Option<MemberId>,
    /// Whether the region (or proxy) registered with it.
    pub registered: bool,
    /// Whether that coordinator allocates shards (its allocation gate is open): known by the
    /// node only when the coordinator runs on this member; a host fills in the others.
    pub allocating: Option<bool>,
}

impl Readiness {
    /// Whether the member is ready for traffic: every part says so, and no type's
    /// coordinator is known not to allocate (an unknown gate is not held against it).
    pub fn is_ready(&self) -> bool {
        self.waiting_for().is_none()
    }

    /// What it waits for, in words, or `None` when it is ready.
    pub fn waiting_for(&self) -> Option<String> {
        if self.leaving {
            return Some("leaving".into());
        }
        match self.status {
            Some(MemberStatus::Up) => {}
            Some(status) => return Some(format!("member is {status:?}, not Up")),
            None => return Some("not in a membership view yet".into()),
        }
        let t = self.types.iter().find(|t| t.waits())?;
        let ty = &t.entity_type;
        Some(match (t.coordinator, t.registered) {
            (None, _) => format!("{ty}: no coordinator known"),
            (Some(c), false) => format!("{ty}: not registered with the coordinator at {c}"),
            (Some(c), true) => format!("{ty}: the coordinator at {c} does not allocate yet"),
        })
    }
}

impl TypeReadiness {
    /// The type's part as this node knows it.
    fn of(t: &TypeRoles) -> Self {
        let (coordinator, registered) = t.region.registration_state();
        Self {
            entity_type: t.config.name.clone(),
            coordinator,
            registered,
            allocating: t.coordinator.as_ref().map(|c| c.is_allocating()),
        }
    }

    /// Whether the member waits for this type: not registered, or its gate known closed (an
    /// unknown gate is not held against it).
    fn waits(&self) -> bool {
        !self.registered || self.allocating == Some(false)
    }
}

impl Node {
    /// This member's readiness as far as it knows it (see the module docs).
    pub fn readiness(&self) -> Readiness {
        // In name order, as the table keeps them.
        let types = self.types.values().map(TypeReadiness::of).collect();
        Readiness {
            member: self.me,
            status: self.view.member(self.me).map(|m| m.status),
            leaving: self.leaving,
            types,
        }
    }

    /// [`Readiness::is_ready`] of [`Node::readiness`], without building the report.
    fn is_ready(&self) -> bool {
        !self.leaving
            && (self.view.member(self.me)).is_some_and(|m| m.status == MemberStatus::Up)
            && self.types.values().all(|t| !TypeReadiness::of(t).waits())
    }

    /// Emits [`Event::ReadinessChanged`] if readiness changed since the last call.
    pub(super) fn note_readiness(&mut self) {
        let ready = self.is_ready();
        if ready != self.ready {
            self.ready = ready;
            crate::probe::hit(if ready {
                "node: the member became ready"
            } else {
                "node: a ready member stopped being ready"
            });
            self.effects.event(Event::ReadinessChanged { ready });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(status: Option<MemberStatus>, leaving: bool, types: Vec<TypeReadiness>) -> Readiness {
        Readiness {
            member: MemberId::new(1, 1),
            status,
            leaving,
            types,
        }
    }

    fn counter(registered: bool, allocating: Option<bool>) -> TypeReadiness {
        TypeReadiness {
            entity_type: EntityType::new("counter"),
            coordinator: Some(MemberId::new(2, 1)),
            registered,
            allocating,
        }
    }

    #[test]
    fn ready_only_when_up_not_leaving_registered_and_no_gate_known_closed() {
        let up = Some(MemberStatus::Up);
        assert!(report(up, false, vec![counter(true, Some(true))]).is_ready());
        assert!(
            report(up, false, vec![counter(true, None)]).is_ready(),
            "a remote gate the node does not know is not held against it"
        );
        let cases = [
            (report(up, true, vec![counter(true, Some(true))]), "leaving"),
            (
                report(Some(MemberStatus::Joining), false, vec![]),
                "member is Joining, not Up",
            ),
            (report(None, false, vec![]), "not in a membership view yet"),
            (
                report(up, false, vec![counter(false, None)]),
                "counter: not registered with the coordinator at n2#1",
            ),
            (
                report(up, false, vec![counter(true, Some(false))]),
                "counter: the coordinator at n2#1 does not allocate yet",
            ),
        ];
        for (readiness, why) in cases {
            assert!(!readiness.is_ready());
            assert_eq!(readiness.waiting_for().as_deref(), Some(why));
        }
    }
}
