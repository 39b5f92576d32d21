//! What a typed entity's messages travel as through the core, which sees only opaque
//! payloads: a [`Letter`] (the message's postcard bytes and, for an `ask`, who waits for the
//! reply) and, back to the asker, an [`AppFrame`] carried as an application message.

use serde::{Deserialize, Serialize};
use shoal_core::delivery::{Confirm, ProducerId, Tag};
use shoal_core::{DeadLetterReason, EntityId, MemberId, Payload};

use crate::error::AskError;

/// Who waits for the reply to an ask: the asking member (its incarnation: a reply never
/// reaches a restarted asker) and its request.
#[derive(Clone, Copy, Debug, Deserialize, Eq, PartialEq, Serialize)]
pub(crate) struct AskRef {
    /// The asking member.
    pub(crate) asker: MemberId,
    /// The ask's id in the asker's request table.
    pub(crate) id: u64,
}

/// A reliably delivered message's tag, and the member its confirmation goes to.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
pub(crate) struct Delivery {
    /// Whose message it is and where it stands in the producer's sequence.
    pub(crate) tag: Tag,
    /// The producer's member.
    pub(crate) reply_to: MemberId,
}

/// A message for an entity, as a core payload.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
pub(crate) struct Letter {
    /// For an ask: where the reply goes.
    pub(crate) ask: Option<AskRef>,
    /// The entity's message, postcard-encoded.
    #[serde(with = "serde_bytes")]
    pub(crate) message: Vec<u8>,
    /// For a reliably delivered message: its tag.
    pub(crate) delivery: Option<Delivery>,
}

/// An application message between runtimes.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
pub(crate) enum AppFrame {
    /// An entity's reply to ask `id` of the receiving member.
    Reply {
        /// The ask.
        id: u64,
        /// The reply, postcard-encoded.
        #[serde(with = "serde_bytes")]
        reply: Vec<u8>,
    },
    /// Ask `id` of the receiving member will get no reply, for this reason.
    Failed {
        /// The ask.
        id: u64,
        /// Why.
        failure: AskFailure,
    },
    /// Entity `entity` confirms messages of the receiving member's producer `producer`.
    Confirm {
        /// The confirming entity.
        entity: EntityId,
        /// The producer.
        producer: ProducerId,
        /// What it confirms and how much more it takes.
        confirm: Confirm,
    },
}

/// Why an ask failed on another member, as it travels back to the asker.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
pub(crate) enum AskFailure {
    /// The message was dead-lettered there.
    DeadLetter(DeadLetterReason),
    /// The message or the reply did not (de)serialize there.
    Codec(String),
    /// The entity panicked handling it.
    Panicked,
}

impl From<AskFailure> for AskError {
    fn from(failure: AskFailure) -> Self {
        match failure {
            AskFailure::DeadLetter(DeadLetterReason::UnknownEntityType) => Self::UnknownEntityType,
            AskFailure::DeadLetter(reason) => Self::DeadLetter(reason),
            AskFailure::Codec(error) => Self::Codec(error),
            AskFailure::Panicked => Self::EntityPanicked,
        }
    }
}

/// A payload that is not what this runtime sends.
#[derive(Debug, Eq, PartialEq, thiserror::Error)]
#[error("payload is not a letter or frame of this runtime")]
pub(crate) struct Malformed;

impl Letter {
    /// As a core payload.
    pub(crate) fn to_payload(&self) -> Payload {
        encode(self)
    }

    /// From a core payload.
    pub(crate) fn from_payload(payload: &Payload) -> Result<Self, Malformed> {
        decode(payload)
    }
}

impl AppFrame {
    /// As a core payload.
    pub(crate) fn to_payload(&self) -> Payload {
        encode(self)
    }

    /// From a core payload.
    pub(crate) fn from_payload(payload: &Payload) -> Result<Self, Malformed> {
        decode(payload)
    }
}

fn encode(value: &impl Serialize) -> Payload {
    // Plain structs of bytes and integers: postcard cannot fail on them.
    Payload(postcard::to_allocvec(value).expect("letters and frames always encode"))
}

fn decode<T: for<'de> Deserialize<'de>>(payload: &Payload) -> Result<T, Malformed> {
    postcard::from_bytes(&payload.0).map_err(|_| Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_and_frames_round_trip_and_garbage_is_refused() {
        let ask = Letter {
            ask: Some(AskRef {
                asker: MemberId::new(3, 7),
                id: 42,
            }),
            message: vec![1, 2, 3],
            delivery: None,
        };
        let tell = Letter {
            ask: None,
            message: Vec::new(),
            delivery: None,
        };
        let reliable = Letter {
            ask: None,
            message: vec![4],
            delivery: Some(Delivery {
                tag: Tag {
                    producer: ProducerId::new("p"),
                    session: 9,
                    seq: shoal_core::delivery::Seq(3),
                    confirmed: shoal_core::delivery::Seq(2),
                },
                reply_to: MemberId::new(1, 2),
            }),
        };
        for letter in [ask, tell, reliable] {
            assert_eq!(Letter::from_payload(&letter.to_payload()), Ok(letter));
        }
        let reply = AppFrame::Reply {
            id: 42,
            reply: b"ok".to_vec(),
        };
        assert_eq!(AppFrame::from_payload(&reply.to_payload()), Ok(reply));
        let failed = AppFrame::Failed {
            id: 43,
            failure: AskFailure::DeadLetter(DeadLetterReason::MailboxFull),
        };
        assert_eq!(AppFrame::from_payload(&failed.to_payload()), Ok(failed));
        let confirm = AppFrame::Confirm {
            entity: EntityId::new("e-1"),
            producer: ProducerId::new("p"),
            confirm: Confirm {
                session: 9,
                up_to: shoal_core::delivery::Seq(3),
                demand: 8,
                resend: false,
            },
        };
        assert_eq!(AppFrame::from_payload(&confirm.to_payload()), Ok(confirm));
        assert_eq!(Letter::from_payload(&Payload(vec![9; 3])), Err(Malformed));
        assert_eq!(AppFrame::from_payload(&Payload(vec![7])), Err(Malformed));
    }

    #[test]
    fn a_member_not_serving_the_type_fails_the_ask_with_its_own_error() {
        // What a member sends back when a letter reaches it for a type it does not serve.
        let failure = AskFailure::DeadLetter(DeadLetterReason::UnknownEntityType);
        assert_eq!(AskError::from(failure), AskError::UnknownEntityType);
        let full = AskFailure::DeadLetter(DeadLetterReason::MailboxFull);
        assert_eq!(
            AskError::from(full),
            AskError::DeadLetter(DeadLetterReason::MailboxFull)
        );
        assert_eq!(
            AskError::from(AskFailure::Panicked),
            AskError::EntityPanicked
        );
    }
}
