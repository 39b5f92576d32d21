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
    /// follow each other by the thousand and differ in a member or two. The last argument is
    /// `previous.unchanged_ends(view)` (the node works it out once, for this and for the members
    /// gone): the node ids at both ends that both views list alike say what they said.
    pub(super) fn learn(
        &mut self,
        previous: &MembershipView,
        view: &MembershipView,
        (front, back): (usize, usize),
    ) {
        let (before, members) = (previous.members(), view.members());
        if std::ptr::eq(before, members) {
            return;
        }
        let before = &before[front..before.len() - back];
        let members = &members[front..members.len() - back];
        // One walk of the rest of both views (sorted by id, so by node id), a node's members
        // at a time.
        let (mut i, mut j) = (0, 0);
        while j < members.len() {
            let node = members[j].id.node;
            let (address, next) = last_word(members, j, node);
            j = next;
            while before.get(i).is_some_and(|m| m.id.node < node) {
                i += 1;
            }
            // The previous view's word about `node`, if it had one: the book holds it still.
            let (said_before, after) = last_word(before, i, node);
            let listed_before = after > i;
            i = after;
            if listed_before && said_before == address {
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

/// What the members of `node` listed from `members[from]` on (a view sorted by id lists a
/// node's incarnations together) say: the address its last incarnation listed with one gave
/// (`None` if none did), and where the members after them begin (`from` itself when none is
/// listed there: nothing said).
fn last_word(members: &[Member], from: usize, node: NodeId) -> (Option<&Address>, usize) {
    let mut address = None;
    let mut end = from;
    while let Some(m) = members.get(end).filter(|m| m.id.node == node) {
        address = m.address.as_ref().or(address);
        end += 1;
    }
    (address, end)
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
        for _ in 0..5_000 {
            // Few nodes and incarnations, so that members come, go, move and share a node id.
            let random_member = |next: &mut dyn FnMut(u64) -> u64| {
                let id = MemberId::new(next(5), 1 + next(3));
                let mut member = Member::up(id, 1, &[]);
                member.address = (next(4) != 0).then(|| addresses[next(4) as usize].clone());
                member
            };
            // A new view, or (as views follow each other) the previous one a member apart.
            let mut members: Vec<Member> = previous.members().to_vec();
            match next(4) {
                0 => members = (0..next(8)).map(|_| random_member(&mut next)).collect(),
                1 if !members.is_empty() => {
                    members.remove(next(members.len() as u64) as usize);
                }
                _ => members.insert(0, random_member(&mut next)),
            }
            let view = MembershipView::new(members);
            book.learn(&previous, &view, previous.unchanged_ends(&view));
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
