//! Persistent entities in the simulated host, as the runtime runs them: an incarnation first
//! recovers (claiming its shard's epoch in the store), then turns each message it is handed
//! into one event, written one at a time, each after the last was acknowledged; an ask's reply
//! leaves only once its event's write was answered (an error reply when it failed). A failed or
//! timed-out write (its outcome unknown), or one out of sequence, makes it recover again; a
//! fenced one stops it for good, and its node hears `Input::WriteFenced`.
//!
//! A reliably delivered message is judged when its turn to be written comes, against the
//! marks the incarnation recovered and those it wrote since (as the runtime's entity turn
//! judges it before handling it): a duplicate, a message past a gap or one of an older session
//! is confirmed (or not) without a write; the next one is written with its mark, and confirmed
//! once the write is answered. One whose write failed is, once the incarnation has recovered,
//! confirmed if the write landed after all, or asked for again at once.

use std::collections::{BTreeMap, VecDeque};

use shoal_core::delivery::{Consumer, HighWater, Mark, Tag, Verdict};
use shoal_core::lease::FencingToken;
use shoal_core::{EntityType, Epoch, Payload, ShardId};

use crate::delivering::{Confirmation, Reliable, judge};
use crate::entity_host::Life;
use crate::options::Persist;
use crate::store::{StateAnswer, StateCall};

/// A message waiting for its write: its event's id, the ask it answers, the reliable
/// delivery it confirms.
#[derive(Debug)]
struct Item {
    id: u64,
    ask: Option<Payload>,
    delivery: Option<Reliable>,
}

/// One running incarnation's writer.
#[derive(Debug)]
struct Writer {
    shard: ShardId,
    epoch: Epoch,
    /// The token its shard held the shard's lease under when it started, if leased.
    lease_token: Option<FencingToken>,
    /// The newest event it knows of; `None` while it recovers.
    newest: Option<u64>,
    since_snapshot: u64,
    /// A call is out.
    busy: bool,
    /// Messages waiting to be written, in order.
    queue: VecDeque<Item>,
    /// The message the write out is for.
    answering: Option<Item>,
    /// Its reliable delivery marks, as recovered and written since.
    consumer: Consumer,
    /// The marks its recovery read (written by an earlier incarnation).
    recovered: HighWater,
    /// The reliable delivery whose write failed: once recovered, its producer hears whether
    /// the write landed, or to send it again at once.
    failed: Option<Reliable>,
}

/// Messages a persistent incarnation holds waiting for their writes (its mailbox, as the
/// runtime bounds it): a slower store than the traffic fills it, and further messages are
/// refused (`Input::MailboxFull`), as the runtime refuses them, rather than waiting behind a
/// backlog that would outlast the run.
const MAILBOX: usize = 32;

/// What the simulator does after an answer.
#[derive(Debug, PartialEq)]
pub(crate) enum Next {
    /// Nothing more.
    Idle,
    /// Make this call.
    Call(StateCall),
    /// The write was refused for its epoch: report it, and stop the incarnation.
    Fenced { epoch: Epoch, current: Epoch },
}

/// Every persistent incarnation's writer.
#[derive(Debug)]
pub(crate) struct Persisting {
    options: Persist,
    entity_type: EntityType,
    writers: BTreeMap<Life, Writer>,
    next_id: u64,
    /// Whether duplicates are dropped (off only in reliable delivery's negative control).
    suppress_duplicates: bool,
    /// The demand an entity grants a producer.
    window: u32,
    /// The reliably delivered message each event written is the effect of, by event id.
    effects: BTreeMap<u64, Tag>,
    /// Confirmations to send, collected as calls are answered.
    confirms: Vec<Confirmation>,
    /// Duplicates recognised by a mark an earlier incarnation wrote, since the last look.
    recognised: u64,
}

impl Persisting {
    /// Persistence for `entity_type` with `options`.
    /// `(suppress_duplicates, window)`: how its entities judge reliably delivered messages
    /// (see [`crate::delivering`]).
    pub(crate) fn new(
        options: Persist,
        entity_type: EntityType,
        (suppress_duplicates, window): (bool, u32),
    ) -> Self {
        Self {
            options,
            entity_type,
            writers: BTreeMap::new(),
            next_id: 0,
            suppress_duplicates,
            window,
            effects: BTreeMap::new(),
            confirms: Vec::new(),
            recognised: 0,
        }
    }

    /// The confirmations due since the last call.
    pub(crate) fn take_confirms(&mut self) -> Vec<Confirmation> {
        std::mem::take(&mut self.confirms)
    }

    /// How many duplicates were recognised by a mark an earlier incarnation wrote (a message
    /// sent again after its entity moved or restarted) since the last call.
    pub(crate) fn take_recognised(&mut self) -> u64 {
        std::mem::take(&mut self.recognised)
    }

    /// The reliably delivered message event `id` is the effect of, if any.
    pub(crate) fn effect_of(&self, id: u64) -> Option<&Tag> {
        self.effects.get(&id)
    }

    /// The incarnation `life` of a shard allocated at `epoch` (and holding its lease under
    /// `lease_token`, if leased) started: its recovery.
    pub(crate) fn started(
        &mut self,
        life: Life,
        shard: ShardId,
        (epoch, lease_token): (Epoch, Option<FencingToken>),
    ) -> StateCall {
        let writer = Writer {
            shard,
            epoch,
            lease_token,
            newest: None,
            since_snapshot: 0,
            busy: true,
            queue: VecDeque::new(),
            answering: None,
            consumer: Consumer::new(HighWater::default(), self.window),
            recovered: HighWater::default(),
            failed: None,
        };
        let call = self.recover(&life, &writer);
        self.writers.insert(life, writer);
        call
    }

    /// `life` was handed a message (`ask`: an ask it answers once the event is written;
    /// `delivery`: a reliable delivery it confirms then): one more event to write; the call to
    /// make now, if any. `Err` gives the ask back when `life` does not persist (it answers at
    /// once).
    pub(crate) fn handed(
        &mut self,
        life: &Life,
        ask: Option<Payload>,
        delivery: Option<Reliable>,
    ) -> Result<Option<StateCall>, Option<Payload>> {
        self.next_id += 1;
        let id = self.next_id;
        let Some(writer) = self.writers.get_mut(life) else {
            return Err(ask);
        };
        writer.queue.push_back(Item { id, ask, delivery });
        Ok(self.pump(life))
    }

    /// Whether `life`'s mailbox is full: its next message is refused.
    pub(crate) fn mailbox_full(&self, life: &Life) -> bool {
        self.writers
            .get(life)
            .is_some_and(|w| w.queue.len() >= MAILBOX)
    }

    /// Whether `life` runs (has not ended, nor been fenced).
    pub(crate) fn runs(&self, life: &Life) -> bool {
        self.writers.contains_key(life)
    }

    /// The incarnation ended: its calls' answers are ignored. The asks it had not answered
    /// yet, to answer now (a graceful stop handles what its mailbox holds; the simulator does
    /// not tell a forced one apart).
    pub(crate) fn ended(&mut self, life: &Life) -> Vec<Payload> {
        let Some(writer) = self.writers.remove(life) else {
            return Vec::new();
        };
        let items = writer.answering.into_iter().chain(writer.queue);
        items.filter_map(|item| item.ask).collect()
    }

    /// The store answered `life`'s `call`: what to do next, and the asks to answer now.
    pub(crate) fn answered(
        &mut self,
        life: &Life,
        call: &StateCall,
        answer: StateAnswer,
    ) -> (Next, Vec<Payload>) {
        let Some(writer) = self.writers.get_mut(life) else {
            return (Next::Idle, Vec::new());
        };
        writer.busy = false;
        let answering = writer.answering.take();
        let mut replies: Vec<Payload> = Vec::new();
        if let Some(item) = answering {
            replies.extend(item.ask);
            match (&answer, item.delivery) {
                (StateAnswer::Written, Some(delivery)) => {
                    writer.consumer.processed(&delivery.tag);
                    let confirm = writer.consumer.confirm(&delivery.tag, Verdict::Apply);
                    self.confirms
                        .extend(Confirmation::of(life, &delivery, confirm));
                }
                (StateAnswer::Conflict(_) | StateAnswer::Failed(_), Some(delivery)) => {
                    writer.failed = Some(delivery);
                }
                _ => {}
            }
        }
        match answer {
            StateAnswer::Recovered { ids, marks, .. } => {
                writer.newest = Some(ids.len() as u64);
                writer.since_snapshot = 0;
                writer.consumer = Consumer::new(marks.clone(), self.window);
                writer.recovered = marks;
                if let Some(delivery) = writer.failed.take() {
                    let confirm = writer.consumer.confirm_after_failure(&delivery.tag);
                    self.confirms
                        .extend(Confirmation::of(life, &delivery, confirm));
                }
            }
            StateAnswer::Written => {
                if let StateCall::Append { ids, snapshot, .. } = call {
                    let count = ids.len() as u64;
                    writer.newest = writer.newest.map(|n| n + count);
                    writer.since_snapshot = if *snapshot {
                        0
                    } else {
                        writer.since_snapshot + count
                    };
                }
            }
            StateAnswer::Fenced(current) => {
                let epoch = writer.epoch;
                replies.extend(self.ended(life));
                return (Next::Fenced { epoch, current }, replies);
            }
            StateAnswer::Conflict(_) | StateAnswer::Failed(_) => {
                // Supervision restarts it: it recovers, and the message whose write failed
                // was answered with an error (its event is not retried; a reliable delivery's
                // producer is told once the recovery says whether it landed).
                writer.newest = None;
                writer.busy = true;
                let writer = self.writers.get(life).expect("just seen");
                return (Next::Call(self.recover(life, writer)), replies);
            }
        }
        (self.pump(life).map_or(Next::Idle, Next::Call), replies)
    }

    /// The next write of `life`, if it is ready for one. A reliable delivery not to be
    /// applied is answered on its turn, without a write.
    fn pump(&mut self, life: &Life) -> Option<StateCall> {
        let writer = self.writers.get_mut(life)?;
        let newest = writer.newest?;
        if writer.busy {
            return None;
        }
        let (item, mark) = loop {
            let item = writer.queue.pop_front()?;
            let Some(delivery) = &item.delivery else {
                break (item, None);
            };
            let verdict = judge(&writer.consumer, &delivery.tag, self.suppress_duplicates);
            if verdict == Verdict::Apply {
                let tag = &delivery.tag;
                let mark = Mark {
                    session: tag.session,
                    seq: tag.seq,
                };
                let producer = tag.producer.clone();
                self.effects.insert(item.id, tag.clone());
                break (item, Some((producer, mark)));
            }
            let earlier = writer.recovered.of(&delivery.tag.producer);
            if verdict == Verdict::Duplicate
                && earlier.session == delivery.tag.session
                && delivery.tag.seq <= earlier.seq
            {
                self.recognised += 1;
            }
            let confirm = writer.consumer.confirm(&delivery.tag, verdict);
            self.confirms
                .extend(Confirmation::of(life, delivery, confirm));
        };
        let id = item.id;
        writer.answering = Some(item);
        writer.busy = true;
        let snapshot = writer.since_snapshot + 1 >= self.options.snapshot_every;
        Some(StateCall::Append {
            entity_type: self.entity_type.clone(),
            entity: life.1.clone(),
            shard: writer.shard,
            epoch: writer.epoch,
            lease_token: writer.lease_token,
            first_seq: newest + 1,
            ids: vec![id],
            snapshot,
            mark,
        })
    }

    fn recover(&self, life: &Life, writer: &Writer) -> StateCall {
        StateCall::Recover {
            entity_type: self.entity_type.clone(),
            entity: life.1.clone(),
            shard: writer.shard,
            epoch: writer.epoch,
            lease_token: writer.lease_token,
        }
    }
}
