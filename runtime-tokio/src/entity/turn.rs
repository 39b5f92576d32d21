//! An entity's turns: each decodes the letters waiting in its mailbox, runs the typed entity,
//! answers asks, supervises panics and failed persistence (restart with backoff, recovering a
//! persistent entity's state) and stops a fenced entity for good; its record reports its end
//! exactly once, however it ends.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures_util::FutureExt;
use shoal_core::EntityId;

use super::letter::{AskFailure, AskRef, Delivery, Letter};
use super::mailbox::{AskAnswer, Mail, MailReceiver, Next};
use super::{Entity, EntityContext, Lifecycle, SignalKind, Verdict};
use crate::error::AskError;
use crate::metric_names;

/// First restart delay after a panic; doubles per consecutive panic up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// An entity between its turns, as its shard's driver holds it.
pub(super) struct Record<E> {
    /// `None` until its first turn creates it, and while supervision recreates it.
    entity: Option<E>,
    /// Dropped with the record, however it ends, it reports the end (see its `Drop`).
    ctx: EntityContext,
    backoff: Duration,
    mail: MailReceiver,
}

impl<E> Record<E> {
    /// A new incarnation, created by its first turn.
    pub(super) fn new(ctx: EntityContext, mail: MailReceiver) -> Self {
        Self {
            entity: None,
            ctx,
            backoff: MIN_BACKOFF,
            mail,
        }
    }

    /// Its context.
    pub(super) fn ctx(&self) -> &EntityContext {
        &self.ctx
    }

    /// Whether another turn is due (mail came after the last one ended).
    pub(super) fn scheduled(&self) -> bool {
        self.mail.scheduled()
    }
}

/// How a turn ended.
pub(super) enum Finish {
    /// The mailbox is empty: the entity waits, without a future, for its next mail.
    Idle,
    /// The incarnation is over (stopped, fenced); dropping the record reports it.
    Ended,
}

/// Sleeps `delay` (supervision's backoff), boxed: a turn's future is as large as its largest
/// await, and a timer is large for what a turn usually holds.
fn sleep_boxed(delay: Duration) -> std::pin::Pin<Box<tokio::time::Sleep>> {
    Box::pin(tokio::time::sleep(delay))
}

/// One turn of an entity: creates it if it has no instance yet, then handles its mail one
/// message at a time until the mailbox is empty (or the end: its stop hook runs).
pub(super) async fn turn<E: Entity>(
    make: &(impl Fn(&EntityId) -> E + ?Sized),
    record: &mut Record<E>,
) -> Finish {
    let Record {
        entity,
        ctx,
        backoff,
        mail,
    } = record;
    if entity.is_none() {
        match Box::pin(create(make, ctx, backoff)).await {
            Some(created) => *entity = Some(created),
            None => return Finish::Ended,
        }
    }
    loop {
        let next = match mail.next() {
            Next::Mail(next) => next,
            Next::Idle => return Finish::Idle,
            Next::End => break,
        };
        let Some(current) = entity.as_mut() else {
            return Finish::Ended;
        };
        match handle(current, ctx, next, *backoff).await {
            Handled::Done => *backoff = MIN_BACKOFF,
            Handled::Kept => {}
            Handled::Fenced(current) => {
                fenced(ctx, current);
                return Finish::Ended;
            }
            handled @ (Handled::Restart | Handled::Panicked) => {
                sleep_boxed(*backoff).await;
                *backoff = (*backoff * 2).min(MAX_BACKOFF);
                *entity = None;
                match Box::pin(create(make, ctx, backoff)).await {
                    Some(fresh) => *entity = Some(fresh),
                    None => return Finish::Ended,
                }
                if let Handled::Restart = handled {
                    let (inbox, link) = ctx.inbox_and_link();
                    inbox.restarted(link);
                }
            }
        }
        if ctx.take_passivate() {
            ctx.link()
                .signal(SignalKind::Lifecycle(Lifecycle::Passivate));
        }
    }
    // Every sender is gone: a graceful stop, after the queued messages.
    if let Some(entity) = entity.as_mut()
        && let Err(panic) = AssertUnwindSafe(entity.on_stop(ctx)).catch_unwind().await
    {
        metrics::counter!(metric_names::ENTITY_PANICS_TOTAL).increment(1);
        tracing::error!(entity = %ctx.id(), panic = panic_text(&*panic), "entity panicked in its stop hook");
    }
    Finish::Ended
}

/// What handling one mail came to, for supervision.
enum Handled {
    /// Handled (its effect done): the backoff resets.
    Done,
    /// Nothing ran (not a letter, a duplicate, a message that does not decode).
    Kept,
    /// A store refused a write at this incarnation's epoch, holding this newer one.
    Fenced(shoal_core::Epoch),
    /// A write failed: the entity is to be created afresh (it recovers its state).
    Restart,
    /// The entity panicked: it is to be created afresh.
    Panicked,
}

/// Decodes one mail and has the entity handle it, answering its ask and settling its
/// reliable delivery; `backoff` is how long a restart would wait.
async fn handle<E: Entity>(
    entity: &mut E,
    ctx: &mut EntityContext,
    mail: Mail,
    backoff: Duration,
) -> Handled {
    let Some(mut letter) = Received::of(mail) else {
        metrics::counter!(metric_names::ENTITY_LETTERS_MALFORMED_TOTAL).increment(1);
        tracing::warn!(entity = %ctx.id(), "a payload that is not a letter of this runtime");
        return Handled::Kept;
    };
    if let Some(delivery) = &letter.delivery {
        let (inbox, link) = ctx.inbox_and_link();
        if !inbox.admit(link, delivery) {
            return Handled::Kept;
        }
    }
    let message = match postcard::from_bytes::<E::Message>(&letter.message) {
        Ok(message) => message,
        Err(error) => {
            // Confirmed all the same: resending cannot make it decode.
            settle(ctx, &letter, Outcome::Done);
            metrics::counter!(metric_names::ENTITY_MESSAGES_UNDECODABLE_TOTAL).increment(1);
            tracing::warn!(entity = %ctx.id(), %error, "a message that does not decode as the entity's type");
            answer(ctx, &mut letter, Err(AskFailure::Codec(error.to_string())));
            return Handled::Kept;
        }
    };
    match AssertUnwindSafe(entity.handle(ctx, message))
        .catch_unwind()
        .await
    {
        Ok(reply) => {
            // A tell's reply goes nowhere: not encoded.
            if letter.answer.is_some() {
                let reply = postcard::to_allocvec(&reply)
                    .map_err(|error| AskFailure::Codec(error.to_string()));
                answer(ctx, &mut letter, reply);
            }
            let verdict = ctx.take_verdict();
            settle(ctx, &letter, Outcome::of(verdict.as_ref()));
            match verdict {
                None => Handled::Done,
                Some(Verdict::Fenced(current)) => Handled::Fenced(current),
                Some(Verdict::Restart(reason)) => {
                    tracing::warn!(entity = %ctx.id(), %reason, restart_in = ?backoff, "entity restarting");
                    Handled::Restart
                }
            }
        }
        Err(panic) => {
            metrics::counter!(metric_names::ENTITY_PANICS_TOTAL).increment(1);
            tracing::error!(
                entity_type = %ctx.entity_type(),
                entity = %ctx.id(),
                panic = panic_text(&*panic),
                restart_in = ?backoff,
                "entity panicked handling a message; restarting it"
            );
            answer(ctx, &mut letter, Err(AskFailure::Panicked));
            ctx.take_verdict();
            settle(ctx, &letter, Outcome::Dropped);
            Handled::Panicked
        }
    }
}

/// Makes the entity and runs its start hook, again after the backoff for as long as the hook
/// panics or asks for a restart (a persistent entity whose store cannot be read); `None` when
/// a store fenced it, which has then been reported.
async fn create<E: Entity>(
    make: &(impl Fn(&EntityId) -> E + ?Sized),
    ctx: &mut EntityContext,
    backoff: &mut Duration,
) -> Option<E> {
    loop {
        let mut entity = make(ctx.id());
        let failure = match AssertUnwindSafe(entity.on_start(ctx)).catch_unwind().await {
            Ok(()) => match ctx.take_verdict() {
                None => return Some(entity),
                Some(Verdict::Fenced(current)) => {
                    fenced(ctx, current);
                    return None;
                }
                Some(Verdict::Restart(reason)) => reason,
            },
            Err(panic) => {
                metrics::counter!(metric_names::ENTITY_PANICS_TOTAL).increment(1);
                ctx.take_verdict();
                format!("panicked in its start hook: {}", panic_text(&*panic))
            }
        };
        tracing::warn!(entity = %ctx.id(), reason = %failure, restart_in = ?*backoff, "entity could not start; retrying");
        sleep_boxed(*backoff).await;
        *backoff = (*backoff * 2).min(MAX_BACKOFF);
    }
}

/// A store refused the entity's write: the host tells the core, and the incarnation ends (its
/// mailbox's letters are dropped, as in a crash; the shard moves to the newer allocation).
fn fenced(ctx: &EntityContext, current: shoal_core::Epoch) {
    tracing::warn!(
        entity_type = %ctx.entity_type(),
        entity = %ctx.id(),
        epoch = ctx.epoch().0,
        current = current.0,
        "a state store fenced the entity's write: a newer incarnation exists; stopping"
    );
    ctx.link()
        .signal(SignalKind::Lifecycle(Lifecycle::WriteFenced(current)));
}

/// How the handling of a letter ended, for its reliable delivery.
enum Outcome {
    /// Its effect is done.
    Done,
    /// Its write failed: the entity restarts and recovers.
    WriteFailed,
    /// It was not carried out (a panic, a fenced write).
    Dropped,
}

impl Outcome {
    /// The outcome of a handling that ended with supervision's `verdict`.
    fn of(verdict: Option<&Verdict>) -> Self {
        match verdict {
            None => Self::Done,
            Some(Verdict::Restart(_)) => Self::WriteFailed,
            Some(Verdict::Fenced(_)) => Self::Dropped,
        }
    }
}

/// Ends a reliably delivered letter's handling: confirmed if its effect is done; after a
/// failed write, settled once the entity has recovered; else left for the producer to send
/// again after its timeout (a message that panics its entity is not hurried back).
fn settle(ctx: &mut EntityContext, letter: &Received, outcome: Outcome) {
    let Some(delivery) = &letter.delivery else {
        return;
    };
    let (inbox, link) = ctx.inbox_and_link();
    match outcome {
        Outcome::Done => inbox.applied(link, delivery),
        Outcome::WriteFailed => inbox.write_failed(delivery),
        Outcome::Dropped => inbox.abandoned(),
    }
}

/// A message as a turn handles it, whichever way it came.
struct Received {
    /// The entity's message, postcard-encoded.
    message: Vec<u8>,
    /// Where the answer goes; `None` for a tell, or once answered.
    answer: Option<Answer>,
    /// For a reliably delivered message: its tag.
    delivery: Option<Delivery>,
}

/// Where an ask's answer goes.
enum Answer {
    /// Through the host, to the asking member's request table (a letter the node delivered).
    Host(AskRef),
    /// Straight to the asking handle (a message sent on the direct route).
    Direct(AskAnswer),
}

impl Received {
    /// `None` for a payload that is not a letter of this runtime.
    fn of(mail: Mail) -> Option<Self> {
        Some(match mail {
            Mail::Letter(payload) => {
                let letter = Letter::from_payload(&payload).ok()?;
                Self {
                    message: letter.message,
                    answer: letter.ask.map(Answer::Host),
                    delivery: letter.delivery,
                }
            }
            Mail::Direct(mail) => Self {
                message: mail.message,
                answer: mail.answer.map(Answer::Direct),
                delivery: None,
            },
        })
    }
}

/// Sends the answer of an ask, once (nothing for a tell).
fn answer(ctx: &EntityContext, letter: &mut Received, answer: Result<Vec<u8>, AskFailure>) {
    match letter.answer.take() {
        Some(Answer::Host(ask)) => ctx.link().signal(SignalKind::Answer { ask, answer }),
        Some(Answer::Direct(waiting)) => {
            // An asker that gave up (timed out, dropped) no longer listens.
            let late = waiting.send(answer.map_err(AskError::from)).is_err();
            if late {
                ctx.link().shard.routes.note_late_reply();
            }
        }
        None => {}
    }
}

fn panic_text(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(not a string)")
}
