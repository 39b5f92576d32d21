//! One simulated run: a fault phase with traffic, then healing, then a liveness phase, then the
//! final checks.

use std::collections::BTreeSet;
use std::time::Duration;

use shoal_core::{EntityId, Instant, MemberId, MemberStatus};

use crate::check::Property;
use crate::events::Ev;
use crate::nemesis::Fault;
use crate::options::Options;
use crate::report::{Outcome, Report};
use crate::schedule::{MAX_PAUSE, Schedule};
use crate::trace::{TraceEvent, TraceLine, TraceSink};

use super::{Simulator, quiescence};

/// How soon a probe a bounded queue refused is sent again.
const PROBE_RETRY: Duration = Duration::from_millis(500);

/// How long after healing the liveness probe waits.
const SETTLE: Duration = Duration::from_secs(60);

/// Runs the simulation with the trace going to `sink`, and gives the sink back.
pub(crate) fn run_with_sink(
    options: Options,
    sink: Option<TraceSink>,
) -> (Report, Option<TraceSink>) {
    // Probes are recorded per thread: drop what an earlier run on this thread left.
    shoal_core::probe::take();
    let mut w = Simulator::new(options.clone());
    if let Some(sink) = sink {
        w.trace_to(sink);
    }
    let fault_end = Instant::ZERO + options.duration;
    let schedule = options
        .schedule
        .clone()
        .unwrap_or_else(|| Schedule::plan(&options));
    w.schedule_actions(&schedule);
    w.schedule(Instant::ZERO + options.workload.message_every, Ev::Client);
    w.run_until(fault_end);

    // Heal: no more faults take effect; crashed and downed nodes restart.
    w.schedule(fault_end, Ev::Fault(Fault::Heal));
    w.run_until(fault_end);
    for node in w.nemesis.out() {
        w.restart(node);
    }
    w.workload.stop();
    let settled = fault_end + SETTLE;
    w.run_until(settled);

    // Liveness: a new message from every member to a sample of entities arrives in time.
    let senders: Vec<MemberId> = w.up_members();
    // No Up member after healing: the whole cluster downed itself (no side kept a majority),
    // and restarted nodes do not form a new cluster on their own (an operator would).
    w.nemesis.no_survivors_if(senders.is_empty());
    let probes: Vec<EntityId> = (0..10)
        .map(|i| EntityId::new(format!("e{}", i * 7 % options.workload.entities)))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut expected = Vec::new();
    for sender in &senders {
        for entity in &probes {
            let seq = w.check.sent(entity, *sender);
            w.tell(*sender, entity);
            expected.push((entity.clone(), *sender, seq));
        }
    }
    // The probes may wait as long as any message may without faults: behind a handoff and a
    // passivation, whose length the run's entities decide (mass-passivation seed 30041408: a
    // probe waited 25 s for a handoff held up by an entity ignoring its stop, then 10 s for
    // another passivating entity ignoring its stop; a fixed 30 s was shorter than the protocol
    // allows).
    let deadline = crate::bounds::message_wait(&options, &w.settings);
    // A probe a bounded queue refused (a full outbound queue or mailbox: every member probes at
    // once) is sent again a moment later, as a client retries after backpressure, and gets the
    // whole wait from then (mass-passivation seed 2796848898: a probe sent again 12.5 s in
    // waited behind a passivation its entity ignored until forced, and was judged on the
    // first send's clock). Retries stop a wait after the first send, so the run ends.
    let last_retry = settled + deadline;
    let mut end = settled + deadline;
    let mut at = settled;
    while at < end {
        at = (at + PROBE_RETRY).min(end);
        w.run_until(at);
        for (entity, sender, seq) in &mut expected {
            let refused = w.check.refused_by_backpressure(entity, *sender, *seq);
            if at < last_retry && w.is_running(*sender) && refused {
                w.mark("a probe refused by a bounded queue was sent again");
                *seq = w.check.sent(entity, *sender);
                w.tell(*sender, entity);
                end = end.max(at + deadline);
            }
        }
    }
    if !w.nemesis.no_survivors() {
        for (entity, sender, seq) in expected {
            if !w.check.was_delivered(&entity, sender, seq) {
                let detail = format!(
                    "probe from {sender} to {entity} not delivered within {:.1}s of its last send",
                    deadline.as_secs_f64()
                );
                w.check.fail(end, Property::Liveness, &entity, detail);
            }
        }
        let end = quiescence::await_balance(&mut w, end);
        let end = w.await_remembered(end, &probes);
        quiescence::check_coordinator(&mut w, end);
        let end = w.await_delivered(end);
        w.check_delivery(end);
    }
    let end = end.max(w.now);
    let start_deadline = crate::requests::Timeouts::of(&w.settings, false).start;
    let running = |m: MemberId| w.is_running(m);
    for (subject, detail) in w.requests.unanswered(end, start_deadline, running) {
        w.check.fail(end, Property::CommandReply, subject, detail);
    }
    // What `within` before the end may still be under way.
    let before_end =
        |within: Duration| Instant(end.as_nanos().saturating_sub(within.as_nanos() as u64));
    // A passivation is carried out at once; a paused process carries it out when it resumes.
    let grace = MAX_PAUSE + Duration::from_secs(1);
    for ((member, entity, _), at) in w.host.unhonoured_passivations(before_end(grace)) {
        let detail = format!("{entity} asked {member} to passivate it at {at}, never told to stop");
        w.check.fail(end, Property::Passivation, entity, detail);
    }
    for ((member, entity), at) in w.idleness.overdue(end, grace) {
        if w.is_running(*member) && !w.host.stop_requested(*member, entity) {
            let detail = format!("{entity} idle on {member} since {at}, never passivated");
            w.check.fail(end, Property::Passivation, entity, detail);
        }
    }
    // A graceful leave ends with the member removed and its process gone (a downed one
    // restarts as a new incarnation): one that knows it is leaving and still runs at the end
    // was asked too recently. (One asked through another member may never learn of it: the
    // request dies with that member if it is downed first.)
    let leave_bound = Duration::from_secs(60);
    for (member, at) in w.leavers.asked_before(before_end(leave_bound)) {
        let Some(view) = (w.nodes.get(&member.node))
            .filter(|n| n.id == member)
            .map(|n| n.driver.node().view())
        else {
            continue;
        };
        let knows = matches!(
            view.status(member),
            Some(MemberStatus::Leaving | MemberStatus::Exiting)
        );
        if knows {
            let detail = format!("{member} was asked to leave at {at} and is still a member");
            w.check.fail(end, Property::GracefulStall, member, detail);
        }
    }
    for stall in w.stalls.overdue(end) {
        w.check
            .fail(end, Property::GracefulStall, stall.subject, stall.detail);
    }
    // Exactly-once is owed by every run in which nothing was actually lost: no message dropped
    // by the network, no process crashed, no member downed (whatever the schedule planned).
    if w.net.lost == 0 && !w.nemesis.lost_members() {
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
            w.tracer.record(line);
        }
    }
    let outcome = match (w.check.violations.is_empty(), w.nemesis.no_survivors()) {
        (false, _) => Outcome::Failed,
        (true, true) => Outcome::NoProgress,
        (true, false) => Outcome::Passed,
    };
    let report = Report {
        outcome,
        violations: w.check.violations.clone(),
        digest: w.events.digest(),
        events: w.events.taken(),
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
    (report, w.tracer.take_sink())
}
