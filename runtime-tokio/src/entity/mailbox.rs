//! An entity's mailbox: a bounded queue that holds memory only while it holds mail. Most
//! entities are idle most of the time, and a tokio mpsc channel keeps a block of 32 slots
//! allocated from its creation (over a kilobyte per entity here); this queue frees its buffer
//! whenever it empties.
//!
//! The semantics are those the entity runtime relied on: a non-blocking `try_send` that gives
//! the mail back when the box is full or its entity is gone, senders that clone (the host's and
//! the entity's direct route), and a receiver that sees the end once every sender is dropped
//! and the queue drained (a graceful stop). Dropping the receiver (a forced stop) drops what
//! is queued, answering nobody: askers see their oneshot closed.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use shoal_core::Payload;
use tokio::sync::{Notify, oneshot};

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

/// Buffers of more slots than this are freed when the queue empties.
const KEEP_WHEN_EMPTY: usize = 4;

/// A mailbox holding at most `capacity` mail.
pub(crate) fn mailbox(capacity: usize) -> (MailSender, MailReceiver) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            queue: VecDeque::new(),
            capacity,
            senders: 1,
            receiving: true,
        }),
        arrived: Notify::new(),
    });
    (MailSender(Arc::clone(&shared)), MailReceiver(shared))
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the receiver: mail arrived in an empty queue, or the last sender left.
    arrived: Notify,
}

struct State {
    queue: VecDeque<Mail>,
    capacity: usize,
    senders: usize,
    /// The receiver still exists.
    receiving: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every change under the lock is a single push, pop or count: consistent even if a
        // holder panicked.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Why mail was not accepted; the mail comes back.
pub(crate) enum Refused {
    /// The mailbox holds its capacity.
    Full(Mail),
    /// The entity's task is gone.
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
        if state.queue.len() >= state.capacity {
            return Err(Refused::Full(mail));
        }
        let was_empty = state.queue.is_empty();
        state.queue.push_back(mail);
        drop(state);
        // The receiver waits only after it saw the queue empty.
        if was_empty {
            self.0.arrived.notify_one();
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
        if state.senders == 0 {
            drop(state);
            self.0.arrived.notify_one();
        }
    }
}

/// Takes mail out of a mailbox (the entity's task).
pub(crate) struct MailReceiver(Arc<Shared>);

impl MailReceiver {
    /// The next mail; `None` once every sender is gone and the queue is drained.
    pub(crate) async fn recv(&mut self) -> Option<Mail> {
        loop {
            {
                let mut state = self.0.lock();
                if let Some(mail) = state.queue.pop_front() {
                    if state.queue.is_empty() && state.queue.capacity() > KEEP_WHEN_EMPTY {
                        state.queue = VecDeque::new();
                    }
                    return Some(mail);
                }
                if state.senders == 0 {
                    return None;
                }
            }
            self.0.arrived.notified().await;
        }
    }
}

impl Drop for MailReceiver {
    fn drop(&mut self) {
        let queued = {
            let mut state = self.0.lock();
            state.receiving = false;
            std::mem::take(&mut state.queue)
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

    fn number(mail: Mail) -> u8 {
        match mail {
            Mail::Letter(payload) => payload.0[0],
            Mail::Direct(_) => panic!("a letter was sent"),
        }
    }

    #[tokio::test]
    async fn mail_comes_out_in_order_and_the_end_after_the_last_sender_and_the_last_mail() {
        let (sender, mut receiver) = mailbox(2);
        let other = sender.clone();
        sender.try_send(letter(1)).unwrap();
        other.try_send(letter(2)).unwrap();
        assert!(matches!(sender.try_send(letter(3)), Err(Refused::Full(_))));
        drop(sender);
        assert_eq!(receiver.recv().await.map(number), Some(1));
        other.try_send(letter(4)).unwrap();
        drop(other);
        assert_eq!(receiver.recv().await.map(number), Some(2));
        assert_eq!(receiver.recv().await.map(number), Some(4));
        assert!(
            receiver.recv().await.is_none(),
            "every sender gone, queue drained"
        );
    }

    #[tokio::test]
    async fn a_waiting_receiver_wakes_for_mail_and_for_the_end() {
        let (sender, mut receiver) = mailbox(8);
        let waiting = tokio::spawn(async move {
            let first = receiver.recv().await.map(number);
            (first, receiver.recv().await.is_none())
        });
        tokio::task::yield_now().await;
        sender.try_send(letter(7)).unwrap();
        drop(sender);
        assert_eq!(waiting.await.unwrap(), (Some(7), true));
    }

    #[tokio::test]
    async fn a_gone_receiver_refuses_mail_and_an_emptied_queue_frees_its_buffer() {
        let (sender, mut receiver) = mailbox(64);
        for n in 0..20 {
            sender.try_send(letter(n)).unwrap();
        }
        for _ in 0..20 {
            receiver.recv().await.unwrap();
        }
        assert_eq!(receiver.0.lock().queue.capacity(), 0, "freed when emptied");
        drop(receiver);
        assert!(matches!(
            sender.try_send(letter(1)),
            Err(Refused::Closed(_))
        ));
    }
}
