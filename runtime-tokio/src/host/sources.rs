//! The host loop's sources and the one order it takes them in. A round ([`Host::handle_ready`])
//! and the wait for the next round ([`Host::wait`]) both walk [`SOURCES`], so a new source is
//! one entry here.

use std::future::poll_fn;
use std::pin::Pin;
use std::task::{Context, Poll};

use shoal_core::{Envelope, Input, Instant};
use tokio::time::Sleep;

use super::command::HostCommand;
use super::{Host, ROUND, Round};
use crate::entity::EntitySignal;
use crate::transport::Arrival;

/// Where the host's work comes from.
#[derive(Clone, Copy, Debug)]
enum Source {
    /// Membership and failure-detection envelopes, which user traffic never delays.
    Control,
    /// The core's timers and the request deadlines.
    Timers,
    /// Entities' lifecycle steps and ask answers.
    Signals,
    /// Remember-store completions.
    Store,
    /// Commands from the handles.
    Commands,
    /// Envelopes of the data lane.
    Data,
}

/// The fixed order of every round: the control lane first (drained), then due timers, then
/// at most [`ROUND`] items of each other queue, so none waits behind another and a seed on a
/// simulated network gives one run.
const SOURCES: [Source; 6] = [
    Source::Control,
    Source::Timers,
    Source::Signals,
    Source::Store,
    Source::Commands,
    Source::Data,
];

impl Source {
    /// The most items a round takes from this source.
    fn per_round(self) -> usize {
        match self {
            Self::Control => usize::MAX,
            Self::Timers => 1,
            Self::Signals | Self::Store | Self::Commands | Self::Data => ROUND,
        }
    }
}

/// One item of work from a source.
pub(super) enum Ready {
    Envelope(Box<Envelope>),
    Arrival(Arrival),
    Timers,
    Signal(EntitySignal),
    Stored(Input),
    Command(HostCommand),
}

impl Host {
    /// One round over everything ready at `now`, in the order of [`SOURCES`].
    pub(super) fn handle_ready(&mut self, now: Instant) -> Round {
        self.report_accesses();
        let mut busy = false;
        for source in SOURCES {
            for _ in 0..source.per_round() {
                let ready = match source {
                    Source::Timers => self.timers_due(now).then_some(Ready::Timers),
                    _ => self.try_queue(source),
                };
                let Some(ready) = ready else { break };
                busy = true;
                if !self.handle(ready) {
                    return Round::Stop;
                }
            }
        }
        if busy { Round::Busy } else { Round::Idle }
    }

    /// Waits until a source has something, or until `wake`; `false` stops the node.
    pub(super) async fn wait(&mut self, wake: Instant) -> bool {
        let sleep = tokio::time::sleep_until(self.clock.deadline(wake));
        let mut sleep: Pin<&mut Sleep> = std::pin::pin!(sleep);
        let ready = poll_fn(|cx| {
            for source in SOURCES {
                let ready = match source {
                    Source::Timers => sleep.as_mut().poll(cx).is_ready().then_some(Ready::Timers),
                    _ => self.poll_queue(source, cx),
                };
                if let Some(ready) = ready {
                    return Poll::Ready(ready);
                }
            }
            Poll::Pending
        })
        .await;
        self.report_accesses();
        self.handle(ready)
    }

    /// The next item of a queue if one is there, without waiting. Unlike `poll_recv`, this
    /// spends none of tokio's cooperative budget, so a round takes what its limits say.
    fn try_queue(&mut self, source: Source) -> Option<Ready> {
        match source {
            Source::Control => self.control_in.try_recv().ok().map(Ready::Envelope),
            Source::Signals => self.signals.try_recv().ok().map(Ready::Signal),
            Source::Store => self.store_done.try_recv().ok().map(Ready::Stored),
            Source::Commands => self.commands.try_recv().ok().map(Ready::Command),
            Source::Data => self.data_in.try_recv().ok().map(Ready::Arrival),
            Source::Timers => None,
        }
    }

    /// The next item of a queue, registering for a wake-up if there is none (a closed queue
    /// has none).
    fn poll_queue(&mut self, source: Source, cx: &mut Context<'_>) -> Option<Ready> {
        let polled = match source {
            Source::Control => self
                .control_in
                .poll_recv(cx)
                .map(|e| e.map(Ready::Envelope)),
            Source::Signals => self.signals.poll_recv(cx).map(|s| s.map(Ready::Signal)),
            Source::Store => self.store_done.poll_recv(cx).map(|i| i.map(Ready::Stored)),
            Source::Commands => self.commands.poll_recv(cx).map(|c| c.map(Ready::Command)),
            Source::Data => self.data_in.poll_recv(cx).map(|a| a.map(Ready::Arrival)),
            Source::Timers => return None,
        };
        match polled {
            Poll::Ready(item) => item,
            Poll::Pending => None,
        }
    }

    /// Handles one item; `false` stops the node.
    fn handle(&mut self, ready: Ready) -> bool {
        match ready {
            Ready::Envelope(envelope) => self.input(Input::Receive(envelope)),
            Ready::Arrival(arrival) => self.arrival(arrival),
            Ready::Timers => {
                // The wait also ends for the metrics export; the core runs only what is due.
                if self.timers_due(self.clock.now()) {
                    self.wakeup();
                }
            }
            Ready::Signal(signal) => self.handle_signal(signal),
            Ready::Stored(completed) => self.input(completed),
            Ready::Command(command) => return self.handle_command(command),
        }
        true
    }

    fn timers_due(&self, now: Instant) -> bool {
        self.next_deadline().is_some_and(|at| at <= now)
    }
}
