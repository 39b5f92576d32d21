//! The host's part in reliable delivery: the node's reliable producers register here, and an
//! entity's confirmation reaches its producer: directly when the producer is on this member,
//! else as an application message to the producer's member.

use std::collections::BTreeMap;

use shoal_core::delivery::{Confirm, ProducerId};
use shoal_core::{EntityId, Input, MemberId};
use tokio::sync::mpsc;

use super::Host;
use crate::entity::letter::AppFrame;

/// Where a producer's confirmations go: `(entity, confirmation)`.
pub(crate) type Confirms = mpsc::UnboundedSender<(EntityId, Confirm)>;

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

    /// Hands a confirmation to `producer`, if it still runs here (a confirmation for a
    /// producer that stopped is of no use to anyone).
    fn deliver(&mut self, producer: &ProducerId, entity: EntityId, confirm: Confirm) {
        let gone = match self.0.get(producer) {
            Some(confirms) => confirms.send((entity, confirm)).is_err(),
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
            self.producers.deliver(&producer, entity, confirm);
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
        self.producers.deliver(producer, entity, confirm);
    }
}
