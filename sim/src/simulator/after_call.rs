//! What a node must show after every driver call: its buffers within the cap and empty once its
//! region stopped for good, route counts that match what it sent and delivered, and no busy
//! loop.

use shoal_core::{MemberId, NodeId};

use crate::check::Property;

use super::Simulator;

impl Simulator {
    /// Judges node `n` (member `member`) after a driver call.
    pub(super) fn check_after_call(&mut self, n: NodeId, member: MemberId) {
        let Some(node) = self.nodes.get(&n) else {
            return;
        };
        let state = node.driver.node();
        let buffered = state.buffered(&self.ty);
        // Downed or removed, the region stopped for good: what it held came out as dead letters.
        let terminated = node.region_terminated(&self.ty);
        let routes = state.route_counts();
        let forwarded = (routes.forwarded, node.letters_forwarded);
        let delivered = (routes.delivered, node.letters_delivered);
        let busy = node.driver.busy_loops();
        let mut broken = Vec::new();
        if buffered > self.settings.buffer_size {
            broken.push((Property::BufferCap, format!("{member} buffers {buffered}")));
        }
        if terminated && buffered > 0 {
            let detail = format!("{member}'s region stopped for good but holds {buffered} letters");
            broken.push((Property::BufferCap, detail));
        }
        if forwarded.0 != forwarded.1 {
            let (counted, sent) = forwarded;
            let detail = format!("{member} counts {counted} letters forwarded, but sent {sent}");
            broken.push((Property::CoreInvariant, detail));
        }
        if delivered.0 < delivered.1 {
            let (counted, got) = delivered;
            let detail =
                format!("{member} counts {counted} letters delivered, but its entities got {got}");
            broken.push((Property::CoreInvariant, detail));
        }
        if busy > 0 {
            broken.push((Property::BusyLoop, format!("{member}: {busy} busy loops")));
        }
        for (property, detail) in broken {
            self.check.fail(self.now, property, member, detail);
        }
        self.check_coordinator_warned(n, member, buffered, self.waking == Some(n));
    }
}
