//! What a run's trace says about each node over time, gathered for the picture: process and
//! membership status, faults, how the others see it, shards hosted and marked instants.

use std::collections::BTreeMap;

use crate::trace::{TraceEvent, TraceLine};

/// A span of time: (from, to, what), with `to` open (`None`) until closed.
pub(super) type Span = (u64, Option<u64>, String);

/// One node's row: what its processes, statuses, faults and shards did over time.
#[derive(Default)]
pub(super) struct Row {
    /// (from, to, status) with `to` open (`None`) until the next change.
    pub(super) statuses: Vec<Span>,
    /// The member running on the node now.
    pub(super) current: String,
    /// (from, to, opinion): how the other members' views see the current member
    /// (`Down`, `unreachable` or `ok`).
    pub(super) seen: Vec<Span>,
    /// (from, to, what): faults on this node.
    pub(super) faults: Vec<Span>,
    /// (time, shards hosted) samples.
    pub(super) hosting: Vec<(u64, usize)>,
    /// (time, glyph, colour, what): instants worth a marker.
    pub(super) marks: Vec<(u64, char, &'static str, String)>,
}

/// The node (`n3`) of a member (`n3#2`).
fn node_of(member: &str) -> &str {
    member.split_once('#').map_or(member, |(node, _)| node)
}

/// Numeric order of node names (`n2` before `n10`).
fn node_key(node: &str) -> (u64, String) {
    let n = node.trim_start_matches('n').parse().unwrap_or(u64::MAX);
    (n, node.to_owned())
}

/// Closes the open interval of `spans` at `t`.
fn close(spans: &mut [Span], t: u64) {
    if let Some(last) = spans.last_mut().filter(|s| s.1.is_none()) {
        last.1 = Some(t);
    }
}

/// Closes at `t` every interval of `spans` still open.
fn close_all(spans: &mut [Span], t: u64) {
    for open in spans.iter_mut().filter(|s| s.1.is_none()) {
        open.1 = Some(t);
    }
}

/// Closes at `t` the latest open interval of `spans` whose text contains `what`.
fn close_fault(spans: &mut [Span], t: u64, what: &str) {
    if let Some(open) = spans
        .iter_mut()
        .rev()
        .find(|s| s.1.is_none() && s.2.contains(what))
    {
        open.1 = Some(t);
    }
}

fn row<'a>(rows: &'a mut BTreeMap<(u64, String), Row>, node: &str) -> &'a mut Row {
    rows.entry(node_key(node)).or_default()
}

pub(super) fn rows_of(trace: &[TraceLine], end: u64) -> BTreeMap<(u64, String), Row> {
    let mut rows: BTreeMap<(u64, String), Row> = BTreeMap::new();
    // Nodes cut off by the partition in force, closed when it heals.
    let mut cut: Vec<String> = Vec::new();
    // Each running observer's latest view: member -> (status, reachable).
    let mut views: BTreeMap<String, BTreeMap<String, (String, bool)>> = BTreeMap::new();
    for &TraceLine { t_ns: t, ref event } in trace {
        match event {
            TraceEvent::ProcessStarted { member } => {
                let r = row(&mut rows, node_of(member));
                close(&mut r.statuses, t);
                close(&mut r.seen, t);
                r.current.clone_from(member);
                r.statuses.push((t, None, "Joining".into()));
                r.marks.push((t, '▶', "#2a7", format!("{member} started")));
            }
            TraceEvent::ProcessEnded { member } => {
                views.remove(member);
                let r = row(&mut rows, node_of(member));
                close(&mut r.statuses, t);
                close(&mut r.seen, t);
                close_all(&mut r.faults, t);
                r.statuses.push((t, None, "no process".into()));
            }
            TraceEvent::Crashed { member } => {
                row(&mut rows, node_of(member)).marks.push((
                    t,
                    '✕',
                    "#c00",
                    format!("{member} crashed"),
                ));
            }
            TraceEvent::View {
                member, members, ..
            } => {
                let own = members.iter().find(|m| &m.member == member);
                let r = row(&mut rows, node_of(member));
                let current = r.statuses.last().map(|s| s.2.as_str());
                if let Some(own) = own.filter(|o| current != Some(o.status.as_str())) {
                    close(&mut r.statuses, t);
                    r.statuses.push((t, None, own.status.clone()));
                }
                let latest = members
                    .iter()
                    .map(|m| (m.member.clone(), (m.status.clone(), m.reachable)))
                    .collect();
                views.insert(member.clone(), latest);
                for seen in members {
                    let opinion = opinion_of(&views, &seen.member);
                    let r = row(&mut rows, node_of(&seen.member));
                    let changed = r
                        .seen
                        .last()
                        .is_none_or(|s| s.1.is_some() || s.2 != opinion);
                    if r.current == seen.member && changed {
                        close(&mut r.seen, t);
                        r.seen.push((t, None, opinion.to_owned()));
                    }
                }
            }
            TraceEvent::Paused { node } => {
                row(&mut rows, node)
                    .faults
                    .push((t, None, format!("{node} paused")));
            }
            TraceEvent::Resumed { node, .. } => {
                close_fault(&mut row(&mut rows, node).faults, t, "paused")
            }
            TraceEvent::Partitioned {
                side,
                rest,
                one_way,
            } => {
                let how = if *one_way {
                    "muted (one-way)"
                } else {
                    "cut off"
                };
                for node in side {
                    let what = format!("{node} {how} from {}", rest.join(" "));
                    row(&mut rows, node).faults.push((t, None, what));
                }
                cut.clone_from(side);
            }
            TraceEvent::Healed => {
                for node in cut.drain(..) {
                    close_fault(&mut row(&mut rows, &node).faults, t, " from ");
                }
            }
            TraceEvent::Clogged {
                node,
                peer,
                until_ns,
            } => {
                let what = match peer {
                    Some(peer) => format!("link {node}-{peer} clogged"),
                    None => format!("{node} clogged"),
                };
                row(&mut rows, node).faults.push((t, Some(*until_ns), what));
            }
            TraceEvent::ConnectionBroken { a, b } => {
                for node in [a, b] {
                    let what = format!("connection {a}-{b} broken");
                    row(&mut rows, node).marks.push((t, '⚡', "#a60", what));
                }
            }
            TraceEvent::LeftCluster { member, downed } => {
                let what = if *downed { "downed" } else { "left" };
                row(&mut rows, node_of(member)).marks.push((
                    t,
                    '⏏',
                    "#555",
                    format!("{member} {what}"),
                ));
            }
            TraceEvent::Hosting { member, shards } => {
                row(&mut rows, node_of(member)).hosting.push((t, *shards));
            }
            TraceEvent::ShardHosted { shard, region } => {
                let what = format!("{shard} allocated to {region}");
                row(&mut rows, node_of(region))
                    .marks
                    .push((t, '▾', "#16c", what));
            }
            TraceEvent::HandOffBegun { shard, owner } => {
                let what = format!("{shard} handed off from {owner}");
                row(&mut rows, node_of(owner))
                    .marks
                    .push((t, '▴', "#d70", what));
            }
            _ => {}
        }
    }
    for r in rows.values_mut() {
        close(&mut r.statuses, end);
        close(&mut r.seen, end);
        close_all(&mut r.faults, end);
    }
    rows
}

/// How the other observers' latest views see `member`: `Down` if any holds it down or removed,
/// else `unreachable` if any cannot reach it, else `ok`.
fn opinion_of(
    views: &BTreeMap<String, BTreeMap<String, (String, bool)>>,
    member: &str,
) -> &'static str {
    let mut opinion = "ok";
    for (observer, view) in views {
        match view.get(member) {
            _ if observer == member => {}
            Some((status, _)) if status == "Down" || status == "Removed" => return "Down",
            Some((_, false)) => opinion = "unreachable",
            _ => {}
        }
    }
    opinion
}

/// Deliveries to entities in each simulated second.
pub(super) fn deliveries_per_second(trace: &[TraceLine], end: u64) -> Vec<u64> {
    let mut per_second = vec![0; usize::try_from(end / 1_000_000_000 + 1).unwrap_or(1)];
    for line in trace {
        if matches!(line.event, TraceEvent::Delivered { .. }) {
            let second = usize::try_from(line.t_ns / 1_000_000_000).unwrap_or(0);
            if let Some(n) = per_second.get_mut(second) {
                *n += 1;
            }
        }
    }
    per_second
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::ViewEntry;

    fn at(t_ns: u64, event: TraceEvent) -> TraceLine {
        TraceLine { t_ns, event }
    }

    fn view(observer: &str, members: &[(&str, &str, bool)]) -> TraceEvent {
        TraceEvent::View {
            member: observer.into(),
            version: None,
            members: members
                .iter()
                .map(|&(member, status, reachable)| ViewEntry {
                    member: member.into(),
                    status: status.into(),
                    reachable,
                })
                .collect(),
        }
    }

    fn started(member: &str) -> TraceEvent {
        TraceEvent::ProcessStarted {
            member: member.into(),
        }
    }

    #[test]
    fn a_pause_ends_at_its_resume_and_a_partition_at_the_heal() {
        let trace = [
            at(0, started("n1#1")),
            at(0, started("n2#1")),
            at(
                10,
                TraceEvent::Partitioned {
                    side: vec!["n1".into()],
                    rest: vec!["n2".into()],
                    one_way: false,
                },
            ),
            at(20, TraceEvent::Paused { node: "n1".into() }),
            at(
                30,
                TraceEvent::Resumed {
                    node: "n1".into(),
                    waiting: 3,
                },
            ),
            at(40, TraceEvent::Healed),
        ];
        let rows = rows_of(&trace, 100);
        let n1 = &rows[&(1, "n1".to_owned())];
        let spans: Vec<(u64, Option<u64>)> = n1.faults.iter().map(|f| (f.0, f.1)).collect();
        assert_eq!(spans, [(10, Some(40)), (20, Some(30))]);
        assert!(rows[&(2, "n2".to_owned())].faults.is_empty());
    }

    #[test]
    fn statuses_follow_the_members_own_view_and_a_restart() {
        let trace = [
            at(0, started("n1#1")),
            at(5, view("n1#1", &[("n1#1", "Up", true)])),
            at(6, view("n1#1", &[("n1#1", "Up", true)])),
            at(
                9,
                TraceEvent::Crashed {
                    member: "n1#1".into(),
                },
            ),
            at(
                9,
                TraceEvent::ProcessEnded {
                    member: "n1#1".into(),
                },
            ),
            at(20, started("n1#2")),
        ];
        let rows = rows_of(&trace, 30);
        let n1 = &rows[&(1, "n1".to_owned())];
        let statuses: Vec<(u64, Option<u64>, &str)> = n1
            .statuses
            .iter()
            .map(|s| (s.0, s.1, s.2.as_str()))
            .collect();
        assert_eq!(
            statuses,
            [
                (0, Some(5), "Joining"),
                (5, Some(9), "Up"),
                (9, Some(20), "no process"),
                (20, Some(30), "Joining"),
            ]
        );
        assert_eq!(n1.current, "n1#2");
        assert!(n1.marks.iter().any(|m| m.0 == 9 && m.1 == '✕'));
    }

    #[test]
    fn the_others_views_show_a_member_unreachable_then_down() {
        let trace = [
            at(0, started("n1#1")),
            at(0, started("n2#1")),
            at(0, started("n3#1")),
            at(
                5,
                view("n2#1", &[("n1#1", "Up", false), ("n2#1", "Up", true)]),
            ),
            // n1's own opinion of itself does not count.
            at(6, view("n1#1", &[("n1#1", "Down", true)])),
            at(
                7,
                view("n3#1", &[("n1#1", "Down", false), ("n3#1", "Up", true)]),
            ),
        ];
        let rows = rows_of(&trace, 10);
        let seen: Vec<(u64, Option<u64>, &str)> = rows[&(1, "n1".to_owned())]
            .seen
            .iter()
            .map(|s| (s.0, s.1, s.2.as_str()))
            .collect();
        assert_eq!(seen, [(5, Some(7), "unreachable"), (7, Some(10), "Down")]);
    }

    #[test]
    fn deliveries_are_counted_per_simulated_second() {
        let deliver = |t| {
            at(
                t,
                TraceEvent::Delivered {
                    member: "n1#1".into(),
                    entity: "e1".into(),
                    message: String::new(),
                },
            )
        };
        let trace = [deliver(0), deliver(999_999_999), deliver(2_500_000_000)];
        assert_eq!(deliveries_per_second(&trace, 3_000_000_000), [2, 0, 1, 0]);
    }
}
