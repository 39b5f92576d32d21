//! One entity's task: decodes its letters, runs the typed entity, answers asks, supervises
//! panics and failed persistence (restart with backoff, recovering a persistent entity's
//! state), stops a fenced entity for good, and reports its end exactly once, however it ends.

use std::any::Any;
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use shoal_core::EntityId;
use tokio::task::JoinHandle;
use tracing::Instrument;

use super::letter::{AskFailure, AskRef, Delivery, Letter};
use super::mailbox::{AskAnswer, Mail, MailReceiver};
use super::{Entity, EntityContext, EntityLink, Lifecycle, SignalKind, Verdict};
use crate::error::AskError;
use crate::metric_names;

/// First restart delay after a panic; doubles per consecutive panic up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// Starts entities of one type (type-erased, so the host holds one per registered type).
pub(crate) trait Factory: Send + Sync {
    /// Spawns the task of a new incarnation reading `mailbox`.
    fn spawn(&self, mailbox: MailReceiver, link: EntityLink, span: tracing::Span)
    -> JoinHandle<()>;
}

/// A [`Factory`] of `E` made by a closure.
pub(crate) struct FactoryFn<E, F> {
    make: Arc<F>,
    entity: PhantomData<fn() -> E>,
}

impl<E, F> FactoryFn<E, F> {
    pub(crate) fn new(make: F) -> Self {
        Self {
            make: Arc::new(make),
            entity: PhantomData,
        }
    }
}

impl<E, F> Factory for FactoryFn<E, F>
where
    E: Entity,
    F: Fn(&EntityId) -> E + Send + Sync + 'static,
{
    fn spawn(
        &self,
        mailbox: MailReceiver,
        link: EntityLink,
        span: tracing::Span,
    ) -> JoinHandle<()> {
        let make = Arc::clone(&self.make);
        tokio::spawn(run(move |id: &EntityId| make(id), mailbox, link).instrument(span))
    }
}

/// Sleeps `delay` (supervision's backoff), boxed: the entity's task future is as large as
/// its largest await, and a timer is large for what an idle entity holds.
fn sleep_boxed(delay: Duration) -> std::pin::Pin<Box<tokio::time::Sleep>> {
    Box::pin(tokio::time::sleep(delay))
}

async fn run<E: Entity>(
    make: impl Fn(&EntityId) -> E,
    mut mailbox: MailReceiver,
    link: EntityLink,
) {
    // Dropped last of all, however the task ends, it reports the end (see its `Drop`).
    let mut ctx = EntityContext::new(link);
    let mut backoff = MIN_BACKOFF;
    let Some(mut entity) = Box::pin(create(&make, &mut ctx, &mut backoff)).await else {
        return;
    };
    while let Some(mail) = mailbox.recv().await {
        let Some(mut letter) = Received::of(mail) else {
            metrics::counter!(metric_names::ENTITY_LETTERS_MALFORMED_TOTAL).increment(1);
            tracing::warn!(entity = %ctx.id(), "a payload that is not a letter of this runtime");
            continue;
        };
        if let Some(delivery) = &letter.delivery {
            let (inbox, link) = ctx.inbox_and_link();
            if !inbox.admit(link, delivery) {
                continue;
            }
        }
        let message = match postcard::from_bytes::<E::Message>(&letter.message) {
            Ok(message) => message,
            Err(error) => {
                // Confirmed all the same: resending cannot make it decode.
                settle(&mut ctx, &letter, Outcome::Done);
                metrics::counter!(metric_names::ENTITY_MESSAGES_UNDECODABLE_TOTAL).increment(1);
                tracing::warn!(entity = %ctx.id(), %error, "a message that does not decode as the entity's type");
                answer(&ctx, &mut letter, Err(AskFailure::Codec(error.to_string())));
                continue;
            }
        };
        match AssertUnwindSafe(entity.handle(&mut ctx, message))
            .catch_unwind()
            .await
        {
            Ok(reply) => {
                // A tell's reply goes nowhere: not encoded.
                if letter.answer.is_some() {
                    let reply = postcard::to_allocvec(&reply)
                        .map_err(|error| AskFailure::Codec(error.to_string()));
                    answer(&ctx, &mut letter, reply);
                }
                let verdict = ctx.take_verdict();
                settle(&mut ctx, &letter, Outcome::of(verdict.as_ref()));
                match verdict {
                    None => backoff = MIN_BACKOFF,
                    Some(Verdict::Fenced(current)) => return fenced(&ctx, current),
                    Some(Verdict::Restart(reason)) => {
                        tracing::warn!(entity = %ctx.id(), %reason, restart_in = ?backoff, "entity restarting");
                        sleep_boxed(backoff).await;
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                        let Some(fresh) = Box::pin(create(&make, &mut ctx, &mut backoff)).await
                        else {
                            return;
                        };
                        entity = fresh;
                        let (inbox, link) = ctx.inbox_and_link();
                        inbox.restarted(link);
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
                answer(&ctx, &mut letter, Err(AskFailure::Panicked));
                ctx.take_verdict();
                settle(&mut ctx, &letter, Outcome::Dropped);
                sleep_boxed(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                let Some(fresh) = Box::pin(create(&make, &mut ctx, &mut backoff)).await else {
                    return;
                };
                entity = fresh;
            }
        }
        if ctx.take_passivate() {
            ctx.link()
                .signal(SignalKind::Lifecycle(Lifecycle::Passivate));
        }
    }
    // The host closed the mailbox: a graceful stop, after the queued messages.
    if let Err(panic) = AssertUnwindSafe(entity.on_stop(&mut ctx))
        .catch_unwind()
        .await
    {
        metrics::counter!(metric_names::ENTITY_PANICS_TOTAL).increment(1);
        tracing::error!(entity = %ctx.id(), panic = panic_text(&*panic), "entity panicked in its stop hook");
    }
}

/// Makes the entity and runs its start hook, again after the backoff for as long as the hook
/// panics or asks for a restart (a persistent entity whose store cannot be read); `None` when
/// a store fenced it, which has then been reported.
async fn create<E: Entity>(
    make: &impl Fn(&EntityId) -> E,
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

/// A store refused the entity's write: the host tells the core, and the task ends (its
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

/// A message as the task handles it, whichever way it came.
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
                ctx.link().routes.note_late_reply();
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
