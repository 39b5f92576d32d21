//! Asks: an entity answers some of the messages it is delivered with an application message
//! to the member that sent them (`Input::SendApp`, as the runtime's `ask` replies). The
//! checker demands that a reply reaches only the incarnation that asked, at most once, and,
//! in a run where nothing was lost, that every reply to an asker still running arrives or is
//! dead-lettered with its reason.

use std::collections::BTreeMap;

use shoal_core::{EntityId, MemberId, Payload};

/// A reply: who asked, which of its messages, to which entity.
type Key = (MemberId, u64, EntityId);

/// The replies of a run.
#[derive(Debug, Default)]
pub(crate) struct Asks {
    /// Replies sent, and whether each was accounted for (arrived or dead-lettered).
    sent: BTreeMap<Key, bool>,
    /// Replies that arrived, for the report.
    pub(crate) answered: u64,
}

impl Asks {
    /// The reply `entity` sends to the message `payload` (a workload payload): its asker and
    /// the reply's payload. `None` when the payload is not the workload's.
    pub(crate) fn reply(
        &mut self,
        entity: &EntityId,
        payload: &Payload,
    ) -> Option<(MemberId, Payload)> {
        let (asker, seq) = crate::check::decode(payload)?;
        let mut bytes = payload.0.clone();
        bytes.extend(entity.as_str().as_bytes());
        self.sent.insert((asker, seq, entity.clone()), false);
        Some((asker, Payload(bytes)))
    }

    /// A reply arrived at `member`; a violation's detail if it should not have.
    pub(crate) fn arrived(&mut self, member: MemberId, payload: &Payload) -> Option<String> {
        let Some(key) = key_of(payload) else {
            return Some(format!("{member} got an application message nobody sent"));
        };
        if key.0 != member {
            return Some(format!("a reply for {} reached {member}", key.0));
        }
        match self.sent.get_mut(&key) {
            None => Some(format!("{member} got a reply to seq {} nobody sent", key.1)),
            Some(true) => Some(format!("{member} got the reply to seq {} twice", key.1)),
            Some(accounted) => {
                *accounted = true;
                self.answered += 1;
                None
            }
        }
    }

    /// A reply was dead-lettered by the member sending it (its asker is gone, say).
    pub(crate) fn dead_lettered(&mut self, payload: &Payload) {
        if let Some(accounted) = key_of(payload).and_then(|key| self.sent.get_mut(&key)) {
            *accounted = true;
        }
    }

    /// Replies neither arrived nor dead-lettered whose asker still runs (`running`).
    pub(crate) fn unanswered(&self, running: impl Fn(MemberId) -> bool) -> Vec<(EntityId, String)> {
        self.sent
            .iter()
            .filter(|((asker, ..), accounted)| !**accounted && running(*asker))
            .map(|((asker, seq, entity), _)| {
                let detail = format!("the reply to {asker}'s seq {seq} never arrived");
                (entity.clone(), detail)
            })
            .collect()
    }
}

/// The key a reply's payload names: the workload payload it answers, then the entity.
fn key_of(payload: &Payload) -> Option<Key> {
    let (asker, seq) = crate::check::decode(payload)?;
    let entity = std::str::from_utf8(payload.0.get(24..)?).ok()?;
    Some((asker, seq, EntityId::new(entity)))
}
