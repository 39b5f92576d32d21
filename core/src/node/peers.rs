//! What a node keeps per peer address, in one record: where the peer is reached (every
//! envelope leaves with its receiver's address, so a host can dial a member it only heard of
//! through gossip) and the sequence numbers of its links (see [`crate::node::link_seq`]). Every
//! envelope sent needs both and every envelope received the numbers: one table finds them
//! with one lookup (two tables cost two cache misses an envelope at a thousand nodes).

use crate::config::Config;
use crate::effect::Transmit;
use crate::id::{Address, MemberId, NodeId};
use crate::members::{Member, MembershipView};
use crate::message::Lane;
use crate::node::link_seq::{Acceptance, PeerLinks};
use crate::node::table::NodeTable;

/// Addresses and link numbers, by peer address (node id).
#[derive(Debug)]
pub(super) struct Peers {
    by_node: NodeTable<Peer>,
}

/// One peer address's record.
#[derive(Clone, Debug, Default)]
struct Peer {
    /// Where it is reached, once anyone said.
    address: Option<Address>,
    links: PeerLinks,
}

impl Peers {
    /// This node's own address and the seeds' from `config`.
    pub(super) fn new(config: &Config) -> Self {
        let mut peers = Self {
            by_node: NodeTable::default(),
        };
        let seeds = config.membership.iter().flat_map(|m| &m.seed_nodes);
        for seed in seeds {
            peers.set_address(seed.node, seed.address.clone());
        }
        peers.set_address(config.node, config.address.clone());
        peers
    }

    /// Records where `node` is reached.
    fn set_address(&mut self, node: NodeId, address: Address) {
        self.by_node.get_or_insert_with(node, Peer::default).address = Some(address);
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
        self.by_node.reserve(members.len());
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
            // The previous view's word about `node`, if it had one: the table holds it still.
            let (said_before, after) = last_word(before, i, node);
            let listed_before = after > i;
            i = after;
            if listed_before && said_before == address {
                continue;
            }
            if let Some(address) = address {
                self.set_address(node, address.clone());
            }
        }
    }

    /// Starts loading `node`'s record (a hint: see [`crate::hint::prefetch`]).
    pub(super) fn prefetch(&self, node: NodeId) {
        self.by_node.prefetch(node);
    }

    /// Where `node` can be reached, if anyone said.
    pub(super) fn address_of(&self, node: NodeId) -> Option<&Address> {
        self.by_node.get(node)?.address.as_ref()
    }

    /// Numbers `transmit`'s envelope on its link and gives it its receiver's address (unless
    /// it has one). Envelopes to "whoever runs at an address" (a join's first contact) go
    /// unnumbered: numbering restarts once the receiver's incarnation is known.
    pub(super) fn stamp(&mut self, transmit: &mut Transmit) {
        let to = transmit.envelope.to;
        if to.incarnation.0 != 0 {
            let peer = self.by_node.get_or_insert_with(to.node, Peer::default);
            transmit.envelope.seq = peer.links.next_to(to, transmit.envelope.lane());
            if transmit.address.is_none() {
                transmit.address = peer.address.clone();
            }
        } else if transmit.address.is_none() {
            transmit.address = self.address_of(to.node).cloned();
        }
    }

    /// What to make of an envelope numbered `seq` from `from` on `lane` (see
    /// [`PeerLinks::accept`]); 0 means unnumbered (envelopes a host or test injects itself)
    /// and is always new.
    pub(super) fn accept(&mut self, from: MemberId, lane: Lane, seq: u64) -> Acceptance {
        if seq == 0 {
            return Acceptance::New;
        }
        self.by_node
            .get_or_insert_with(from.node, Peer::default)
            .links
            .accept(from, lane, seq)
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
    use crate::message::ClusterMessage;
    use std::collections::BTreeMap;

    /// Every member's address written in view order, as the book learned before it kept track
    /// of the previous view.
    fn learn_all(book: &mut BTreeMap<NodeId, Address>, view: &MembershipView) {
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
        let mut book = Peers::new(&config);
        let mut reference = BTreeMap::from([(NodeId(0), addresses[0].clone())]);
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
                    reference.get(&NodeId(node)),
                    "{view:?}"
                );
            }
            previous = view;
        }
    }

    #[test]
    fn a_peer_record_with_its_key_fits_one_cache_line() {
        // Every envelope sent or accepted reads one at random: at a thousand peers a record
        // over two lines cost two cache misses an envelope.
        assert!(size_of::<(NodeId, Peer)>() <= 64);
    }

    #[test]
    fn stamping_numbers_per_peer_and_lane_and_gives_the_address_known() {
        let (a, a2, b) = (
            MemberId::new(1, 1),
            MemberId::new(1, 2),
            MemberId::new(2, 1),
        );
        let mut config = Config::new(NodeId(0), crate::id::Incarnation(1));
        config.address = "me".into();
        let mut peers = Peers::new(&config);
        peers.set_address(a.node, "a".into());
        let mut stamp = |to: MemberId, message: crate::message::Message| {
            let mut transmit = Transmit {
                address: None,
                envelope: Box::new(crate::message::Envelope {
                    from: MemberId::new(0, 1),
                    to,
                    seq: 0,
                    message,
                }),
            };
            peers.stamp(&mut transmit);
            (
                transmit.envelope.seq,
                transmit.address.map(|a| a.to_string()),
            )
        };
        let data = || crate::message::Message::App {
            payload: crate::message::Payload::default(),
        };
        let control =
            || crate::message::Message::Cluster(ClusterMessage::Heartbeat { sequence: 1 });
        let at_a = Some("a".to_string());
        assert_eq!(stamp(a, data()), (1, at_a.clone()));
        assert_eq!(stamp(a, data()), (2, at_a.clone()));
        assert_eq!(stamp(a, control()), (1, at_a.clone()), "lanes count apart");
        assert_eq!(stamp(b, data()), (1, None), "no address known");
        assert_eq!(
            stamp(a2, data()),
            (1, at_a.clone()),
            "a new incarnation starts over"
        );
        let anyone = MemberId::new(1, 0);
        assert_eq!(
            stamp(anyone, data()),
            (0, at_a),
            "to whoever runs there: unnumbered"
        );
        let accept = |peers: &mut Peers, seq| peers.accept(b, Lane::Data, seq);
        assert_eq!(
            [accept(&mut peers, 1), accept(&mut peers, 1)],
            [Acceptance::New, Acceptance::Duplicate]
        );
        assert_eq!(
            [accept(&mut peers, 0), accept(&mut peers, 0)],
            [Acceptance::New; 2],
            "unnumbered envelopes"
        );
    }
}
