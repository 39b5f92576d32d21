//! The running processes, indexed by address: the simulator looks nodes up several times per
//! event, and addresses are small integers, so a vector beats a map. Iteration is in address
//! order, as a `BTreeMap`'s would be.

use shoal_core::{Address, Driver, Input, Instant, MemberId, NodeId};

use crate::clock::Clock;

/// The network address of the simulated node `node`. Deliberately not the core's default
/// ([`Address::of_node`]), so a core that lost track of an address cannot pass by luck.
pub(crate) fn address_of(node: NodeId) -> Address {
    Address::new(format!("node-{}.sim:7355", node.0))
}

/// Where the simulator keeps what it has per address (`node`): its nodes number their
/// addresses from 0, so tables indexed by address beat maps.
pub(crate) fn index(node: NodeId) -> usize {
    usize::try_from(node.0).expect("simulated addresses are small")
}

/// The node an address names, if it is a simulated node's.
pub(crate) fn node_at(address: &Address) -> Option<NodeId> {
    let number = address.as_str().strip_prefix("node-")?;
    let number = number.strip_suffix(".sim:7355")?;
    number.parse().ok().map(NodeId)
}

/// Which node the address on an envelope names, remembered per receiving node: nearly every
/// envelope to a node carries the one address its senders learned through membership (one
/// shared string), so comparing with the last one that named it is a pointer compare where
/// parsing it again cost dozens of instructions a message.
#[derive(Debug, Default)]
pub(crate) struct Routes {
    last: Vec<Option<Address>>,
}

impl Routes {
    /// The node `address` names (as [`node_at`] says), for an envelope to a member at `to`.
    pub(crate) fn node_at(&mut self, address: &Address, to: NodeId) -> Option<NodeId> {
        let i = index(to);
        if self.last.get(i).and_then(Option::as_ref) == Some(address) {
            return Some(to);
        }
        let node = node_at(address)?;
        if node == to {
            if i >= self.last.len() {
                self.last.resize(i + 1, None);
            }
            self.last[i] = Some(address.clone());
        }
        Some(node)
    }
}

/// One simulated member process.
#[derive(Debug)]
pub(crate) struct SimNode {
    pub(crate) driver: Driver,
    pub(crate) id: MemberId,
    pub(crate) clock: Clock,
    pub(crate) wakeup: Option<Instant>,
    pub(crate) view_version: u64,
    /// Its status in its own view, as of its last view change (real membership).
    pub(crate) own_status: Option<shoal_core::MemberStatus>,
    /// Its status in its own view just before it learned it was Down.
    pub(crate) status_before_down: Option<shoal_core::MemberStatus>,
    /// Entity messages and start requests its region sent on to other members: what its
    /// route counts must report as forwarded.
    pub(crate) letters_forwarded: u64,
    /// Entity messages its host was handed: each reached a shard of its region first, so its
    /// route counts must report at least as many delivered.
    pub(crate) letters_delivered: u64,
    /// Its region's requests its coordinator left unanswered, to judge its warnings by.
    pub(crate) unanswered: crate::unanswered::Unanswered,
    /// While the process is paused: the inputs that reached it, replayed in order on resume.
    pub(crate) paused: Option<Vec<Input>>,
    /// When the simulator next checks the node's internal invariants (release builds; debug
    /// builds check after every drain in the driver).
    pub(crate) next_invariant_check: Instant,
    /// Its entities as its effects and the host's reports make them: the entity contract.
    pub(crate) ledger: shoal_core::EntityLedger,
}

impl SimNode {
    /// Whether the process is paused.
    pub(crate) fn is_paused(&self) -> bool {
        self.paused.is_some()
    }

    /// Whether its region of `ty` stopped for good (the member was downed or removed): it
    /// holds nothing, answers no peer and refuses starts.
    pub(crate) fn region_terminated(&self, ty: &shoal_core::EntityType) -> bool {
        self.driver.node().is_region_stopped(ty)
            && self
                .own_status
                .is_none_or(|s| s == shoal_core::MemberStatus::Down)
    }
}

/// Running processes by address.
#[derive(Debug, Default)]
pub(crate) struct Nodes {
    slots: Vec<Option<SimNode>>,
}

impl Nodes {
    /// Starts loading the start of `node`'s entry (whether a process runs there; a hint: see
    /// [`shoal_core::hint::prefetch`]).
    pub(crate) fn prefetch(&self, node: NodeId) {
        if let Some(slot) = self.slots.get(index(node)) {
            shoal_core::hint::prefetch(slot);
        }
    }

    /// The process at `node`, if one runs.
    pub(crate) fn get(&self, node: &NodeId) -> Option<&SimNode> {
        self.slots.get(index(*node))?.as_ref()
    }

    /// The process at `node`, if one runs.
    pub(crate) fn get_mut(&mut self, node: &NodeId) -> Option<&mut SimNode> {
        self.slots.get_mut(index(*node))?.as_mut()
    }

    /// Starts `sim` at `node` (replacing whatever ran there).
    pub(crate) fn insert(&mut self, node: NodeId, sim: SimNode) {
        let i = index(node);
        if i >= self.slots.len() {
            self.slots.resize_with(i + 1, || None);
        }
        self.slots[i] = Some(sim);
    }

    /// Stops the process at `node`.
    pub(crate) fn remove(&mut self, node: &NodeId) -> Option<SimNode> {
        self.slots.get_mut(index(*node))?.take()
    }

    /// Addresses of running processes, in order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &NodeId> + '_ {
        self.values().map(|n| &n.id.node)
    }

    /// Running processes, in address order.
    pub(crate) fn values(&self) -> impl Iterator<Item = &SimNode> + '_ {
        self.slots.iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_names_the_node_it_was_made_for_and_no_other() {
        for node in [0, 7, 999, u64::MAX] {
            assert_eq!(node_at(&address_of(NodeId(node))), Some(NodeId(node)));
        }
        for other in [
            "n7",
            "node-.sim:7355",
            "node-x.sim:7355",
            "node-7.sim:7356",
            "7",
        ] {
            assert_eq!(node_at(&Address::new(other)), None, "{other}");
        }
    }

    #[test]
    fn routes_remember_an_address_for_its_node_only() {
        let mut routes = Routes::default();
        let (three, five) = (NodeId(3), NodeId(5));
        let at_three = address_of(three);
        assert_eq!(routes.node_at(&at_three, three), Some(three));
        assert_eq!(routes.node_at(&at_three, three), Some(three), "remembered");
        assert_eq!(
            routes.node_at(&address_of(three), three),
            Some(three),
            "another string with the same address"
        );
        // An envelope for node 5 that left with node 3's address goes to node 3, even right
        // after node 3's address was remembered, and teaches nothing about node 5.
        assert_eq!(routes.node_at(&at_three, five), Some(three));
        assert_eq!(routes.node_at(&at_three, five), Some(three));
        assert_eq!(routes.node_at(&Address::new("elsewhere"), five), None);
        assert_eq!(routes.node_at(&address_of(five), five), Some(five));
        assert_eq!(
            routes.node_at(&Address::new("node-9.sim:7355"), five),
            Some(NodeId(9)),
            "a remembered node does not swallow other addresses"
        );
    }
}
