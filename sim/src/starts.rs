//! `StartEntity` commands the clients issue, and what the checker demands of their answers:
//! each is answered exactly once, "started" only by the member where the entity then runs, and
//! every request whose requester still runs is answered by the end of the run.

use std::collections::BTreeMap;

use shoal_core::{CommandError, EntityId, Instant, MemberId, Reply, RequestId};

/// One start request in flight.
#[derive(Debug)]
struct Pending {
    requester: MemberId,
    entity: EntityId,
    sent: Instant,
}

/// The start requests of a run.
#[derive(Debug, Default)]
pub(crate) struct StartRequests {
    /// The next request id (the simulator's other commands use request 0).
    next: u64,
    pending: BTreeMap<RequestId, Pending>,
    /// Requests answered, and by which reply.
    answered: BTreeMap<RequestId, String>,
    /// Requests answered `EntityStarted` and failures, for the report.
    pub(crate) started: u64,
    pub(crate) failed: u64,
}

impl StartRequests {
    /// A new request from `requester` for `entity`; returns its id.
    pub(crate) fn send(
        &mut self,
        at: Instant,
        requester: MemberId,
        entity: &EntityId,
    ) -> RequestId {
        self.next += 1;
        let request = RequestId(self.next);
        let pending = Pending {
            requester,
            entity: entity.clone(),
            sent: at,
        };
        self.pending.insert(request, pending);
        request
    }

    /// Whether `request` is one of ours.
    pub(crate) fn is_start(&self, request: RequestId) -> bool {
        request.0 != 0 && request.0 <= self.next
    }

    /// `member` answered `request`; a violation's detail if the answer is wrong: a second
    /// answer, an answer from another member than the requester, or one about another entity.
    pub(crate) fn answer(
        &mut self,
        member: MemberId,
        request: RequestId,
        result: &Result<Reply, CommandError>,
    ) -> Result<(), String> {
        let Some(pending) = self.pending.remove(&request) else {
            let first = self.answered.get(&request).cloned().unwrap_or_default();
            return Err(format!(
                "{request} answered again by {member} with {result:?} (first: {first})"
            ));
        };
        self.answered.insert(request, format!("{result:?}"));
        if member != pending.requester {
            return Err(format!(
                "{request} of {} answered by {member}",
                pending.requester
            ));
        }
        let entity = match result {
            Ok(Reply::EntityStarted { entity, .. }) => {
                self.started += 1;
                entity
            }
            Err(
                CommandError::NotStarted { entity, .. } | CommandError::StartTimedOut { entity },
            ) => {
                self.failed += 1;
                entity
            }
            Err(CommandError::RegionStopped(_)) => {
                self.failed += 1;
                &pending.entity
            }
            other => return Err(format!("{request}: unexpected answer {other:?}")),
        };
        if *entity != pending.entity {
            return Err(format!(
                "{request} for {} answered about {entity}",
                pending.entity
            ));
        }
        Ok(())
    }

    /// Requests that were never answered although their requester still runs and their
    /// deadline passed long ago: `(entity, detail)`.
    pub(crate) fn unanswered(
        &self,
        now: Instant,
        deadline: std::time::Duration,
        running: impl Fn(MemberId) -> bool,
    ) -> Vec<(EntityId, String)> {
        self.pending
            .iter()
            .filter(|(_, p)| running(p.requester) && p.sent + deadline < now)
            .map(|(request, p)| {
                let detail = format!(
                    "{request} from {} at {} for {} never answered",
                    p.requester, p.sent, p.entity
                );
                (p.entity.clone(), detail)
            })
            .collect()
    }
}
