//! Where members can be reached. Every envelope leaves the node with its receiver's address
//! ([`crate::Transmit`]), so a host can dial a member it only heard of through gossip.

use crate::config::Config;
use crate::id::{Address, NodeId};
use crate::membership::MembershipView;
use crate::node_table::NodeTable;

/// The addresses this node knows, by node id: its own, the seeds', and every member's that a
/// view named (an address belongs to a node id, across its incarnations). Entries are never
/// dropped: a removed member may still be answered, and a node id keeps its address.
#[derive(Debug)]
pub(super) struct AddressBook {
    by_node: NodeTable<Address>,
}

impl AddressBook {
    /// This node's own address and the seeds' from `config`.
    pub(super) fn new(config: &Config) -> Self {
        let mut by_node = NodeTable::default();
        let seeds = config.membership.iter().flat_map(|m| &m.seed_nodes);
        for seed in seeds {
            by_node.insert(seed.node, seed.address.clone());
        }
        by_node.insert(config.node, config.address.clone());
        Self { by_node }
    }

    /// Learns the addresses `view` names (a newer view's word wins).
    pub(super) fn learn(&mut self, view: &MembershipView) {
        for member in view.members() {
            // Views come after every membership change and rarely move anyone: only a changed
            // address is written.
            if let Some(address) = &member.address {
                if self.by_node.get(member.id.node) != Some(address) {
                    self.by_node.insert(member.id.node, address.clone());
                }
            }
        }
    }

    /// Where `node` can be reached, if anyone said.
    pub(super) fn address_of(&self, node: NodeId) -> Option<&Address> {
        self.by_node.get(node)
    }
}
