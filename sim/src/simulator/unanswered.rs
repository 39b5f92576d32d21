//! A region whose coordinator does not answer warns: from the retry tick on which its requests
//! have gone unanswered [`WARN_AFTER`] times, every tick while it holds letters. The simulator
//! counts those requests from what the region sent and received, judges every warning true
//! (letters held, enough requests unanswered, naming the member they went to) and fails a run
//! where an owed warning did not come. Registrations keep Akka's backoff: never sooner than the
//! initial backoff's jitter allows, and retried within the retry interval until acknowledged.

use std::time::Duration;

use shoal_core::{Body, Envelope, MemberId, NodeId};

use crate::check::Property;
use crate::unanswered::WARN_AFTER;

use super::Simulator;

/// What a region's warning says.
pub(super) struct Warning {
    pub(super) coordinator: Option<MemberId>,
    pub(super) registered: bool,
    pub(super) attempts: u32,
    pub(super) buffered: u32,
}

impl Simulator {
    /// `envelope` left: counted if it is a region's request to its coordinator.
    pub(super) fn note_coordinator_request(&mut self, envelope: &Envelope) {
        // Every envelope sent passes here: look no further than the body for all others.
        let Some(body @ (Body::GetShardHome { .. } | Body::Register { .. } | Body::RegisterProxy)) =
            envelope.message.body()
        else {
            return;
        };
        let interval = self.settings.retry_interval;
        let Some(node) = self.nodes.get_mut(&envelope.from.node) else {
            return;
        };
        let local = node.clock.local(self.now);
        match body {
            Body::GetShardHome { shard } => {
                let rounds = node.unanswered.asked(local, envelope.to, *shard, interval);
                if rounds > WARN_AFTER {
                    self.mark("a region's shard-home requests went unanswered for six ticks");
                }
            }
            Body::Register { .. } | Body::RegisterProxy => {
                let proxy = *body == Body::RegisterProxy;
                // Akka's initial backoff, written here rather than taken from the region, so
                // that a region computing it wrongly is caught.
                let initial = (interval / 8).max(Duration::from_millis(100));
                let registered = node
                    .unanswered
                    .registered_to(local, envelope.to, proxy, initial);
                if let Err(gap) = registered {
                    let (from, to) = (envelope.from, envelope.to);
                    let detail = format!(
                        "{from} registered with {to} again after {gap:?}, sooner than its \
                         initial backoff ({initial:?}) allows"
                    );
                    self.check
                        .fail(self.now, Property::CoreInvariant, from, detail);
                }
            }
            _ => {}
        }
    }

    /// `envelope` reached node `n`: an answer ends the region's unanswered requests.
    pub(super) fn note_coordinator_answer(&mut self, n: NodeId, envelope: &Envelope) {
        let body = envelope.message.body();
        // Hosting a shard takes its letters out of the buffers without a home answered.
        let homes = matches!(
            body,
            Some(Body::ShardHome { .. } | Body::ShardHomes { .. } | Body::HostShard { .. })
        );
        let request = body == Some(&Body::RegisterRequest);
        if !(homes || request) {
            return;
        }
        if let Some(node) = self.nodes.get_mut(&n) {
            match homes {
                true => node.unanswered.homes_answered(),
                false => node.unanswered.register_requested(),
            }
        }
    }

    /// Node `n`'s region registered: its counts start again.
    pub(super) fn coordinator_counts_reset(&mut self, n: NodeId) {
        if let Some(node) = self.nodes.get_mut(&n) {
            node.unanswered.reset();
        }
    }

    /// Node `n`'s view changed: if it names another coordinator for the type, the region's
    /// counts and backoff start again (as the region's own do, then only).
    pub(super) fn coordinator_view_changed(&mut self, n: NodeId) {
        if let Some(node) = self.nodes.get_mut(&n) {
            let coordinator = node.driver.node().view().coordinator_of(&self.ty, None);
            node.unanswered.coordinator_named(coordinator);
        }
    }

    /// Judges a warning of node `n`'s region: letters held, at least [`WARN_AFTER`] requests
    /// unanswered, and, once registered with a coordinator on another node, asked for on this
    /// very tick of the member named.
    pub(super) fn check_coordinator_warning(&mut self, n: NodeId, member: MemberId, w: Warning) {
        let Some(node) = self.nodes.get_mut(&n) else {
            return;
        };
        let local = node.clock.local(self.now);
        node.unanswered.warned(local);
        let asked_now = node.unanswered.asked_at(local);
        let last_to = node.unanswered.last_to();
        let terminated = node.region_terminated(&self.ty);
        let mut wrong = Vec::new();
        if w.buffered == 0 {
            wrong.push("while holding no letters".to_string());
        }
        if w.attempts < WARN_AFTER {
            wrong.push(format!("after {} attempts", w.attempts));
        }
        if terminated {
            wrong.push("after its region stopped for good".to_string());
        }
        // A region asks a coordinator on its own node without a message: unseen here.
        let remote = w.coordinator.is_some_and(|c| c != member);
        if remote && w.registered && !asked_now {
            wrong.push("registered, on a tick that asked for no shard".to_string());
        }
        if remote && w.coordinator != last_to {
            wrong.push(format!(
                "naming {:?}, but it asked {last_to:?}",
                w.coordinator
            ));
        }
        if wrong.is_empty() {
            return;
        }
        let detail = format!(
            "{member} warned that its coordinator does not answer {}",
            wrong.join("; ")
        );
        self.check
            .fail(self.now, Property::CoreInvariant, member, detail);
    }

    /// After a call of node `n`, which holds `buffered` letters: a region whose shard-home
    /// requests went unanswered on more than [`WARN_AFTER`] ticks in a row must have warned on
    /// this one (the first ask counted may have followed a tick that asked nothing, in the same
    /// call). After a wakeup (`woke`, which fires due timers): one whose registrations went
    /// unanswered [`WARN_AFTER`] times and that held letters for a whole retry interval since
    /// must have warned in it, and one its coordinator has not acknowledged retries within its
    /// retry interval.
    pub(super) fn check_coordinator_warned(
        &mut self,
        n: NodeId,
        member: MemberId,
        buffered: usize,
        woke: bool,
    ) {
        let interval = self.settings.retry_interval;
        let Some(node) = self.nodes.get_mut(&n) else {
            return;
        };
        let local = node.clock.local(self.now);
        let rounds = node.unanswered.rounds_at(local);
        let unwarned = !node.unanswered.warned_at(local);
        let overdue = node
            .unanswered
            .registration_warning_overdue(local, buffered, woke, interval);
        let owes = node.unanswered.owes_warning();
        // Still unacknowledged by the coordinator its view names (on another node): it retries.
        let coordinator = node.unanswered.last_to();
        let retry_overdue = (woke && !node.region_terminated(&self.ty))
            .then(|| node.unanswered.registration_retry_overdue(local, interval))
            .flatten()
            .filter(|_| {
                coordinator.is_some_and(|c| c != member)
                    && node.driver.node().view().coordinator_of(&self.ty, None) == coordinator
            });
        if owes {
            self.mark("a region held letters with five registrations unanswered");
        }
        let detail = if rounds > WARN_AFTER && unwarned {
            format!("{member} asked for shard homes on {rounds} ticks unanswered, but did not warn")
        } else if let Some(since) = overdue {
            format!(
                "{member} has held letters with {WARN_AFTER} registrations unanswered since \
                 {since} (local), but did not warn on its retry tick"
            )
        } else if let Some(since) = retry_overdue {
            format!(
                "{member} last registered with {coordinator:?} at {since} (local), \
                 unacknowledged, and has not retried within its retry interval"
            )
        } else {
            return;
        };
        self.check
            .fail(self.now, Property::CoreInvariant, member, detail);
    }
}
