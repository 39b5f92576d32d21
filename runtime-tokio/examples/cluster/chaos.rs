//! The network tour of the chaos mode (nodes in their own namespaces): latency, jitter and
//! loss on every link; a symmetric partition cutting a minority (chosen by the seed) from the
//! rest and the harness; then a one-way partition where one node can send to nobody; then a
//! partition into two equal halves. With keep-majority each partition must end with the
//! minority downed by the majority and stopped by itself, and every counter answering on the
//! majority side; of the equal halves exactly one serves (the strategy's choice: the lowest
//! address with keep-majority and lease-majority, whose lease that side asks for first; the
//! oldest member with keep-oldest), and the harness stays on it. With auto-down (the negative
//! control) each side downs the other and both keep running the minority's counters; the
//! partition is left in place until the run ends.

use std::time::{Duration, Instant};

use shoal::MemberId;
use shoal_core::{MemberStatus, MembershipView, Rng};

use crate::harness::{Run, secs};
use crate::member::DowningMode;
use crate::netns::{Host, Lab};
use crate::watch::Change;

/// What the seed chose.
#[derive(Debug)]
pub(crate) struct Plan {
    /// `tc netem` arguments for the degraded phase (where the kernel has netem).
    pub(crate) netem: String,
    pub(crate) degraded_for: Duration,
    /// Cut from everyone else (a strict minority).
    pub(crate) minority: Vec<u32>,
    /// Can send to nobody, after the minority is gone.
    pub(crate) mute: u32,
}

impl Plan {
    /// The plan for `nodes` node processes from `seed`, downing by `downing`.
    pub(crate) fn new(seed: u64, nodes: u32, downing: DowningMode) -> Self {
        let mut rng = Rng::new(seed);
        let mut order: Vec<u32> = (0..nodes).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        if downing == DowningMode::KeepOldest {
            // Keep-oldest keeps the oldest member's side (node 0's, the first started), however
            // small: the harness's side keeps it, so that the cut-off side is the one to stop.
            order.retain(|&i| i != 0);
            order.push(0);
        }
        // With the harness the cluster has nodes + 1 members: a minority is under half.
        let size = (nodes / 2).max(1) as usize;
        let mut minority = order[..size].to_vec();
        minority.sort_unstable();
        let delay = 10 + rng.below(30);
        let loss = 1 + rng.below(3);
        Self {
            netem: format!("delay {delay}ms {}ms loss {loss}%", delay / 2),
            degraded_for: Duration::from_secs(6),
            minority,
            mute: order[size],
        }
    }

    /// One line saying what will happen.
    pub(crate) fn describe(&self) -> String {
        format!(
            "netem `{}` for {:.0} s; nodes {:?} cut off; node {} muted (one-way)",
            self.netem,
            self.degraded_for.as_secs_f64(),
            self.minority,
            self.mute
        )
    }
}

/// Runs the network tour on `lab`.
pub(crate) async fn run(run: &mut Run<'_>, lab: &Lab, plan: &Plan) -> Result<(), String> {
    let nodes: Vec<u32> = run.members.iter().map(|m| m.index).collect();
    tokio::time::sleep(Duration::from_secs(3)).await;

    let qdisc = crate::netns::degrade_links(lab, &plan.netem)?;
    run.view.set_fault(&qdisc);
    run.view
        .say(&format!("chaos: every link degraded: {qdisc}"));
    tokio::time::sleep(plan.degraded_for).await;
    lab.degrade(None)?;
    run.view.say("chaos: links clean again");
    tokio::time::sleep(Duration::from_secs(2)).await;

    let minority: Vec<Host> = plan.minority.iter().map(|&i| Host::Node(i)).collect();
    let majority: Vec<Host> = std::iter::once(Host::Client)
        .chain(
            nodes
                .iter()
                .filter(|i| !plan.minority.contains(i))
                .map(|&i| Host::Node(i)),
        )
        .collect();
    run.view
        .set_fault(&format!("nodes {:?} partitioned", plan.minority));
    run.view.say(&format!(
        "chaos: symmetric partition, nodes {:?} cut off from the rest",
        plan.minority
    ));
    let at = Instant::now();
    lab.cut(&minority, &majority)?;
    lab.cut(&majority, &minority)?;
    settle(run, &plan.minority, at).await?;
    run.all_answer(Duration::from_secs(40)).await?;
    run.figure(
        "partition: every counter answering after",
        secs(at.elapsed()),
    );
    if run.downing == DowningMode::AutoDown {
        // The negative control has made its point: each side runs the minority's counters.
        // (Healing now would only let each side's verdict reach the other: both stop.)
        return Ok(());
    }
    lab.heal()?;
    run.view.say("chaos: partition healed");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mute = Host::Node(plan.mute);
    let everyone: Vec<Host> = lab.hosts().into_iter().filter(|h| *h != mute).collect();
    run.view.set_fault(&format!("node {} muted", plan.mute));
    run.view.say(&format!(
        "chaos: one-way partition, node {} can send to nobody",
        plan.mute
    ));
    let at = Instant::now();
    lab.cut(&[mute], &everyone)?;
    settle(run, &[plan.mute], at).await?;
    run.all_answer(Duration::from_secs(40)).await?;
    run.figure("one-way: every counter answering after", secs(at.elapsed()));
    lab.heal()?;
    run.view.say("chaos: one-way partition healed");
    run.view.set_fault("none");
    tokio::time::sleep(Duration::from_secs(2)).await;
    equal_halves(run, lab).await
}

/// Splits the members (the harness's included) into two equal halves, a node joining first
/// on the spare namespace if their number is odd. The harness stays on the half the strategy
/// keeps, which must serve every counter; the other must down itself and stop.
async fn equal_halves(run: &mut Run<'_>, lab: &Lab) -> Result<(), String> {
    if matches!(run.downing, DowningMode::StaticQuorum(_)) {
        // Neither half holds the quorum: both down themselves, the harness's own too.
        run.view
            .say("chaos: equal halves skipped (static-quorum downs both, by design)");
        return Ok(());
    }
    let mut running: Vec<u32> = (run.members.iter_mut())
        .filter_map(|m| (!m.exited()).then_some(m.index))
        .collect();
    if running.len() % 2 == 0 {
        // With the harness, an odd number of members: the spare namespace's node joins.
        let index = lab.hosts().len() as u32 - 2;
        run.view.say(&format!(
            "chaos: node {index} joins to make the halves equal"
        ));
        // Through the members still running (the first seed may have downed itself).
        run.seeds = (run.members.iter())
            .filter(|m| running.contains(&m.index))
            .map(|m| m.address.clone())
            .collect();
        run.spawn(index)?;
        run.id_of(index, Duration::from_secs(20)).await?;
        run.all_answer(Duration::from_secs(40)).await?;
        running.push(index);
    }
    let mut nodes: Vec<(MemberId, u32)> = Vec::new();
    for &index in &running {
        nodes.push((run.id_of(index, Duration::from_secs(5)).await?, index));
    }
    let view = (run.node.view().await).map_err(|e| format!("the harness's view: {e:?}"))?;
    let harness = run.node.member();
    let kept = kept_member(run.downing, &view, harness);
    if kept != harness && !nodes.iter().any(|&(id, _)| id == kept) {
        return Err(format!(
            "the member kept on equal halves, {kept}, is no node of ours"
        ));
    }
    // Ours: the harness, the member the strategy keeps, then the others in id order.
    let members = nodes.len() + 1;
    let half = members / 2;
    nodes.sort_by_key(|&(id, _)| (id != kept, id));
    let ours: Vec<u32> = nodes[..half - 1].iter().map(|&(_, i)| i).collect();
    let theirs: Vec<u32> = nodes[half - 1..].iter().map(|&(_, i)| i).collect();
    let our_hosts: Vec<Host> = std::iter::once(Host::Client)
        .chain(ours.iter().map(|&i| Host::Node(i)))
        .collect();
    let their_hosts: Vec<Host> = theirs.iter().map(|&i| Host::Node(i)).collect();
    run.view
        .set_fault(&format!("nodes {theirs:?} | harness and {ours:?}"));
    run.view.say(&format!(
        "chaos: equal halves, nodes {theirs:?} cut off from the harness and nodes {ours:?}"
    ));
    let at = Instant::now();
    lab.cut(&our_hosts, &their_hosts)?;
    lab.cut(&their_hosts, &our_hosts)?;
    settle(run, &theirs, at).await?;
    run.all_answer(Duration::from_secs(40)).await?;
    run.figure(
        "equal halves: every counter answering after",
        secs(at.elapsed()),
    );
    lab.heal()?;
    run.view.say("chaos: equal halves healed");
    run.view.set_fault("none");
    Ok(())
}

/// The member whose half `downing` keeps when the members split into equal halves: the
/// lowest address (keep-majority's tie-break; lease-majority's side asking first), or the
/// oldest member (keep-oldest). The harness itself if it is that member.
fn kept_member(downing: DowningMode, view: &MembershipView, harness: MemberId) -> MemberId {
    let up = view
        .members()
        .iter()
        .filter(|m| m.status == MemberStatus::Up);
    let kept = match downing {
        DowningMode::KeepOldest => up.min_by_key(|m| (m.up_number, m.id)),
        _ => up.min_by_key(|m| m.id),
    };
    kept.map_or(harness, |m| m.id)
}

/// Waits for the cut-off `nodes` to be downed and removed by the harness's side and, with
/// keep-majority, to stop by themselves; with auto-down, checks that they did not (they
/// downed the majority instead).
async fn settle(run: &mut Run<'_>, nodes: &[u32], at: Instant) -> Result<(), String> {
    let bound = Duration::from_secs(40);
    let mut ids: Vec<(u32, MemberId)> = Vec::new();
    for &index in nodes {
        ids.push((index, run.id_of(index, Duration::from_secs(5)).await?));
    }
    for &(index, id) in &ids {
        let unreachable = run.watch.wait(Change::Unreachable, id, at, bound).await?;
        let downed = run.watch.wait(Change::Downed, id, at, bound).await?;
        let removed = run.watch.wait(Change::Removed, id, at, bound).await?;
        run.figure(
            &format!("node {index} cut off: unreachable / downed / removed after"),
            format!(
                "{} / {} / {}",
                secs(unreachable),
                secs(downed),
                secs(removed)
            ),
        );
    }
    let downing = run.downing;
    for &(index, _) in &ids {
        let member = run.member(index)?;
        match downing {
            DowningMode::KeepMajority
            | DowningMode::StaticQuorum(_)
            | DowningMode::KeepOldest
            | DowningMode::LeaseMajority => {
                let exited = tokio::task::block_in_place(|| member.wait_exit(bound));
                if !exited {
                    return Err(format!("node {index} on the minority side kept running"));
                }
                run.figure(
                    &format!("node {index} downed itself and stopped after"),
                    secs(at.elapsed()),
                );
            }
            DowningMode::AutoDown => {
                if member.exited() {
                    return Err(format!("node {index} stopped although auto-down was set"));
                }
                run.figure(
                    &format!("node {index} (auto-down) still running after"),
                    secs(at.elapsed()),
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use shoal_core::Member;

    use super::*;

    #[test]
    fn keep_oldest_never_cuts_or_mutes_the_oldest_node() {
        let cut_zero = |downing| {
            (0..64).any(|seed| {
                let plan = Plan::new(seed, 5, downing);
                plan.minority.contains(&0) || plan.mute == 0
            })
        };
        assert!(
            cut_zero(DowningMode::KeepMajority),
            "the seed picks any node"
        );
        assert!(!cut_zero(DowningMode::KeepOldest));
    }

    #[test]
    fn the_kept_half_holds_the_lowest_address_or_the_oldest_member() {
        let harness = MemberId::new(5, 1);
        let mut view = vec![Member::up(MemberId::new(7, 1), 1, &[])];
        view.push(Member::up(MemberId::new(3, 1), 4, &[]));
        view.push(Member::up(harness, 2, &[]));
        let view = MembershipView::new(view);
        let kept = |downing| kept_member(downing, &view, harness);
        assert_eq!(kept(DowningMode::KeepMajority), MemberId::new(3, 1));
        assert_eq!(kept(DowningMode::LeaseMajority), MemberId::new(3, 1));
        assert_eq!(kept(DowningMode::KeepOldest), MemberId::new(7, 1));
    }
}
