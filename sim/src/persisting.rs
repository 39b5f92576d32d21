//! Persistent entities in the simulated host, as the runtime runs them: an incarnation first
//! recovers (claiming its shard's epoch in the store), then turns each message it is handed
//! into one event, written one at a time, each after the last was acknowledged; an ask's reply
//! leaves only once its event's write was answered (an error reply when it failed). A failed or
//! timed-out write (its outcome unknown), or one out of sequence, makes it recover again; a
//! fenced one stops it for good, and its node hears `Input::WriteFenced`.

use std::collections::{BTreeMap, VecDeque};

use shoal_core::{EntityType, Epoch, Payload, ShardId};

use crate::entity_host::Life;
use crate::options::Persist;
use crate::store::{StateAnswer, StateCall};

/// One running incarnation's writer.
#[derive(Debug)]
struct Writer {
    shard: ShardId,
    epoch: Epoch,
    /// The newest event it knows of; `None` while it recovers.
    newest: Option<u64>,
    since_snapshot: u64,
    /// A call is out.
    busy: bool,
    /// Events (their ids) waiting to be written, in order, each with the ask it answers.
    queue: VecDeque<(u64, Option<Payload>)>,
    /// The ask the write out answers.
    answering: Option<Payload>,
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
}

impl Persisting {
    /// Persistence for `entity_type` with `options`.
    pub(crate) fn new(options: Persist, entity_type: EntityType) -> Self {
        Self {
            options,
            entity_type,
            writers: BTreeMap::new(),
            next_id: 0,
        }
    }

    /// The incarnation `life` of a shard allocated at `epoch` started: its recovery.
    pub(crate) fn started(&mut self, life: Life, shard: ShardId, epoch: Epoch) -> StateCall {
        let writer = Writer {
            shard,
            epoch,
            newest: None,
            since_snapshot: 0,
            busy: true,
            queue: VecDeque::new(),
            answering: None,
        };
        let call = self.recover(&life, &writer);
        self.writers.insert(life, writer);
        call
    }

    /// `life` was handed a message (`ask`: an ask it answers once the event is written): one
    /// more event to write; the call to make now, if any. `Err` gives the ask back when `life`
    /// does not persist (it answers at once).
    pub(crate) fn handed(
        &mut self,
        life: &Life,
        ask: Option<Payload>,
    ) -> Result<Option<StateCall>, Option<Payload>> {
        self.next_id += 1;
        let id = self.next_id;
        let Some(writer) = self.writers.get_mut(life) else {
            return Err(ask);
        };
        writer.queue.push_back((id, ask));
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
        let queued = writer.queue.into_iter().filter_map(|(_, ask)| ask);
        writer.answering.into_iter().chain(queued).collect()
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
        let mut replies: Vec<Payload> = writer.answering.take().into_iter().collect();
        match answer {
            StateAnswer::Recovered { ids, .. } => {
                writer.newest = Some(ids.len() as u64);
                writer.since_snapshot = 0;
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
                // was answered with an error (its event is not retried).
                writer.newest = None;
                writer.busy = true;
                let writer = self.writers.get(life).expect("just seen");
                return (Next::Call(self.recover(life, writer)), replies);
            }
        }
        (self.pump(life).map_or(Next::Idle, Next::Call), replies)
    }

    /// The next write of `life`, if it is ready for one.
    fn pump(&mut self, life: &Life) -> Option<StateCall> {
        let writer = self.writers.get_mut(life)?;
        let newest = writer.newest?;
        if writer.busy {
            return None;
        }
        let (id, ask) = writer.queue.pop_front()?;
        writer.answering = ask;
        writer.busy = true;
        let snapshot = writer.since_snapshot + 1 >= self.options.snapshot_every;
        Some(StateCall::Append {
            entity_type: self.entity_type.clone(),
            entity: life.1.clone(),
            shard: writer.shard,
            epoch: writer.epoch,
            first_seq: newest + 1,
            ids: vec![id],
            snapshot,
        })
    }

    fn recover(&self, life: &Life, writer: &Writer) -> StateCall {
        StateCall::Recover {
            entity_type: self.entity_type.clone(),
            entity: life.1.clone(),
            shard: writer.shard,
            epoch: writer.epoch,
        }
    }
}
