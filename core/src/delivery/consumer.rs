//! The entity's side: which producer messages to apply, which are duplicates, and what to
//! confirm.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{ProducerId, Seq};

/// For each producer, the sequence number of the newest message the entity applied: the state
/// that makes redelivery harmless. Store it with the entity's state for effectively-once
/// delivery.
#[derive(Clone, Debug, Default, Deserialize, Eq, PartialEq, Serialize)]
pub struct HighWater(BTreeMap<ProducerId, Seq>);

impl HighWater {
    /// The newest message of `producer` applied (`Seq(0)`: none).
    pub fn of(&self, producer: &ProducerId) -> Seq {
        self.0.get(producer).copied().unwrap_or(Seq(0))
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
}

/// What the entity tells a producer: everything up to `up_to` is applied, and it may have up to
/// `demand` more in flight beyond it; `resend`: send again from `up_to + 1` now (a gap was seen).
#[derive(Clone, Copy, Debug, Deserialize, Eq, PartialEq, Serialize)]
pub struct Confirm {
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

    /// Judges message `seq` of `producer`.
    pub fn handle_message(&self, producer: &ProducerId, seq: Seq) -> Verdict {
        let applied = self.high_water.of(producer);
        if seq <= applied {
            crate::probe::hit("delivery: a duplicate is dropped");
            Verdict::Duplicate
        } else if seq.0 == applied.0 + 1 {
            Verdict::Apply
        } else {
            crate::probe::hit("delivery: a message past a gap is dropped");
            Verdict::Gap
        }
    }

    /// Message `seq` of `producer` was applied (its effect is durable with the high-water mark
    /// when the entity persists).
    pub fn processed(&mut self, producer: &ProducerId, seq: Seq) {
        let mark = self.high_water.0.entry(producer.clone()).or_insert(Seq(0));
        *mark = (*mark).max(seq);
    }

    /// What to tell `producer` after a message judged `verdict`.
    pub fn confirm(&self, producer: &ProducerId, verdict: Verdict) -> Confirm {
        Confirm {
            up_to: self.high_water.of(producer),
            demand: self.window,
            resend: verdict == Verdict::Gap,
        }
    }
}
