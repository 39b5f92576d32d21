//! What travels to an entity through sharding: an application message, or a request to start
//! it (Akka's `StartEntity`), whose requester may want to hear when it runs (Akka's
//! `StartEntityAck`). Letters are buffered, forwarded and handed off alike, in order.

use serde::{Deserialize, Serialize};

use super::Payload;
use crate::id::{EntityId, MemberId, RequestId};
use crate::reason::DeadLetterReason;

/// A letter for an entity.
#[derive(Clone, Debug, Eq, PartialEq)]
pub(crate) enum Letter {
    /// An application message.
    Message(Payload),
    /// Start the entity without a message; `ack` (if any) hears when it runs, or why not.
    Start(Option<StartAck>),
}

impl Letter {
    /// The application message, if this is one (what a dead letter hands back).
    pub(crate) fn into_payload(self) -> Option<Payload> {
        match self {
            Self::Message(payload) => Some(payload),
            Self::Start(_) => None,
        }
    }
}

/// A letter and its entity.
pub(crate) type Delivery = (EntityId, Letter);

/// Who waits to hear that an entity started: the member whose region took the
/// `StartEntity` command, and the command's request id.
#[derive(Clone, Copy, Debug, Deserialize, Eq, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct StartAck {
    /// The requester's member.
    pub requester: MemberId,
    /// The command's request id.
    pub request: RequestId,
}

/// How a start request ended, as its requester hears it.
#[derive(Clone, Copy, Debug, Deserialize, Eq, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum StartOutcome {
    /// The entity runs (it was started, or was already running).
    Started,
    /// The request was dropped, for this reason.
    Dropped(DeadLetterReason),
}
