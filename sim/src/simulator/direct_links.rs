//! Links' readers on direct routes, as the runtime's connection readers use them: a member's
//! reader of a peer's envelopes hands a numbered `Forward` straight to the running
//! incarnation when the peer's route to it is open (`shoal_core::direct`), and feeds the node
//! everything else, reporting first the last number it consumed (`Input::LinkConsumed`), so
//! that a copy of a letter it delivered is refused. The network's copies race those reports;
//! the exactly-once check judges them.
//!
//! The simulator feeds a node each envelope as it arrives, so nothing of a link ever waits
//! for the node when its reader decides; a paused process reads nothing until it resumes.

use shoal_core::direct::{LinkLetter, Sender, restore_letter_payload, take_letter_payload};
use shoal_core::{Envelope, Input, Lane, MemberId, NodeId};

use crate::options::DirectFault;

use super::Simulator;

impl Simulator {
    /// `envelope` arrives at node `n`: its reader delivers it on a direct route if it may,
    /// else hands it to the node.
    pub(super) fn receive(&mut self, n: NodeId, mut envelope: Box<Envelope>) {
        let member = self.nodes.get(&n).filter(|node| !node.is_paused());
        let Some(member) = member.map(|node| node.id) else {
            // Missing, or paused: the node's input queue keeps it for the reader's return.
            return self.input(n, Input::Receive(envelope));
        };
        let Some(routes) = self.direct.as_mut() else {
            return self.input(n, Input::Receive(envelope));
        };
        if envelope.to != member || envelope.lane() != Lane::Data {
            return self.input(n, Input::Receive(envelope));
        }
        let link = (member, envelope.from);
        if !routes.links.contains_key(&link) {
            routes.next_link += 1;
            let fresh = (routes.next_link, Default::default());
            routes.links.insert(link, fresh);
        }
        let (id, numbers) = routes.links.get_mut(&link).expect("inserted above");
        let sender = Sender::Link(*id);
        let newer = numbers.arrived(envelope.seq);
        let letter = LinkLetter::of(&envelope)
            .filter(|letter| *letter.entity_type == self.ty)
            .map(|letter| letter.entity.clone());
        let route = letter
            .as_ref()
            .filter(|_| newer)
            .and_then(|entity| Some((entity, self.open_route(member, sender, entity)?)));
        if let Some((entity, incarnation)) = route {
            let payload = take_letter_payload(&mut envelope).expect("a link letter");
            match self.hand_over_direct(member, entity, incarnation, payload) {
                None => {
                    self.consumed(link, envelope.seq);
                    self.mark("a peer's letter went to its entity on a direct route");
                    return;
                }
                Some(payload) => restore_letter_payload(&mut envelope, payload),
            }
        }
        self.report_consumed(link);
        let Some(entity) = letter else {
            return self.input(n, Input::Receive(envelope));
        };
        self.begin_letter(member, sender, &entity);
        self.input(n, Input::Receive(envelope));
        self.end_letter(member);
    }

    /// The reader of `link` consumed number `seq`.
    fn consumed(&mut self, link: (MemberId, MemberId), seq: u64) {
        if let Some((_, numbers)) = self.direct.as_mut().and_then(|r| r.links.get_mut(&link)) {
            numbers.consumed(seq);
        }
    }

    /// Before the reader of `link` hands its node anything more: the last number it
    /// consumed, if the node has not heard it (never, in the negative control).
    fn report_consumed(&mut self, (member, from): (MemberId, MemberId)) {
        let Some(routes) = self.direct.as_mut() else {
            return;
        };
        let skip = routes.fault == Some(DirectFault::SkipReport);
        let Some((_, numbers)) = routes.links.get_mut(&(member, from)) else {
            return;
        };
        let Some(seq) = numbers.report_due() else {
            return;
        };
        numbers.reported(seq);
        if !skip {
            self.input(member.node, Input::LinkConsumed { from, seq });
        }
    }
}
