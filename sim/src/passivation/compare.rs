//! Runs every policy and the optimal over traces, and renders the hit rates as a Markdown
//! table.

use std::fmt;

use shoal_core::passivation::{ActiveEntities, ReplacementPolicy};

use super::optimal::optimal_hits;
use super::trace::Trace;

/// How many accesses of `trace` find their entity active under `policy` with at most `limit`
/// active entities. Every victim is taken as stopped at once, as the core assumes.
pub fn policy_hits(trace: &Trace, policy: ReplacementPolicy, limit: usize) -> usize {
    let mut active = ActiveEntities::new(policy, limit);
    let mut hits = 0;
    for &entity in trace.accesses() {
        let id = trace.id(entity);
        hits += usize::from(active.contains(id));
        active.handle_access(id);
        debug_assert!(active.len() <= active.limit(), "{policy:?} over its limit");
    }
    hits
}

/// One trace's hits under every policy and under the optimal.
#[derive(Clone, Debug)]
pub struct TraceResult {
    /// The trace's name.
    pub trace: String,
    /// What the trace is.
    pub description: String,
    /// How many accesses it has.
    pub accesses: usize,
    /// How many distinct entities it accesses.
    pub distinct: usize,
    /// Each policy's name (from [`ReplacementPolicy::ALL`]) and hits, in that order.
    pub policies: Vec<(&'static str, usize)>,
    /// The optimal's hits.
    pub optimal: usize,
}

impl TraceResult {
    /// The hit rate of `hits` among this trace's accesses.
    pub fn rate(&self, hits: usize) -> f64 {
        hits as f64 / self.accesses.max(1) as f64
    }

    /// The hit rate of the policy named `name`, if it ran.
    pub fn policy_rate(&self, name: &str) -> Option<f64> {
        let (_, hits) = self.policies.iter().find(|(n, _)| *n == name)?;
        Some(self.rate(*hits))
    }

    /// The optimal's hit rate.
    pub fn optimal_rate(&self) -> f64 {
        self.rate(self.optimal)
    }
}

/// Every policy's and the optimal's hit rates on a set of traces, under one limit.
#[derive(Clone, Debug)]
pub struct Comparison {
    /// The active-entity limit.
    pub limit: usize,
    /// One result per trace, in the order given.
    pub traces: Vec<TraceResult>,
}

/// Runs every policy of [`ReplacementPolicy::ALL`] and the optimal over each of `traces` with
/// at most `limit` active entities.
pub fn compare(traces: &[Trace], limit: usize) -> Comparison {
    let limit = limit.max(1);
    let traces = (traces.iter())
        .map(|trace| TraceResult {
            trace: trace.name().to_string(),
            description: trace.description().to_string(),
            accesses: trace.len(),
            distinct: trace.distinct(),
            policies: (ReplacementPolicy::ALL.iter())
                .map(|&(name, policy)| (name, policy_hits(trace, policy, limit)))
                .collect(),
            optimal: optimal_hits(trace, limit),
        })
        .collect();
    Comparison { limit, traces }
}

impl fmt::Display for Comparison {
    /// A Markdown table, a row per policy and a column per trace, then the traces described.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Hit rates with at most {} active entities; in parentheses, the share of the \
             optimal's (Belady's offline MIN).\n",
            self.limit
        )?;
        write!(f, "| policy |")?;
        for result in &self.traces {
            write!(f, " {} |", result.trace)?;
        }
        write!(f, "\n|---|")?;
        for _ in &self.traces {
            write!(f, "--:|")?;
        }
        writeln!(f)?;
        let rows = self.traces.first().map_or(0, |r| r.policies.len());
        for row in 0..rows {
            write!(f, "| {} |", self.traces[0].policies[row].0)?;
            for result in &self.traces {
                let Some(&(_, hits)) = result.policies.get(row) else {
                    write!(f, " |")?;
                    continue;
                };
                let share = if result.optimal > 0 {
                    format!("{:.0} %", hits as f64 * 100.0 / result.optimal as f64)
                } else {
                    "-".to_string()
                };
                write!(f, " {:.2} % ({share}) |", result.rate(hits) * 100.0)?;
            }
            writeln!(f)?;
        }
        write!(f, "| optimal |")?;
        for result in &self.traces {
            write!(f, " {:.2} % |", result.optimal_rate() * 100.0)?;
        }
        writeln!(f, "\n")?;
        for result in &self.traces {
            writeln!(
                f,
                "- {}: {} accesses of {} entities; {}.",
                result.trace, result.accesses, result.distinct, result.description
            )?;
        }
        Ok(())
    }
}
