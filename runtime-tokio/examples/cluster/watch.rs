//! What the harness's own node sees of the cluster: membership events with the time they
//! arrived, which the tour waits on (a fault's consequences, with a bound) and the summary
//! measures, and dead letters of the harness's node by reason.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use shoal::{MemberId, Node, NodeEvent};

/// A membership change the tour waits for.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub(crate) enum Change {
    Up,
    Unreachable,
    Reachable,
    Downed,
    Removed,
}

#[derive(Default)]
struct Seen {
    /// Every member change, in order of arrival.
    changes: Vec<(Instant, Change, MemberId)>,
    /// Where each member listens (from its Up event).
    addresses: BTreeMap<String, MemberId>,
    dead_letters: BTreeMap<String, u64>,
}

/// The harness node's view, filled by a background task.
#[derive(Clone, Default)]
pub(crate) struct Watch(Arc<Mutex<Seen>>);

impl Watch {
    /// Starts recording `node`'s events.
    pub(crate) fn start(node: &Node) -> Self {
        let watch = Self::default();
        let mut events = node.events();
        let recorder = watch.clone();
        tokio::spawn(async move {
            use tokio::sync::broadcast::error::RecvError;
            loop {
                match events.recv().await {
                    Ok(event) => recorder.record(event),
                    Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => return,
                }
            }
        });
        watch
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn record(&self, event: NodeEvent) {
        let now = Instant::now();
        let mut seen = self.seen();
        let change = match event {
            NodeEvent::MemberUp { member, address } => {
                if let Some(address) = address {
                    seen.addresses.insert(address.to_string(), member);
                }
                (Change::Up, member)
            }
            NodeEvent::MemberUnreachable { member } => (Change::Unreachable, member),
            NodeEvent::MemberReachable { member } => (Change::Reachable, member),
            NodeEvent::MemberDowned { member } => (Change::Downed, member),
            NodeEvent::MemberRemoved { member } => (Change::Removed, member),
            NodeEvent::Sharding(shoal::Event::DeadLetter { reason, .. }) => {
                *seen.dead_letters.entry(format!("{reason:?}")).or_default() += 1;
                return;
            }
            _ => return,
        };
        seen.changes.push((now, change.0, change.1));
    }

    /// The member listening at `address`, once it has been seen Up.
    pub(crate) fn member_at(&self, address: &str) -> Option<MemberId> {
        self.seen().addresses.get(address).copied()
    }

    /// When `member` first went through `change` at or after `since`.
    pub(crate) fn when(&self, change: Change, member: MemberId, since: Instant) -> Option<Instant> {
        self.seen()
            .changes
            .iter()
            .find(|(at, c, m)| *at >= since && *c == change && *m == member)
            .map(|(at, ..)| *at)
    }

    /// Waits (at most `bound`) for `member` to go through `change` at or after `since`: how
    /// long after `since` it did.
    pub(crate) async fn wait(
        &self,
        change: Change,
        member: MemberId,
        since: Instant,
        bound: Duration,
    ) -> Result<Duration, String> {
        let deadline = Instant::now() + bound;
        loop {
            if let Some(at) = self.when(change, member, since) {
                return Ok(at - since);
            }
            if Instant::now() >= deadline {
                return Err(format!("{member} never became {change:?} within {bound:?}"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The harness node's dead letters by reason.
    pub(crate) fn dead_letters(&self) -> BTreeMap<String, u64> {
        self.seen().dead_letters.clone()
    }
}
