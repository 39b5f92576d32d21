//! An entity's mailbox: a bounded queue that holds memory only while it holds mail, and that
//! schedules its entity on its shard's driver (see `driver`) rather than waking a task of its
//! own. Most entities are idle most of the time: an idle one holds no buffer and no future.
//!
//! The semantics are those the entity runtime relies on: a non-blocking `try_send` that gives
//! the mail back when the box is full or its entity is gone, senders that clone (the host's and
//! the entity's direct route), and a receiver that sees the end once every sender is dropped
//! and the queue drained (a graceful stop). Dropping the receiver (a forced stop) drops what
//! is queued, answering nobody: askers see their oneshot closed.
//!
//! **Scheduling.** The receiver is handled by turns: a turn takes mail until [`Next::Idle`],
//! which marks the mailbox unscheduled under the same lock that saw it empty. The next mail
//! (or the last sender leaving) then marks it scheduled again and sends its generation to the
//! driver once, so a turn is never started twice and mail never waits without one.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use shoal_core::Payload;
use tokio::sync::{mpsc, oneshot};

use crate::error::AskError;

/// Waits for an ask's reply.
pub(crate) type AskAnswer = oneshot::Sender<Result<Vec<u8>, AskError>>;

/// What an entity's mailbox holds.
pub(crate) enum Mail {
    /// A letter the node delivered (its payload, as the core carries it).
    Letter(Payload),
    /// A message a handle of this node sent on the entity's direct route.
    Direct(DirectMail),
}

/// A message sent on a direct route: its postcard bytes and, for an ask, where the reply goes.
pub(crate) struct DirectMail {
    pub(crate) message: Vec<u8>,
    pub(crate) answer: Option<AskAnswer>,
}

/// Where a mailbox schedules its entity: the driver's queue of generations due a turn.
pub(crate) type Schedule = mpsc::UnboundedSender<u64>;

/// A mailbox holding at most `capacity` mail for the incarnation `generation`, scheduled on
/// `schedule`. It starts scheduled: the driver gives a new entity its first turn (its start).
pub(crate) fn mailbox(
    capacity: usize,
    generation: u64,
    schedule: Schedule,
) -> (MailSender, MailReceiver) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            first: None,
            queue: VecDeque::new(),
            capacity,
            senders: 1,
            receiving: true,
            scheduled: true,
        }),
        generation,
        schedule,
    });
    (MailSender(Arc::clone(&shared)), MailReceiver(shared))
}

struct Shared {
    state: Mutex<State>,
    generation: u64,
    schedule: Schedule,
}

struct State {
    /// The oldest mail, when it came to an empty mailbox: an entity handling one message at
    /// a time (an ask, its reply, the next ask) never allocates a buffer.
    first: Option<Mail>,
    /// The mail after it.
    queue: VecDeque<Mail>,
    capacity: usize,
    senders: usize,
    /// The receiver still exists.
    receiving: bool,
    /// A turn runs or is due: mail needs no scheduling.
    scheduled: bool,
}

impl State {
    fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.queue.len()
    }

    fn push(&mut self, mail: Mail) {
        if self.first.is_none() && self.queue.is_empty() {
            self.first = Some(mail);
        } else {
            self.queue.push_back(mail);
        }
    }

    fn pop(&mut self) -> Option<Mail> {
        self.first.take().or_else(|| self.queue.pop_front())
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every change under the lock is a single push, pop, count or flag: consistent even
        // if a holder panicked.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Marks the mailbox scheduled; `true` if the driver must be told (it was not).
    fn needs_turn(state: &mut State) -> bool {
        state.receiving && !std::mem::replace(&mut state.scheduled, true)
    }

    fn schedule(&self) {
        // The driver outlives its mailboxes except at shutdown, when nobody handles mail.
        let _ = self.schedule.send(self.generation);
    }
}

/// Why mail was not accepted; the mail comes back.
pub(crate) enum Refused {
    /// The mailbox holds its capacity.
    Full(Mail),
    /// The entity is gone.
    Closed(Mail),
}

impl std::fmt::Debug for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Full(_) => "Full(..)",
            Self::Closed(_) => "Closed(..)",
        })
    }
}

impl Refused {
    /// The mail that was refused.
    pub(crate) fn into_inner(self) -> Mail {
        match self {
            Self::Full(mail) | Self::Closed(mail) => mail,
        }
    }
}

/// Puts mail into a mailbox; the mailbox ends when every clone is dropped.
pub(crate) struct MailSender(Arc<Shared>);

impl MailSender {
    /// Queues `mail` now, or gives it back.
    pub(crate) fn try_send(&self, mail: Mail) -> Result<(), Refused> {
        let mut state = self.0.lock();
        if !state.receiving {
            return Err(Refused::Closed(mail));
        }
        if state.len() >= state.capacity {
            return Err(Refused::Full(mail));
        }
        state.push(mail);
        let turn = Shared::needs_turn(&mut state);
        drop(state);
        if turn {
            self.0.schedule();
        }
        Ok(())
    }
}

impl Clone for MailSender {
    fn clone(&self) -> Self {
        self.0.lock().senders += 1;
        Self(Arc::clone(&self.0))
    }
}

impl Drop for MailSender {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.senders -= 1;
        // The last sender gone is the end the receiver must see (a graceful stop).
        let turn = state.senders == 0 && Shared::needs_turn(&mut state);
        drop(state);
        if turn {
            self.0.schedule();
        }
    }
}

/// What a turn takes out of a mailbox.
pub(crate) enum Next {
    /// The next mail.
    Mail(Mail),
    /// Nothing queued: the turn ends, and the next mail schedules another.
    Idle,
    /// Every sender is gone and the queue drained: the entity stops.
    End,
}

/// Takes mail out of a mailbox (its entity's turns).
pub(crate) struct MailReceiver(Arc<Shared>);

impl MailReceiver {
    /// The next mail, or why there is none; [`Next::Idle`] unschedules the mailbox and frees
    /// its buffer.
    pub(crate) fn next(&mut self) -> Next {
        let mut state = self.0.lock();
        if let Some(mail) = state.pop() {
            return Next::Mail(mail);
        }
        if state.senders == 0 {
            return Next::End;
        }
        state.scheduled = false;
        state.queue = VecDeque::new();
        Next::Idle
    }

    /// Whether a turn is due (mail came, or the last sender left, since [`Self::next`] said
    /// [`Next::Idle`]).
    pub(crate) fn scheduled(&self) -> bool {
        self.0.lock().scheduled
    }
}

impl Drop for MailReceiver {
    fn drop(&mut self) {
        let queued = {
            let mut state = self.0.lock();
            state.receiving = false;
            (state.first.take(), std::mem::take(&mut state.queue))
        };
        // Dropped outside the lock: mail may hold oneshots whose drop wakes an asker.
        drop(queued);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn letter(n: u8) -> Mail {
        Mail::Letter(Payload(vec![n]))
    }

    fn number(next: Next) -> Option<u8> {
        match next {
            Next::Mail(Mail::Letter(payload)) => Some(payload.0[0]),
            Next::Mail(Mail::Direct(_)) => panic!("a letter was sent"),
            Next::Idle | Next::End => None,
        }
    }

    #[test]
    fn mail_comes_out_in_order_and_the_end_after_the_last_sender_and_the_last_mail() {
        let (schedule, _turns) = mpsc::unbounded_channel();
        let (sender, mut receiver) = mailbox(2, 1, schedule);
        let other = sender.clone();
        sender.try_send(letter(1)).unwrap();
        other.try_send(letter(2)).unwrap();
        assert!(matches!(sender.try_send(letter(3)), Err(Refused::Full(_))));
        drop(sender);
        assert_eq!(number(receiver.next()), Some(1));
        other.try_send(letter(4)).unwrap();
        drop(other);
        assert_eq!(number(receiver.next()), Some(2));
        assert_eq!(number(receiver.next()), Some(4));
        assert!(
            matches!(receiver.next(), Next::End),
            "every sender gone, queue drained"
        );
    }

    #[test]
    fn an_idle_mailbox_is_scheduled_once_by_mail_and_by_the_end() {
        let (schedule, mut turns) = mpsc::unbounded_channel();
        let (sender, mut receiver) = mailbox(8, 7, schedule);
        assert!(receiver.scheduled(), "a new entity's first turn is due");
        assert!(matches!(receiver.next(), Next::Idle));
        assert!(!receiver.scheduled());
        sender.try_send(letter(1)).unwrap();
        sender.try_send(letter(2)).unwrap();
        assert_eq!(
            turns.try_recv().ok(),
            Some(7),
            "scheduled by the first mail"
        );
        assert!(turns.try_recv().is_err(), "and only once");
        assert_eq!(number(receiver.next()), Some(1));
        assert_eq!(number(receiver.next()), Some(2));
        assert!(matches!(receiver.next(), Next::Idle));
        drop(sender);
        assert_eq!(turns.try_recv().ok(), Some(7), "scheduled by the end");
        assert!(matches!(receiver.next(), Next::End));
    }

    #[test]
    fn a_gone_receiver_refuses_mail_and_an_idle_queue_frees_its_buffer() {
        let (schedule, _turns) = mpsc::unbounded_channel();
        let (sender, mut receiver) = mailbox(64, 1, schedule);
        for n in 0..20 {
            sender.try_send(letter(n)).unwrap();
        }
        for _ in 0..20 {
            assert!(matches!(receiver.next(), Next::Mail(_)));
        }
        assert!(matches!(receiver.next(), Next::Idle));
        assert_eq!(receiver.0.lock().queue.capacity(), 0, "freed when idle");
        drop(receiver);
        assert!(matches!(
            sender.try_send(letter(1)),
            Err(Refused::Closed(_))
        ));
    }
}
