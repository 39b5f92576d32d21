//! The entity's side: which producer messages to apply, which are duplicates, and what to
//! confirm.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{ProducerId, Seq, Tag};

/// One producer's newest message an entity applied: its session and sequence number.
#[derive(Clone, Copy, Debug, Default, Deserialize, Eq, Ord, PartialEq, PartialOrd, Serialize)]
pub struct Mark {
    /// The producer's session.
    pub session: u64,
    /// The newest message of that session applied.
    pub seq: Seq,
}

/// For each producer, the newest message the entity applied: the state that makes redelivery
/// harmless. Store it with the entity's state for effectively-once delivery.
#[derive(Clone, Debug, Default, Deserialize, Eq, PartialEq, Serialize)]
pub struct HighWater(BTreeMap<ProducerId, Mark>);

impl HighWater {
    /// The newest message of `producer` applied (`Mark::default()`: none).
    pub fn of(&self, producer: &ProducerId) -> Mark {
        self.0.get(producer).copied().unwrap_or_default()
    }

    /// Records `mark` for `producer`, unless it has a newer one.
    pub fn record(&mut self, producer: &ProducerId, mark: Mark) {
        let entry = self.0.entry(producer.clone()).or_default();
        *entry = (*entry).max(mark);
    }

    /// Every producer's mark, in producer order.
    pub fn iter(&self) -> impl Iterator<Item = (&ProducerId, Mark)> {
        self.0.iter().map(|(producer, mark)| (producer, *mark))
    }

    /// The producers it knows.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it knows no producer.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// What to do with one producer message.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum Verdict {
    /// The next of its producer's: apply it, then [`Consumer::processed`].
    Apply,
    /// Applied already (a resend that crossed its confirmation, or a redelivery after a move):
    /// drop it and confirm again.
    Duplicate,
    /// Past a gap (an earlier one was lost on its way): drop it and ask for a resend from the
    /// first missing one.
    Gap,
    /// From a session older than one the entity has seen from its producer (a producer that
    /// restarted since): drop it, confirming nothing.
    Stale,
}

/// What the entity tells a producer: everything of `session` up to `up_to` is applied, and it
/// may have up to `demand` more in flight beyond it; `resend`: send again from `up_to + 1` now
/// (a gap was seen).
#[derive(Clone, Copy, Debug, Deserialize, Eq, PartialEq, Serialize)]
pub struct Confirm {
    /// The producer's session it answers.
    pub session: u64,
    /// The newest message applied.
    pub up_to: Seq,
    /// How many more may be in flight beyond `up_to`.
    pub demand: u32,
    /// Resend everything after `up_to` at once.
    pub resend: bool,
}

/// One entity's consumer side, for every producer that sends it.
#[derive(Clone, Debug)]
pub struct Consumer {
    high_water: HighWater,
    window: u32,
}

impl Consumer {
    /// A consumer that has applied what `high_water` says, granting `window` messages in flight
    /// per producer (at least 1).
    pub fn new(high_water: HighWater, window: u32) -> Self {
        Self {
            high_water,
            window: window.max(1),
        }
    }

    /// The high-water marks, to store with the entity's state.
    pub fn high_water(&self) -> &HighWater {
        &self.high_water
    }

    /// Judges a message.
    pub fn handle_message(&self, tag: &Tag) -> Verdict {
        let mark = self.high_water.of(&tag.producer);
        if mark.session > tag.session {
            crate::probe::hit("delivery: an older session's message is dropped");
            return Verdict::Stale;
        }
        let applied = self.applied(tag);
        if tag.seq <= applied {
            crate::probe::hit("delivery: a duplicate is dropped");
            Verdict::Duplicate
        } else if tag.seq.0 == applied.0 + 1 {
            Verdict::Apply
        } else {
            crate::probe::hit("delivery: a message past a gap is dropped");
            Verdict::Gap
        }
    }

    /// The message `tag` was applied (its effect is durable with the high-water mark when the
    /// entity persists).
    pub fn processed(&mut self, tag: &Tag) {
        let mark = Mark {
            session: tag.session,
            seq: tag.seq,
        };
        self.high_water.record(&tag.producer, mark);
    }

    /// What to tell the producer after its message `tag` was judged `verdict` (`None` for a
    /// stale one: its session is over).
    pub fn confirm(&self, tag: &Tag, verdict: Verdict) -> Option<Confirm> {
        (verdict != Verdict::Stale).then(|| Confirm {
            session: tag.session,
            up_to: self.applied(tag),
            demand: self.window,
            resend: verdict == Verdict::Gap,
        })
    }

    /// What to tell the producer of `tag` once the entity has recovered from failing to carry
    /// the message out (its write failed: it may or may not have landed, and the marks the
    /// recovery read say which): confirm it if it landed, otherwise ask for it again at once,
    /// rather than leave the producer to find out by a timeout. `None` for a stale one.
    pub fn confirm_after_failure(&self, tag: &Tag) -> Option<Confirm> {
        let verdict = self.handle_message(tag);
        let confirm = self.confirm(tag, verdict)?;
        if verdict != Verdict::Duplicate {
            crate::probe::hit("delivery: a message whose write failed is asked for again");
        }
        Some(Confirm {
            resend: verdict != Verdict::Duplicate,
            ..confirm
        })
    }

    /// The newest message of `tag`'s session known applied: by this consumer's mark, or
    /// confirmed to the producer (applied by an earlier incarnation).
    fn applied(&self, tag: &Tag) -> Seq {
        let mark = self.high_water.of(&tag.producer);
        let own = if mark.session == tag.session {
            mark.seq
        } else {
            Seq(0)
        };
        own.max(tag.confirmed)
    }
}
