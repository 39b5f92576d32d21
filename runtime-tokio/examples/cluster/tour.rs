//! The process-level tour: a node joins (rebalance), one is killed with SIGKILL, one is paused
//! with SIGSTOP past the failure detector and resumed, one leaves gracefully (SIGTERM). Which
//! nodes, the pause's length and the gaps between faults follow from the seed. Each step waits
//! (with a bound) for its consequences before the next fault, and measures them: a fault
//! landing while the previous one is still being decided tests the downing strategy's
//! instability bound, not the step.

use std::time::{Duration, Instant};

use shoal_core::Rng;

use crate::harness::{Run, secs};
use crate::journal::now_micros;
use crate::watch::Change;

/// What the seed chose.
#[derive(Debug)]
pub(crate) struct Plan {
    /// The node that joins during the traffic (the last index).
    pub(crate) joiner: u32,
    pub(crate) kill: u32,
    pub(crate) pause: u32,
    pub(crate) leave: u32,
    pub(crate) pause_for: Duration,
    /// Quiet time before the join and after each step.
    pub(crate) gaps: [Duration; 4],
}

impl Plan {
    /// The plan for `nodes` nodes (the last joins) from `seed`.
    pub(crate) fn new(seed: u64, nodes: u32) -> Self {
        let mut rng = Rng::new(seed);
        let mut pick = |taken: &[u32]| loop {
            let n = rng.below(u64::from(nodes)) as u32;
            if !taken.contains(&n) {
                return n;
            }
        };
        let kill = pick(&[]);
        let pause = pick(&[kill]);
        let leave = pick(&[kill, pause]);
        let mut rng = Rng::new(seed ^ 0x70_75_72);
        let mut millis = |low: u64, high: u64| Duration::from_millis(low + rng.below(high - low));
        Self {
            joiner: nodes - 1,
            kill,
            pause,
            leave,
            pause_for: millis(3_500, 4_500),
            gaps: [
                millis(3_000, 5_000),
                millis(1_000, 3_000),
                millis(1_000, 3_000),
                millis(1_000, 3_000),
            ],
        }
    }

    /// One line saying what will happen.
    pub(crate) fn describe(&self) -> String {
        format!(
            "node {} joins; SIGKILL node {}; SIGSTOP node {} for {:.1} s; node {} leaves",
            self.joiner,
            self.kill,
            self.pause,
            self.pause_for.as_secs_f64(),
            self.leave
        )
    }
}

/// Runs the tour.
pub(crate) async fn run(run: &mut Run<'_>, plan: &Plan) -> Result<(), String> {
    tokio::time::sleep(plan.gaps[0]).await;
    join(run, plan.joiner).await?;
    tokio::time::sleep(plan.gaps[1]).await;
    kill(run, plan.kill).await?;
    tokio::time::sleep(plan.gaps[2]).await;
    pause(run, plan.pause, plan.pause_for).await?;
    tokio::time::sleep(plan.gaps[3]).await;
    leave(run, plan.leave).await?;
    run.view.set_fault("none");
    Ok(())
}

async fn join(run: &mut Run<'_>, index: u32) -> Result<(), String> {
    run.view.set_fault(&format!("node {index} joining"));
    run.view.say(&format!("tour: node {index} joins"));
    let asked = Instant::now();
    run.spawn(index)?;
    let id = run.id_of(index, Duration::from_secs(20)).await?;
    run.figure("join: Up after", secs(asked.elapsed()));
    // Ready (HTTP /ready: Up, its region registered, allocation open) follows Up.
    run.until_ready_is(index, true, Duration::from_secs(20))
        .await?;
    run.figure("join: ready (GET /ready 200) after", secs(asked.elapsed()));
    // The rebalance is done when the newcomer's share has not changed for three seconds.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut shards, mut changed, mut first) = (0, Instant::now(), None);
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = run.shards_of(id).await.unwrap_or(shards);
        if now != shards {
            (shards, changed) = (now, Instant::now());
            first.get_or_insert(changed);
        }
        if shards > 0 && changed.elapsed() >= Duration::from_secs(3) {
            let first = first.map_or(Duration::ZERO, |at| at - asked);
            run.figure(
                "join: first shards / rebalance done after",
                format!(
                    "{} / {} ({shards} shards)",
                    secs(first),
                    secs(changed - asked)
                ),
            );
            return Ok(());
        }
    }
    Err(format!(
        "node {index}'s rebalance did not settle within 60 s"
    ))
}

async fn kill(run: &mut Run<'_>, index: u32) -> Result<(), String> {
    let id = run.id_of(index, Duration::from_secs(5)).await?;
    let member = run.member(index)?;
    let pid = member.pid();
    run.view.set_fault(&format!("node {index} killed"));
    run.view
        .say(&format!("tour: SIGKILL node {index} (pid {pid})"));
    let at = Instant::now();
    run.member(index)?.signal("KILL")?;
    run.killed.push((index, now_micros()));
    let bound = Duration::from_secs(40);
    let unreachable = run.watch.wait(Change::Unreachable, id, at, bound).await?;
    let downed = run.watch.wait(Change::Downed, id, at, bound).await?;
    let removed = run.watch.wait(Change::Removed, id, at, bound).await?;
    run.all_answer(bound).await?;
    let serving = at.elapsed();
    run.figure(
        "SIGKILL: unreachable / downed / removed / every counter answering after",
        format!(
            "{} / {} / {} / {}",
            secs(unreachable),
            secs(downed),
            secs(removed),
            secs(serving)
        ),
    );
    let killed = *run.killed.last().expect("pushed above");
    let quiet = run.quiet.clone();
    let (count, after) = crate::remembered::await_restarted(&run.dir, quiet, killed, bound).await?;
    run.figure(
        "SIGKILL: remembered quiet counters of the killed node running again, unmessaged",
        format!("{count} after {}", secs(after)),
    );
    Ok(())
}

async fn pause(run: &mut Run<'_>, index: u32, pause_for: Duration) -> Result<(), String> {
    let id = run.id_of(index, Duration::from_secs(5)).await?;
    run.view.set_fault(&format!("node {index} paused"));
    run.view.say(&format!(
        "tour: SIGSTOP node {index} for {:.1} s (past the failure detector)",
        pause_for.as_secs_f64()
    ));
    let at = Instant::now();
    run.member(index)?.signal("STOP")?;
    let unreachable = run.watch.wait(Change::Unreachable, id, at, pause_for).await;
    tokio::time::sleep(pause_for.saturating_sub(at.elapsed())).await;
    // Taken before the signal: the resumed node answers the heartbeats queued for it at once,
    // and on loopback the others can see it reachable again before `signal` returns (a CI
    // run missed the event that way and waited 15 s for another).
    let resumed = Instant::now();
    run.member(index)?.signal("CONT")?;
    run.view.say(&format!("tour: SIGCONT node {index}"));
    let reachable = run
        .watch
        .wait(Change::Reachable, id, resumed, Duration::from_secs(15))
        .await?;
    let unreachable = unreachable
        .map_err(|_| format!("node {index} paused {pause_for:?} was never seen unreachable"))?;
    if run.watch.when(Change::Downed, id, at).is_some() {
        return Err(format!(
            "node {index} was downed for a pause shorter than stable-after"
        ));
    }
    run.figure(
        "SIGSTOP: unreachable after / reachable again after SIGCONT",
        format!("{} / {} (not downed)", secs(unreachable), secs(reachable)),
    );
    Ok(())
}

async fn leave(run: &mut Run<'_>, index: u32) -> Result<(), String> {
    let id = run.id_of(index, Duration::from_secs(5)).await?;
    let shards = run.shards_of(id).await.unwrap_or(0);
    run.view.set_fault(&format!("node {index} leaving"));
    run.view
        .say(&format!("tour: node {index} leaves (SIGTERM)"));
    let at = Instant::now();
    run.member(index)?.signal("TERM")?;
    // Not ready while it leaves: /ready answers 503 before it has handed its shards off.
    let unready = run
        .until_ready_is(index, false, Duration::from_secs(10))
        .await?;
    run.figure("leave: not ready (GET /ready 503) after", secs(unready));
    let member = run.member(index)?;
    if !tokio::task::block_in_place(|| member.wait_exit(Duration::from_secs(30))) {
        return Err(format!("node {index} did not exit within 30 s of SIGTERM"));
    }
    let exited = at.elapsed();
    let removed = run
        .watch
        .wait(Change::Removed, id, at, Duration::from_secs(30))
        .await?;
    run.figure(
        "leave: handed off and exited / removed after",
        format!("{} / {} ({shards} shards)", secs(exited), secs(removed)),
    );
    Ok(())
}
