//! How reliable delivery's messages travel in the simulator: a producer's letter and an
//! entity's confirmation as payloads of fixed words, whose first word is never a node id, so
//! a workload payload is never read as one, nor one as a workload payload.

use shoal_core::delivery::{Confirm, ProducerId, Seq, Tag};
use shoal_core::{EntityId, MemberId, Payload};

use crate::entity_host::Life;

/// The first word of a reliable letter or a confirmation: never a node id, so a workload
/// payload is never read as one, nor one as a workload payload.
const MAGIC: u64 = u64::MAX;

/// A reliably delivered message's tag and where its confirmation goes, as it travels.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Reliable {
    pub(crate) tag: Tag,
    pub(crate) reply_to: MemberId,
}

impl Reliable {
    pub(super) fn encode(&self, producer: usize) -> Payload {
        let tag = &self.tag;
        words(&[
            MAGIC,
            producer as u64,
            tag.session,
            tag.seq.0,
            tag.confirmed.0,
            self.reply_to.node.0,
            self.reply_to.incarnation.0,
        ])
    }

    /// The reliable letter `payload` is, if it is one.
    pub(crate) fn decode(payload: &Payload) -> Option<Self> {
        let w = read_words::<7>(payload)?;
        Some(Self {
            tag: Tag {
                producer: producer_id(w[1] as usize),
                session: w[2],
                seq: Seq(w[3]),
                confirmed: Seq(w[4]),
            },
            reply_to: MemberId::new(w[5], w[6]),
        })
    }
}

/// A confirmation an entity sends its producer's member.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Confirmation {
    /// The entity's member, which sends it.
    pub(crate) from: MemberId,
    /// The producer's member.
    pub(crate) to: MemberId,
    pub(crate) entity: EntityId,
    pub(crate) producer: ProducerId,
    pub(crate) confirm: Confirm,
}

impl Confirmation {
    /// What incarnation `life` tells `delivery`'s producer (nothing for `None`: a message of
    /// an older session).
    pub(crate) fn of(life: &Life, delivery: &Reliable, confirm: Option<Confirm>) -> Option<Self> {
        Some(Self {
            from: life.0,
            to: delivery.reply_to,
            entity: life.1.clone(),
            producer: delivery.tag.producer.clone(),
            confirm: confirm?,
        })
    }

    /// As an application message.
    pub(crate) fn encode(&self) -> Payload {
        let c = &self.confirm;
        words(&[
            MAGIC,
            producer_index(&self.producer),
            entity_index(&self.entity).map_or(u64::MAX, u64::from),
            c.session,
            c.up_to.0,
            u64::from(c.demand),
            u64::from(c.resend),
        ])
    }

    /// The confirmation `payload` is, if it is one: (producer, entity, confirm).
    pub(super) fn decode(payload: &Payload) -> Option<(usize, u32, Confirm)> {
        let w = read_words::<7>(payload)?;
        let confirm = Confirm {
            session: w[3],
            up_to: Seq(w[4]),
            demand: u32::try_from(w[5]).ok()?,
            resend: w[6] == 1,
        };
        Some((w[1] as usize, u32::try_from(w[2]).ok()?, confirm))
    }
}

pub(super) fn producer_id(k: usize) -> ProducerId {
    ProducerId::new(format!("p{k}"))
}

pub(super) fn producer_index(producer: &ProducerId) -> u64 {
    producer
        .0
        .strip_prefix('p')
        .and_then(|k| k.parse().ok())
        .unwrap_or(u64::MAX)
}

/// The workload names entities `e<n>`.
pub(crate) fn entity_index(entity: &EntityId) -> Option<u32> {
    entity.as_str().strip_prefix('e')?.parse().ok()
}

fn words(words: &[u64]) -> Payload {
    Payload(words.iter().flat_map(|w| w.to_le_bytes()).collect())
}

fn read_words<const N: usize>(payload: &Payload) -> Option<[u64; N]> {
    if payload.0.len() != N * 8 {
        return None;
    }
    let mut out = [0; N];
    for (i, word) in out.iter_mut().enumerate() {
        *word = u64::from_le_bytes(payload.0[i * 8..i * 8 + 8].try_into().ok()?);
    }
    (out[0] == MAGIC).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_and_confirmations_round_trip_and_workload_payloads_are_neither() {
        let reliable = Reliable {
            tag: Tag {
                producer: producer_id(2),
                session: 1,
                seq: Seq(7),
                confirmed: Seq(5),
            },
            reply_to: MemberId::new(3, 4),
        };
        assert_eq!(
            Reliable::decode(&reliable.encode(2)),
            Some(reliable.clone())
        );
        let life: Life = (MemberId::new(1, 1), EntityId::new("e12"), 3);
        let confirm = Confirm {
            session: 1,
            up_to: Seq(7),
            demand: 8,
            resend: true,
        };
        let confirmation = Confirmation::of(&life, &reliable, Some(confirm)).unwrap();
        assert_eq!(
            Confirmation::decode(&confirmation.encode()),
            Some((2, 12, confirm))
        );
        let workload = crate::check::payload(MemberId::new(1, 1), 9);
        assert_eq!(Reliable::decode(&workload), None);
        assert_eq!(Confirmation::decode(&workload), None);
        assert_eq!(crate::check::decode(&reliable.encode(2)), None);
    }
}
