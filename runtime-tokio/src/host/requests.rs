//! The host's table of requests awaiting an answer: commands and queries sent into the node
//! (answered by `Event::Reply`) and asks awaiting an entity's reply. Synchronous and
//! clock-free: the host passes the time in, so the table is unit-tested without a runtime.
//!
//! Each request holds what answers it (`T`: in the host a oneshot sender) and a deadline; a
//! request is answered at most once: by its reply, or by its deadline passing, whichever comes
//! first; a late reply finds nothing and is counted.

use std::collections::{BTreeMap, BTreeSet};

use shoal_core::{Instant, RequestId};

/// Requests awaiting an answer.
#[derive(Debug)]
pub(crate) struct Requests<T> {
    next: u64,
    pending: BTreeMap<RequestId, (Instant, T)>,
    /// `(deadline, request)`, to find the expired ones without a scan.
    deadlines: BTreeSet<(Instant, RequestId)>,
    /// Replies that arrived after their request had been answered or had expired.
    late: u64,
}

impl<T> Default for Requests<T> {
    fn default() -> Self {
        Self {
            next: 0,
            pending: BTreeMap::new(),
            deadlines: BTreeSet::new(),
            late: 0,
        }
    }
}

impl<T> Requests<T> {
    /// Records a request answered through `answer` by `deadline`; returns its id (never 0,
    /// never reused).
    pub(crate) fn insert(&mut self, deadline: Instant, answer: T) -> RequestId {
        self.next += 1;
        let id = RequestId(self.next);
        self.pending.insert(id, (deadline, answer));
        self.deadlines.insert((deadline, id));
        id
    }

    /// The reply to `id` arrived: what answers it, if it still waits.
    pub(crate) fn complete(&mut self, id: RequestId) -> Option<T> {
        let Some((deadline, answer)) = self.pending.remove(&id) else {
            self.late += 1;
            return None;
        };
        self.deadlines.remove(&(deadline, id));
        Some(answer)
    }

    /// Takes every request whose deadline is at or before `now`, earliest first.
    pub(crate) fn expire(&mut self, now: Instant) -> Vec<(RequestId, T)> {
        let mut expired = Vec::new();
        while let Some(&(deadline, id)) = self.deadlines.first() {
            if deadline > now {
                break;
            }
            self.deadlines.pop_first();
            if let Some((_, answer)) = self.pending.remove(&id) {
                expired.push((id, answer));
            }
        }
        expired
    }

    /// The earliest deadline of a waiting request.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|&(deadline, _)| deadline)
    }

    /// Requests waiting.
    pub(crate) fn len(&self) -> usize {
        self.pending.len()
    }

    /// Replies that found their request already answered or expired.
    pub(crate) fn late_replies(&self) -> u64 {
        self.late
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn each_request_is_answered_once_by_its_reply_or_its_deadline() {
        let mut r = Requests::default();
        let a = r.insert(at(300), "a");
        let b = r.insert(at(100), "b");
        let c = r.insert(at(200), "c");
        assert!(a != b && b != c && a.0 != 0, "distinct, never 0");
        assert_eq!(r.next_deadline(), Some(at(100)));

        assert_eq!(r.complete(c), Some("c"));
        assert_eq!(r.complete(c), None, "answered once");
        assert_eq!(r.late_replies(), 1);
        assert_eq!(r.next_deadline(), Some(at(100)));

        assert!(r.expire(at(99)).is_empty(), "not before the deadline");
        assert_eq!(r.expire(at(100)), [(b, "b")], "at the deadline");
        assert_eq!(r.complete(b), None, "a reply after expiry is late");
        assert_eq!(r.next_deadline(), Some(at(300)));
        assert_eq!(r.len(), 1);

        assert_eq!(r.expire(at(1_000)), [(a, "a")]);
        assert_eq!(r.len(), 0);
        assert_eq!(r.next_deadline(), None);
        assert_eq!(r.late_replies(), 2);
    }

    #[test]
    fn expiry_comes_earliest_first_and_ids_are_not_reused() {
        let mut r = Requests::default();
        let ids: Vec<RequestId> = [50, 10, 30, 10]
            .iter()
            .map(|&ms| r.insert(at(ms), ms))
            .collect();
        let expired: Vec<u64> = r.expire(at(60)).into_iter().map(|(_, v)| v).collect();
        assert_eq!(expired, [10, 10, 30, 50]);
        let next = r.insert(at(70), 70);
        assert!(ids.iter().all(|&id| id < next), "ids keep growing");
    }
}
