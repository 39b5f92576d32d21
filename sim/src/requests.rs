//! Commands and queries the clients issue (`StartEntity`, `GetEntityLocation`,
//! `GetClusterShardingStats`, `SetShardLocation`), and what the checker demands of their answers: each is answered
//! exactly once, by its requester, about what it asked; "started" only by the member where the
//! entity then runs; and every request whose requester still runs is answered by the end of
//! the run.

use std::collections::BTreeMap;
use std::time::Duration;

use shoal_core::{CommandError, EntityId, Instant, MemberId, Reply, RequestId, ShardId};

/// What a request asks.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Asked {
    /// `StartEntity`.
    Start(EntityId),
    /// `GetEntityLocation`.
    Locate(EntityId),
    /// `Explain`.
    Explain(EntityId),
    /// `SetShardLocation`.
    SetLocation(ShardId),
    /// `SetActiveEntityLimit`.
    SetLimit(usize),
    /// `GetClusterShardingStats`.
    Stats,
    /// `GetShardRegionState` (asked with each `Stats`, of the same member).
    RegionState,
}

/// One request in flight.
#[derive(Debug)]
struct Pending {
    requester: MemberId,
    asked: Asked,
    sent: Instant,
    /// The requester's process was paused since: its timers, and so its timeouts, ran late.
    delayed: bool,
}

/// How long a request waits for its answer before the requester gives up, and whether it may
/// be refused at once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timeouts {
    /// `shard_region_query_timeout`: a location; twice it for the coordinator's statistics.
    pub(crate) query: Duration,
    /// A start: a handoff, a passivation and a query's round trip.
    pub(crate) start: Duration,
    /// The requester's region stopped for good (its member was downed): it refuses starts.
    pub(crate) stopped: bool,
}

impl Timeouts {
    /// The timeouts of `settings`, for a requester whose region `stopped` or not.
    pub(crate) fn of(settings: &shoal_core::ShardingSettings, stopped: bool) -> Self {
        let s = settings;
        Self {
            query: s.shard_region_query_timeout,
            start: s.handoff_timeout + s.passivation_stop_timeout + s.shard_region_query_timeout,
            stopped,
        }
    }
}

/// The client requests of a run.
#[derive(Debug, Default)]
pub(crate) struct ClientRequests {
    /// The next request id (the simulator's other commands use request 0).
    next: u64,
    pending: BTreeMap<RequestId, Pending>,
    /// Requests answered, and by which reply.
    answered: BTreeMap<RequestId, String>,
}

impl ClientRequests {
    /// A new request from `requester`; returns its id.
    pub(crate) fn send(&mut self, at: Instant, requester: MemberId, asked: Asked) -> RequestId {
        self.next += 1;
        let request = RequestId(self.next);
        let pending = Pending {
            requester,
            asked,
            sent: at,
            delayed: false,
        };
        self.pending.insert(request, pending);
        request
    }

    /// Whether `request` is one of ours.
    pub(crate) fn is_ours(&self, request: RequestId) -> bool {
        request.0 != 0 && request.0 <= self.next
    }

    /// `member`'s process was paused: its requests' timeouts may fire late.
    pub(crate) fn paused(&mut self, member: MemberId) {
        for pending in self.pending.values_mut() {
            pending.delayed |= pending.requester == member;
        }
    }

    /// When `request` was sent, while it waits for its answer.
    pub(crate) fn sent_at(&self, request: RequestId) -> Option<Instant> {
        self.pending.get(&request).map(|p| p.sent)
    }

    /// Whether `request` of `requester` still waits for its answer.
    pub(crate) fn awaits(&self, request: RequestId, requester: MemberId) -> bool {
        self.pending
            .get(&request)
            .is_some_and(|p| p.requester == requester)
    }

    /// `member` answered `request` at `now`; a violation's detail if the answer is wrong: a
    /// second answer, an answer from another member than the requester, one about something
    /// else than was asked, an answer the request does not allow, or statistics that gave up
    /// on a region before `query_timeout` passed (or list it as answered and failed), or a
    /// timeout given up before its deadline or after it (a requester that was not paused wakes
    /// for it).
    pub(crate) fn answer(
        &mut self,
        now: Instant,
        timeouts: Timeouts,
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
        let query_timeout = timeouts.query;
        let waited = match (&pending.asked, result) {
            (Asked::Start(_), Err(CommandError::StartTimedOut { .. })) => Some(timeouts.start),
            (Asked::Locate(_) | Asked::Explain(_), Err(CommandError::QueryTimedOut { .. })) => {
                Some(query_timeout)
            }
            (Asked::Stats, Err(CommandError::QueryTimedOut { .. })) => Some(query_timeout * 2),
            _ => None,
        };
        if let Some(waited) = waited {
            // On the requester's clock, which may run up to 0.1 % fast or slow.
            let slack = waited / 500 + Duration::from_millis(1);
            let early = now + slack < pending.sent + waited;
            let late = !pending.delayed && now > pending.sent + waited + slack;
            if early || late {
                return Err(format!(
                    "{request} ({:?}) sent at {} timed out at {now}, after {waited:?}",
                    pending.asked, pending.sent
                ));
            }
        }
        let about = match (&pending.asked, result) {
            (
                Asked::Start(_),
                Ok(Reply::EntityStarted { entity, .. })
                | Err(
                    CommandError::NotStarted { entity, .. }
                    | CommandError::StartTimedOut { entity },
                ),
            )
            | (Asked::Locate(_), Ok(Reply::EntityLocation { entity, .. })) => Some(entity),
            (Asked::Explain(_), Ok(Reply::Explanation(explanation))) => Some(&explanation.entity),
            (Asked::Start(_), Err(CommandError::RegionStopped(_))) if timeouts.stopped => None,
            (Asked::Locate(_) | Asked::Explain(_), Err(CommandError::QueryTimedOut { .. })) => None,
            (Asked::SetLocation(_) | Asked::SetLimit(_), Ok(Reply::Accepted))
            | (Asked::RegionState, Ok(Reply::ShardRegionState { .. })) => None,
            (Asked::Stats, Ok(Reply::ClusterShardingStats { regions, failed })) => {
                // Measured on the coordinator's clock, which may run up to 0.1 % fast.
                let least = query_timeout - query_timeout / 100;
                let early = !failed.is_empty() && now < pending.sent + least;
                let both = failed
                    .iter()
                    .any(|f| regions.iter().any(|r| r.region == *f));
                if early || both {
                    return Err(format!(
                        "{request} sent at {}: statistics of {regions:?} with {failed:?} failed",
                        pending.sent
                    ));
                }
                None
            }
            (
                Asked::Stats,
                Err(CommandError::QueryTimedOut { .. } | CommandError::NoCoordinator(_)),
            ) => None,
            (asked, other) => {
                return Err(format!(
                    "{request} ({asked:?}): unexpected answer {other:?}"
                ));
            }
        };
        match (&pending.asked, about) {
            (Asked::Start(asked) | Asked::Locate(asked) | Asked::Explain(asked), Some(entity))
                if asked != entity =>
            {
                Err(format!("{request} about {asked} answered about {entity}"))
            }
            _ => Ok(()),
        }
    }

    /// Requests that were never answered although their requester still runs and their
    /// deadline passed long ago: `(subject, detail)`.
    pub(crate) fn unanswered(
        &self,
        now: Instant,
        deadline: Duration,
        running: impl Fn(MemberId) -> bool,
    ) -> Vec<(String, String)> {
        self.pending
            .iter()
            .filter(|(_, p)| running(p.requester) && p.sent + deadline < now)
            .map(|(request, p)| {
                let detail = format!(
                    "{request} from {} at {} ({:?}) never answered",
                    p.requester, p.sent, p.asked
                );
                let subject = match &p.asked {
                    Asked::Start(e) | Asked::Locate(e) | Asked::Explain(e) => e.to_string(),
                    Asked::SetLocation(shard) => format!("{shard}"),
                    Asked::SetLimit(limit) => format!("limit {limit}"),
                    Asked::Stats => "statistics".to_owned(),
                    Asked::RegionState => "region state".to_owned(),
                };
                (subject, detail)
            })
            .collect()
    }
}
