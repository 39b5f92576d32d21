//! What a run reports: how it ended, its violations, the figures, and everything needed to
//! reproduce and explain a failure.

use std::fmt;
use std::time::Duration;

use crate::check::Violation;
use crate::options::Options;
use crate::schedule::Schedule;

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
        // A drawn strategy comes back with the seed; only an override needs saying.
        let drawn = Options::for_family(self.options.seed, self.options.family);
        if !self.replayable(&drawn) {
            return CALLER_SET_OPTIONS.to_string();
        }
        let downing = if self.options.cluster.downing == drawn.cluster.downing {
            String::new()
        } else {
            format!(" --downing {}", self.options.cluster.downing.name())
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
        let membership = match self.options.cluster.membership {
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

    /// Whether the command line can rebuild this run's options: those `drawn` from its seed
    /// and family, with only the overrides `replay` takes (downing, membership, schedule).
    fn replayable(&self, drawn: &Options) -> bool {
        let mut rebuilt = drawn.clone();
        rebuilt.cluster.downing = self.options.cluster.downing;
        rebuilt.cluster.membership = self.options.cluster.membership;
        rebuilt.schedule = self.options.schedule.clone();
        rebuilt == self.options
    }
}

/// What `reproduce` says of a run whose options a test or fuzz target set beyond the seed's.
const CALLER_SET_OPTIONS: &str = "rerun the test or fuzz input that made this run: it set \
     options the seed does not draw (sizes, rates or faults), which the command line cannot repeat";

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
