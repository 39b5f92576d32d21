//! The host's part in reliable delivery: the node's reliable producers register here, and an
//! entity's confirmation reaches its producer: directly when the producer is on this member,
//! else as an application message to the producer's member.

use std::collections::BTreeMap;

use shoal_core::delivery::{Confirm, ProducerId, Tag};
use shoal_core::{EntityId, Input, MemberId};
use tokio::sync::mpsc;

use super::Host;
use crate::entity::letter::{AppFrame, Delivery};

/// What the host tells a producer.
#[derive(Debug)]
pub(crate) enum ProducerEvent {
    /// `entity` confirmed.
    Confirmed(EntityId, Confirm),
    /// This node refused the producer's letter to `entity` on its way out (a full queue or
    /// buffer): it goes again soon.
    Refused(EntityId, Tag),
}

/// Where a producer's events go.
pub(crate) type Confirms = mpsc::UnboundedSender<ProducerEvent>;

/// A producer id is in use on this node by a producer still running.
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
#[error("producer {0} already runs on this node")]
pub struct ProducerTaken(pub ProducerId);

/// The node's reliable producers.
#[derive(Default)]
pub(crate) struct Producers(BTreeMap<ProducerId, Confirms>);

impl Producers {
    /// Registers `producer`, unless a running one holds its id (one whose handle was dropped
    /// no longer does).
    pub(crate) fn register(
        &mut self,
        producer: ProducerId,
        confirms: Confirms,
    ) -> Result<(), ProducerTaken> {
        if self.0.get(&producer).is_some_and(|held| !held.is_closed()) {
            return Err(ProducerTaken(producer));
        }
        self.0.insert(producer, confirms);
        Ok(())
    }

    /// Hands `event` to `producer`, if it still runs here (news for a producer that stopped
    /// is of no use to anyone).
    fn deliver(&mut self, producer: &ProducerId, event: ProducerEvent) {
        let gone = match self.0.get(producer) {
            Some(events) => events.send(event).is_err(),
            None => false,
        };
        if gone {
            self.0.remove(producer);
        }
    }
}

impl Host {
    /// Sends an entity's confirmation to producer `producer` on member `to`.
    pub(super) fn confirm(
        &mut self,
        (to, producer): (MemberId, ProducerId),
        entity: EntityId,
        confirm: Confirm,
    ) {
        if to == self.me {
            let event = ProducerEvent::Confirmed(entity, confirm);
            self.producers.deliver(&producer, event);
            return;
        }
        let frame = AppFrame::Confirm {
            entity,
            producer,
            confirm,
        };
        self.io.feedback.inputs.push(Input::SendApp {
            to,
            payload: frame.to_payload(),
        });
    }

    /// A confirmation that came from another member, for a producer of this one.
    pub(super) fn handle_confirm(
        &mut self,
        producer: &ProducerId,
        entity: EntityId,
        confirm: Confirm,
    ) {
        let event = ProducerEvent::Confirmed(entity, confirm);
        self.producers.deliver(producer, event);
    }

    /// This node dead-lettered `delivery`'s letter to `entity`: if one of its producers sent
    /// it, the producer sends it again soon.
    pub(super) fn handle_refused(&mut self, entity: EntityId, delivery: Delivery) {
        if delivery.reply_to == self.me {
            let producer = delivery.tag.producer.clone();
            let event = ProducerEvent::Refused(entity, delivery.tag);
            self.producers.deliver(&producer, event);
        }
    }
}
