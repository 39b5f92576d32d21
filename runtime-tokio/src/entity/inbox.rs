//! The entity's side of reliable delivery: each incarnation judges the reliably delivered
//! messages it is sent with a `shoal_core::delivery::Consumer` (apply, or drop a duplicate,
//! a message past a gap or one of an older producer session), confirms what it applied once
//! its effect is done (durable, for a persistent entity), and tells the producer how many
//! more it takes.
//!
//! A plain entity keeps its marks in memory: a message redelivered to its next incarnation
//! (after a move or a crash) whose confirmation was lost is applied again, so delivery to it
//! is at least once. A persistent entity writes the mark of the message with the state the
//! message changed (`StateWrite`'s `delivered`) and reads its marks back on recovery, so a
//! redelivered message is recognised: effectively once.

use shoal_core::delivery::{Consumer, HighWater, Mark, Tag, Verdict};

use super::letter::Delivery;
use super::{EntityLink, SignalKind};
use crate::metric_names;
use crate::store::Delivered;

/// How many messages of one producer an entity takes in flight beyond what it confirmed, at
/// most: small beside the mailbox, so that one producer cannot fill it.
const DELIVERY_WINDOW: u32 = 16;

/// One incarnation's consumer state.
#[derive(Debug)]
pub(crate) struct Inbox {
    consumer: Consumer,
    /// The demand it grants each producer.
    window: u32,
    /// The delivered message being handled, if the current one is.
    current: Option<Tag>,
    /// The delivered message whose write failed: once the entity has recovered, its producer
    /// hears whether the write landed, or to send it again at once.
    failed: Option<Delivery>,
}

impl Inbox {
    /// The consumer state of an entity whose mailbox holds `mailbox_capacity` messages: it
    /// grants a producer at most a quarter of that (at least one).
    pub(crate) fn new(mailbox_capacity: usize) -> Self {
        let quarter = u32::try_from(mailbox_capacity / 4).unwrap_or(u32::MAX);
        let window = quarter.clamp(1, DELIVERY_WINDOW);
        Self {
            consumer: Consumer::new(HighWater::default(), window),
            window,
            current: None,
            failed: None,
        }
    }

    /// Judges `delivery`: `true` if the entity should handle it (it becomes the current one);
    /// otherwise it is dropped and the producer is told where the entity stands.
    pub(crate) fn admit(&mut self, link: &EntityLink, delivery: &Delivery) -> bool {
        let verdict = self.consumer.handle_message(&delivery.tag);
        if verdict == Verdict::Apply {
            self.current = Some(delivery.tag.clone());
            return true;
        }
        let label = match verdict {
            Verdict::Duplicate => "duplicate",
            Verdict::Gap => "gap",
            _ => "stale",
        };
        metrics::counter!(metric_names::DELIVERY_DROPPED_TOTAL, "reason" => label).increment(1);
        self.confirm(link, delivery, verdict);
        false
    }

    /// The current message's effect is done: it is marked applied and confirmed.
    pub(crate) fn applied(&mut self, link: &EntityLink, delivery: &Delivery) {
        self.current = None;
        self.consumer.processed(&delivery.tag);
        self.confirm(link, delivery, Verdict::Apply);
    }

    /// The current message was not carried out (a panic, a fenced write): it stays
    /// unconfirmed, and the producer sends it again after its timeout.
    pub(crate) fn abandoned(&mut self) {
        self.current = None;
    }

    /// The current message's write failed, and the entity restarts to recover: see
    /// [`Inbox::restarted`].
    pub(crate) fn write_failed(&mut self, delivery: &Delivery) {
        self.current = None;
        self.failed = Some(delivery.clone());
    }

    /// The entity restarted and recovered: the producer of a message whose write failed is
    /// told whether it landed after all (the recovered marks say), or to send it again now
    /// rather than after a timeout.
    pub(crate) fn restarted(&mut self, link: &EntityLink) {
        let Some(delivery) = self.failed.take() else {
            return;
        };
        if let Some(confirm) = self.consumer.confirm_after_failure(&delivery.tag) {
            link.signal(SignalKind::Confirm {
                to: delivery.reply_to,
                producer: delivery.tag.producer,
                confirm,
            });
        }
    }

    /// The mark of the message being handled, for the write that carries its effect.
    pub(crate) fn current(&self) -> Option<Delivered> {
        self.current.as_ref().map(|tag| Delivered {
            producer: tag.producer.clone(),
            mark: Mark {
                session: tag.session,
                seq: tag.seq,
            },
        })
    }

    /// The marks a recovery read: they replace what this incarnation knew (a write that
    /// failed may or may not have landed; the store says which).
    pub(crate) fn recovered(&mut self, high_water: HighWater) {
        self.consumer = Consumer::new(high_water, self.window);
    }

    fn confirm(&self, link: &EntityLink, delivery: &Delivery, verdict: Verdict) {
        if let Some(confirm) = self.consumer.confirm(&delivery.tag, verdict) {
            link.signal(SignalKind::Confirm {
                to: delivery.reply_to,
                producer: delivery.tag.producer.clone(),
                confirm,
            });
        }
    }
}
