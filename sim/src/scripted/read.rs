//! What a script reads back from its cluster: the trace and membership log, events and
//! replies, deliveries, which entity runs where, and what went over the wire.

use std::collections::BTreeMap;

use shoal_core::{CommandError, EntityId, EntityType, Event, NodeId, Payload, Reply, RequestId};

use super::{Cluster, TYPE};

impl Cluster {
    /// The readable trace: messages (unless `trace_network(false)`), entity effects, events
    /// and crashes, each stamped with virtual time.
    pub fn trace(&self) -> &[String] {
        &self.record.trace
    }

    /// Forgets the trace so far.
    pub fn clear_trace(&mut self) {
        self.record.trace.clear();
    }

    /// The membership log: each change of a member's status (and reachability) as each node
    /// saw it, members leaving the cluster, and the script's notes.
    pub fn membership_log(&self) -> &[String] {
        &self.membership_log
    }

    /// Forgets the membership log so far.
    pub fn clear_membership_log(&mut self) {
        self.membership_log.clear();
    }

    /// Adds a line to the membership log.
    pub fn note(&mut self, line: String) {
        self.membership_log.push(line);
    }

    /// Every event so far, with the node that emitted it.
    pub fn events(&self) -> &[(NodeId, Event)] {
        &self.record.events
    }

    /// Every answer to `request` so far, in order.
    pub fn replies(&self, request: RequestId) -> Vec<&Result<Reply, CommandError>> {
        (self.record.events.iter())
            .filter_map(|(_, e)| match e {
                Event::Reply { request: r, result } if *r == request => Some(result),
                _ => None,
            })
            .collect()
    }

    /// The first answer to `request`, if it arrived.
    pub fn reply(&self, request: RequestId) -> Option<&Result<Reply, CommandError>> {
        self.replies(request).into_iter().next()
    }

    /// The entities running, with their nodes.
    pub fn alive(&self) -> impl Iterator<Item = (u64, &EntityId)> + '_ {
        self.host.alive().map(|(n, e)| (n.0, e))
    }

    /// Entities running on node `n`.
    pub fn alive_on(&self, n: u64) -> Vec<String> {
        (self.alive())
            .filter(|(node, _)| *node == n)
            .map(|(_, e)| e.as_str().to_owned())
            .collect()
    }

    /// Payloads delivered to `entity` (as text), in order, with the node that received each.
    pub fn inbox(&self, entity: &str) -> Vec<(u64, String)> {
        (self.host.deliveries().iter())
            .filter(|(_, e, _)| e.as_str() == entity)
            .map(|(n, _, p)| (n.0, String::from_utf8_lossy(&p.0).into_owned()))
            .collect()
    }

    /// The payloads delivered to `entity`, in order, with the node that received each.
    pub fn received(&self, entity: &str) -> Vec<(u64, &Payload)> {
        (self.host.deliveries().iter())
            .filter(|(_, e, _)| e.as_str() == entity)
            .map(|(n, _, p)| (n.0, p))
            .collect()
    }

    /// How many entity incarnations started so far.
    pub fn starts(&self) -> u64 {
        self.host.starts()
    }

    /// How many dead letters the nodes reported.
    pub fn dead_letters(&self) -> usize {
        (self.record.events.iter())
            .filter(|(_, e)| matches!(e, Event::DeadLetter { .. }))
            .count()
    }

    /// The shards of [`TYPE`] each node hosts.
    pub fn hosting(&self) -> BTreeMap<u64, Vec<u32>> {
        let t = EntityType::new(TYPE);
        (self.nodes.iter())
            .map(|(id, d)| {
                (
                    id.0,
                    d.node().hosted_shards(&t).iter().map(|s| s.0).collect(),
                )
            })
            .collect()
    }

    /// Every id of [`TYPE`] the remember store holds, with the shard whose entry holds it, by
    /// shard.
    pub fn remembered(&self) -> Vec<(String, u32)> {
        self.store.remembered(&EntityType::new(TYPE))
    }

    /// Frames sent so far, and their bytes.
    pub fn wire(&self) -> (u64, u64) {
        self.network.sent()
    }
}
