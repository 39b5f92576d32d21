//! Where members can be reached. Every envelope leaves the node with its receiver's address
//! ([`crate::Transmit`]), so a host can dial a member it only heard of through gossip.

use crate::config::Config;
use crate::id::{Address, NodeId};
use crate::membership::{Member, MembershipView};
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

    /// Learns the addresses `view` names (a newer view's word wins; within a view, the last
    /// incarnation listed with an address). `previous` is the view learned before: a node id
    /// whose word did not change since needs no lookup, and while a large cluster forms, views
    /// follow each other by the thousand and differ in a member or two.
    pub(super) fn learn(&mut self, previous: &MembershipView, view: &MembershipView) {
        let mut before = previous.members();
        let mut members = view.members();
        while let Some((node, address, rest)) = last_word(members) {
            members = rest;
            // The previous view's word about `node`, if it had one: the book holds it still.
            while before.first().is_some_and(|m| m.id.node < node) {
                before = &before[1..];
            }
            let said_before = last_word(before).filter(|(n, _, _)| *n == node);
            if said_before.is_some_and(|(_, old, _)| old == address) {
                continue;
            }
            if let Some(address) = address {
                self.by_node.insert(node, address.clone());
            }
        }
    }

    /// Where `node` can be reached, if anyone said.
    pub(super) fn address_of(&self, node: NodeId) -> Option<&Address> {
        self.by_node.get(node)
    }
}

/// The first node id `members` (sorted by id) lists, the address its last incarnation listed
/// with one gave (`None` if none did), and the members after that node's.
fn last_word(members: &[Member]) -> Option<(NodeId, Option<&Address>, &[Member])> {
    let node = members.first()?.id.node;
    let end = members
        .iter()
        .position(|m| m.id.node != node)
        .unwrap_or(members.len());
    let (own, rest) = members.split_at(end);
    let address = own.iter().rev().find_map(|m| m.address.as_ref());
    Some((node, address, rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::MemberId;

    /// Every member's address written in view order, as the book learned before it kept track
    /// of the previous view.
    fn learn_all(book: &mut NodeTable<Address>, view: &MembershipView) {
        for member in view.members() {
            if let Some(address) = &member.address {
                book.insert(member.id.node, address.clone());
            }
        }
    }

    #[test]
    fn learning_from_the_previous_view_writes_what_learning_every_member_writes() {
        let mut rng = crate::rng::Rng::new(7);
        let mut next = move |below: u64| rng.below(below);
        let addresses: Vec<Address> = (0..4).map(|i| format!("a{i}").as_str().into()).collect();
        let mut config = Config::new(NodeId(0), crate::id::Incarnation(1));
        config.address = addresses[0].clone();
        let mut book = AddressBook::new(&config);
        let mut reference = AddressBook::new(&config).by_node;
        let mut previous = MembershipView::default();
        for _ in 0..2_000 {
            // Few nodes and incarnations, so that members come, go, move and share a node id.
            let members: Vec<Member> = (0..next(6))
                .map(|_| {
                    let id = MemberId::new(next(5), 1 + next(3));
                    let mut member = Member::up(id, 1, &[]);
                    member.address = (next(4) != 0).then(|| addresses[next(4) as usize].clone());
                    member
                })
                .collect();
            let view = MembershipView::new(members);
            book.learn(&previous, &view);
            learn_all(&mut reference, &view);
            for node in 0..5 {
                assert_eq!(
                    book.address_of(NodeId(node)),
                    reference.get(NodeId(node)),
                    "{view:?}"
                );
            }
            previous = view;
        }
    }
}
