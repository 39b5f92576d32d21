//! One simulated run: a fault phase with traffic, then healing, then a liveness phase, then the
//! final checks. Its `Report` carries everything needed to reproduce and explain a failure.

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use shoal_core::{EntityId, Instant, MemberId, NodeId};

use crate::check::{Property, Violation};
use crate::faults::{self, Fault};
use crate::options::Options;
use crate::quiescence;
use crate::schedule::Schedule;
use crate::trace::{TraceEvent, TraceLine, TraceSink};
use crate::workload;
use crate::world::{Ev, World};

/// How a run ended.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum Outcome {
    /// Every check held.
    Passed,
    /// Some guarantee broke.
    Failed,
    /// Safety held, but no majority survived, so no progress was possible (not a failure).
    NoProgress,
}

/// The result of one run.
#[derive(Debug)]
pub struct Report {
    /// What the run did.
    pub options: Options,
    /// The fault actions it carried out (planned from the seed unless the options gave some).
    pub schedule: Schedule,
    /// How it ended.
    pub outcome: Outcome,
    /// Broken guarantees (empty unless failed).
    pub violations: Vec<Violation>,
    /// Digest of the event sequence: equal seeds give equal digests.
    pub digest: u64,
    /// Events processed.
    pub events: u64,
    /// Simulated time covered.
    pub simulated: Duration,
    /// Messages sent by clients, delivered to entities, and entity incarnations started.
    pub sent: u64,
    /// Deliveries to entities.
    pub delivered: u64,
    /// Entity incarnations started.
    pub starts: u64,
    /// Asks' replies that reached their asker.
    pub replies: u64,
    /// Messages the network lost.
    pub lost: u64,
    /// Dead letters the nodes reported.
    pub dead_letters: u64,
    /// How often each "sometimes" marker fired.
    pub coverage: std::collections::BTreeMap<&'static str, u64>,
}

impl Report {
    /// The command that reproduces this run.
    pub fn reproduce(&self) -> String {
        let downing = if self.options.downing == crate::Downing::Auto {
            " --downing auto"
        } else {
            ""
        };
        let family = if self.options.family == crate::Family::of_seed(self.options.seed) {
            String::new()
        } else {
            format!(" --family {}", self.options.family.name())
        };
        let schedule = match &self.options.schedule {
            Some(s) => format!(" --schedule \"{s}\""),
            None => String::new(),
        };
        let membership = match self.options.membership {
            crate::MembershipMode::Real => "",
            crate::MembershipMode::Oracle => " --membership oracle",
        };
        format!(
            "cargo run -p sim --release -- replay {}{family}{membership}{downing}{schedule}",
            self.options.seed
        )
    }

    /// The command that shrinks this run's fault schedule to a minimal failing one.
    pub fn minimize_command(&self) -> String {
        self.reproduce().replacen(" replay ", " minimize ", 1)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "seed {} {:?}: {}",
            self.options.seed, self.outcome, self.options
        )?;
        writeln!(
            f,
            "  {} events, {:.0}s simulated, {} sent, {} delivered, {} starts, {} replies, {} lost in the network, {} dead letters, digest {:016x}",
            self.events,
            self.simulated.as_secs_f64(),
            self.sent,
            self.delivered,
            self.starts,
            self.replies,
            self.lost,
            self.dead_letters,
            self.digest
        )?;
        for v in self.violations.iter().take(10) {
            writeln!(f, "  violation {v}")?;
        }
        if self.outcome == Outcome::Failed {
            writeln!(f, "  reproduce: {}", self.reproduce())?;
            writeln!(
                f,
                "  schedule ({} actions; shrink it with: {})",
                self.schedule.len(),
                self.minimize_command()
            )?;
        }
        Ok(())
    }
}

/// How soon a probe a bounded queue refused is sent again.
const PROBE_RETRY: Duration = Duration::from_millis(500);

/// How long after healing the liveness probe waits.
const SETTLE: Duration = Duration::from_secs(60);

/// Runs the simulation described by `options`.
pub fn run(options: Options) -> Report {
    run_traced(options, None)
}

/// Runs the simulation, writing a JSON-lines trace of every event to `trace` if given (see
/// [`TraceLine`](crate::TraceLine); [`read_trace`](crate::read_trace) reads it back).
pub fn run_traced(options: Options, trace: Option<Box<dyn std::io::Write>>) -> Report {
    run_with_sink(options, trace.map(TraceSink::Json)).0
}

/// Runs the simulation and returns its trace of every event with the report.
pub fn run_recorded(options: Options) -> (Report, Vec<TraceLine>) {
    match run_with_sink(options, Some(TraceSink::Memory(Vec::new()))) {
        (report, Some(TraceSink::Memory(lines))) => (report, lines),
        (report, _) => (report, Vec::new()),
    }
}

/// Runs the simulation with the trace going to `sink`, and gives the sink back.
fn run_with_sink(options: Options, sink: Option<TraceSink>) -> (Report, Option<TraceSink>) {
    // Probes are recorded per thread: drop what an earlier run on this thread left.
    shoal_core::probe::take();
    let mut w = World::new(options.clone());
    if let Some(sink) = sink {
        w.trace_to(sink);
    }
    let fault_end = Instant::ZERO + options.duration;
    let schedule = options
        .schedule
        .clone()
        .unwrap_or_else(|| Schedule::plan(&options));
    faults::schedule_actions(&mut w, &schedule);
    w.schedule(Instant::ZERO + options.message_every, Ev::Client);
    w.run_until(fault_end);

    // Heal: no more faults take effect; crashed and downed nodes restart.
    w.schedule(fault_end, Ev::Fault(Fault::Heal));
    w.run_until(fault_end);
    let restart: Vec<NodeId> = w.crashed.iter().chain(&w.downed).copied().collect();
    for node in restart {
        faults::restart(&mut w, node);
    }
    w.traffic = false;
    let settled = fault_end + SETTLE;
    w.run_until(settled);

    // Liveness: a new message from every member to a sample of entities arrives in time.
    let senders: Vec<MemberId> = w.up_members();
    // No Up member after healing: the whole cluster downed itself (no side kept a majority),
    // and restarted nodes do not form a new cluster on their own (an operator would).
    w.no_survivors |= senders.is_empty();
    let probes: Vec<EntityId> = (0..10)
        .map(|i| EntityId::new(format!("e{}", i * 7 % options.entities)))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut expected = Vec::new();
    for sender in &senders {
        for entity in &probes {
            let seq = w.check.sent(entity, *sender);
            workload::tell(&mut w, *sender, entity);
            expected.push((entity.clone(), *sender, seq));
        }
    }
    // The probes may wait as long as any message may without faults: behind a handoff and a
    // passivation, whose length the run's entities decide (mass-passivation seed 30041408: a
    // probe waited 25 s for a handoff held up by an entity ignoring its stop, then 10 s for
    // another passivating entity ignoring its stop; a fixed 30 s was shorter than the protocol
    // allows).
    let deadline = crate::bounds::message_wait(&options, &w.settings);
    let end = settled + deadline;
    // A probe a bounded queue refused (a full outbound queue or mailbox: every member probes at
    // once) is sent again a moment later, as a client retries after backpressure.
    let mut at = settled;
    while at < end {
        at = (at + PROBE_RETRY).min(end);
        w.run_until(at);
        for (entity, sender, seq) in &mut expected {
            if w.is_running(*sender) && w.check.refused_by_backpressure(entity, *sender, *seq) {
                w.mark("a probe refused by a bounded queue was sent again");
                *seq = w.check.sent(entity, *sender);
                workload::tell(&mut w, *sender, entity);
            }
        }
    }
    if !w.no_survivors {
        for (entity, sender, seq) in expected {
            if !w.check.was_delivered(&entity, sender, seq) {
                let detail = format!(
                    "probe from {sender} to {entity} not delivered within {:.1}s after healing",
                    deadline.as_secs_f64()
                );
                w.check.fail(end, Property::Liveness, &entity, detail);
            }
        }
        let end = quiescence::await_balance(&mut w, end);
        let end = w.await_remembered(end, &probes);
        quiescence::check_coordinator(&mut w, end);
    }
    let end = end.max(w.now);
    let s = &w.settings;
    let start_deadline =
        s.handoff_timeout + s.passivation_stop_timeout + s.shard_region_query_timeout;
    let running = |m: MemberId| w.is_running(m);
    for (subject, detail) in w.requests.unanswered(end, start_deadline, running) {
        w.check.fail(end, Property::CommandReply, subject, detail);
    }
    for stall in w.stalls.overdue(end) {
        w.check
            .fail(end, Property::GracefulStall, stall.subject, stall.detail);
    }
    // Exactly-once is owed by every run in which nothing was actually lost: no message dropped
    // by the network, no process crashed, no member downed (whatever the schedule planned).
    if w.net.lost == 0 && !w.crashed_or_downed {
        w.check.check_exactly_once(end);
        let running = |m: MemberId| w.is_running(m);
        for (entity, detail) in w.asks.unanswered(running) {
            w.check.fail(end, Property::AskReply, entity, detail);
        }
    }

    // The violations close the trace, each at its time.
    if w.tracing() {
        let lines: Vec<TraceLine> = (w.check.violations.iter())
            .map(|v| TraceLine {
                t_ns: v.at.as_nanos(),
                event: TraceEvent::Violation {
                    property: format!("{:?}", v.property),
                    subject: v.subject.clone(),
                    detail: v.detail.clone(),
                },
            })
            .collect();
        for line in lines {
            w.record(line);
        }
    }
    let outcome = match (w.check.violations.is_empty(), w.no_survivors) {
        (false, _) => Outcome::Failed,
        (true, true) => Outcome::NoProgress,
        (true, false) => Outcome::Passed,
    };
    let report = Report {
        outcome,
        violations: w.check.violations.clone(),
        digest: w.digest(),
        events: w.events_processed,
        simulated: end.saturating_duration_since(Instant::ZERO),
        sent: w.check.sent_total(),
        delivered: w.check.deliveries,
        starts: w.check.starts,
        replies: w.asks.answered,
        lost: w.net.lost,
        dead_letters: w.dead_letters,
        coverage: {
            let mut coverage = std::mem::take(&mut w.coverage);
            coverage.extend(shoal_core::probe::take());
            coverage
        },
        options,
        schedule,
    };
    (report, w.take_sink())
}
