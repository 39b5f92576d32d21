//! Queries between regions are answered as soon as they can be: a region asked where an entity
//! lives answers in the same call, and a region that receives the answer to a client's query
//! still waiting relays it in the same call. Without this a query that reached its member, or
//! whose answer came back, could still end in a timeout, which the client checks accept (a
//! timeout is a legitimate answer when messages are lost).

use shoal_core::{Body, Envelope, MemberId, Metrics, NodeId, RequestId};

use crate::check::Property;

use super::Simulator;

/// What a delivered envelope obliges its receiver to do within the call that handles it.
pub(super) struct Owed {
    /// The receiving member.
    member: MemberId,
    /// Node-level drops before the call (misaddressed, duplicate, stale or fenced envelopes):
    /// an envelope the node dropped owes nothing.
    drops: u64,
    /// `EntityLocated` sent so far, by every member (see [`Simulator::located_sent`]).
    located_mark: usize,
    what: Duty,
}

enum Duty {
    /// Answer `LocateEntity` `request` to `asker`.
    Locate { asker: MemberId, request: RequestId },
    /// Relay the answer to the client's `request`.
    Relay { request: RequestId },
}

/// Envelopes a node dropped before any role saw them.
fn node_drops(metrics: &Metrics) -> u64 {
    metrics.misaddressed
        + metrics.duplicates
        + metrics.from_older_incarnation
        + metrics.unknown_entity_type
        + metrics.fenced
}

impl Simulator {
    /// What `envelope`, about to reach node `n`, obliges it to do in that call.
    pub(super) fn answer_owed(&self, n: NodeId, envelope: &Envelope) -> Option<Owed> {
        let what = match envelope.message.body()? {
            Body::LocateEntity { request, .. } => Duty::Locate {
                asker: envelope.from,
                request: *request,
            },
            Body::EntityLocated { request, .. }
            | Body::ClusterShardingStats { request, .. }
            | Body::StartEntityAck { request, .. }
            | Body::CurrentRegions { request, .. }
            | Body::CoordinatorState { request, .. }
                if self.requests.awaits(*request, envelope.to) =>
            {
                Duty::Relay { request: *request }
            }
            _ => return None,
        };
        let node = self.nodes.get(&n)?;
        Some(Owed {
            member: node.id,
            drops: node_drops(node.driver.node().metrics()),
            located_mark: self.located_sent.len(),
            what,
        })
    }

    /// `member` answered a `LocateEntity` of `asker`.
    pub(super) fn note_located(&mut self, member: MemberId, asker: MemberId, request: RequestId) {
        self.located_sent.push((member, asker, request));
    }

    /// After the call of node `n` that handled an envelope: what it owed is done, unless the
    /// node dropped the envelope or its region stopped for good.
    pub(super) fn check_answered(&mut self, n: NodeId, owed: Owed) {
        let sent: Vec<_> = self.located_sent.drain(owed.located_mark..).collect();
        let Some(node) = self.nodes.get(&n) else {
            return;
        };
        let state = node.driver.node();
        let terminated = node.region_terminated(&self.ty);
        if node.id != owed.member || terminated || node_drops(state.metrics()) != owed.drops {
            return;
        }
        let member = owed.member;
        let detail = match owed.what {
            Duty::Locate { asker, request } => {
                if sent.contains(&(member, asker, request)) {
                    return;
                }
                format!(
                    "{member} was asked by {asker} where an entity lives ({request}) and did not answer"
                )
            }
            Duty::Relay { request } => {
                if !self.requests.awaits(request, member) {
                    return;
                }
                format!("{member} received the answer to {request} and did not relay it")
            }
        };
        self.check
            .fail(self.now, Property::CoreInvariant, member, detail);
    }
}
