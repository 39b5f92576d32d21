//! The built-in traces, each sized relative to the limit so that the policies' strengths and
//! weaknesses show, and each deterministic for a seed.

use super::trace::Trace;
use super::zipf::Zipf;
use crate::rng::SimRng;

/// Accesses per entity of the limit, for every built-in trace: enough for the hill climber and
/// the sketch (both working in periods of ten per entity of the limit) to settle many times.
const ACCESSES_PER_SLOT: usize = 100;
/// The popularity skew of the Zipf-shaped traces: the classic web-cache exponent.
const EXPONENT: f64 = 1.0;
/// The Zipf trace's population per entity of the limit: ten times more entities than fit, as
/// in the mixed trace.
const ZIPF_POPULATION_PER_SLOT: usize = 10;
/// The scan trace's hot accesses between scans, per entity of the limit.
const SCAN_HOT_BURST_PER_SLOT: usize = 3;
/// The mixed trace's phases, its population and its shift per phase, per entity of the limit.
const MIXED_PHASES: usize = 10;
const MIXED_POPULATION_PER_SLOT: usize = 10;
const MIXED_SHIFT_PER_SLOT: usize = 2;
/// Keeps the traces' random streams apart from each other's and from the cluster runs'.
const STREAM_BASE: u64 = 0x7061_7373_0000;

/// A synthetic access pattern.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum Synthetic {
    /// Skewed popularity: Zipf(1.0) over a population ten times the limit.
    Zipf,
    /// A loop over a quarter more entities than the limit: least recently used evicts
    /// exactly the entity needed next, most recently used keeps most of the loop.
    Loop,
    /// A hot set the size of the limit, interrupted by scans of as many entities never seen
    /// again: only scan-resistant policies keep the hot set across a scan.
    Scan,
    /// Popularity that drifts: phases of Zipf accesses, each ranking shifted to entities that
    /// were rarely accessed before, so counts from old phases mislead a policy without aging.
    Mixed,
}

impl Synthetic {
    /// Every built-in trace, in the order tables show them.
    pub const ALL: [Self; 4] = [Self::Zipf, Self::Loop, Self::Scan, Self::Mixed];

    /// The name on the command line and in tables.
    pub fn name(self) -> &'static str {
        match self {
            Self::Zipf => "zipf",
            Self::Loop => "loop",
            Self::Scan => "scan",
            Self::Mixed => "mixed",
        }
    }

    /// The trace named `name`, if built in.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The trace for `limit` active entities (at least one), drawn from `seed`.
    pub fn trace(self, limit: usize, seed: u64) -> Trace {
        let limit = limit.max(1);
        let total = limit * ACCESSES_PER_SLOT;
        let mut rng = SimRng::stream(seed, STREAM_BASE + self as u64);
        let name_of = |key: &u64| format!("e{key}");
        match self {
            Self::Zipf => {
                let population = limit * ZIPF_POPULATION_PER_SLOT;
                let zipf = Zipf::new(population, EXPONENT);
                let keys = (0..total).map(|_| zipf.sample(&mut rng));
                let description =
                    format!("Zipf({EXPONENT:.1}) over {population} entities, seed {seed}");
                Trace::from_keys(self.name(), description, keys, name_of)
            }
            Self::Loop => {
                let cycle = (limit + limit / 4).max(limit + 1);
                let keys = (0..total).map(|i| (i % cycle) as u64);
                let description = format!("a loop over {cycle} entities, {} times", total / cycle);
                Trace::from_keys(self.name(), description, keys, name_of)
            }
            Self::Scan => {
                let burst = limit * SCAN_HOT_BURST_PER_SLOT;
                let zipf = Zipf::new(limit, EXPONENT);
                let mut keys = Vec::with_capacity(total);
                // Scanned entities are numbered above the hot ones, each used once.
                let mut fresh = limit as u64;
                while keys.len() < total {
                    keys.extend((0..burst).map(|_| zipf.sample(&mut rng)));
                    keys.extend(fresh..fresh + limit as u64);
                    fresh += limit as u64;
                }
                keys.truncate(total);
                let description = format!(
                    "bursts of {burst} Zipf({EXPONENT:.1}) accesses over {limit} hot entities, \
                     each followed by a scan of {limit} entities used once, seed {seed}"
                );
                Trace::from_keys(self.name(), description, keys, name_of)
            }
            Self::Mixed => {
                let population = limit * MIXED_POPULATION_PER_SLOT;
                let shift = (limit * MIXED_SHIFT_PER_SLOT) as u64;
                let per_phase = total / MIXED_PHASES;
                let zipf = Zipf::new(population, EXPONENT);
                let mut keys = Vec::with_capacity(total);
                for phase in 0..MIXED_PHASES as u64 {
                    keys.extend((0..per_phase).map(|_| zipf.sample(&mut rng) + phase * shift));
                }
                let description = format!(
                    "{MIXED_PHASES} phases of {per_phase} Zipf({EXPONENT:.1}) accesses over \
                     {population} entities, the ranking shifted by {shift} entities a phase \
                     (a phase's hottest ranked {shift}th and below in the one before), \
                     seed {seed}"
                );
                Trace::from_keys(self.name(), description, keys, name_of)
            }
        }
    }
}

/// The traces `choice` names: a built-in one, `all` of them, or else the path of a trace file.
pub fn select(choice: &str, limit: usize, seed: u64) -> Result<Vec<Trace>, String> {
    if choice == "all" {
        return Ok((Synthetic::ALL.iter())
            .map(|t| t.trace(limit, seed))
            .collect());
    }
    if let Some(synthetic) = Synthetic::parse(choice) {
        return Ok(vec![synthetic.trace(limit, seed)]);
    }
    let path = std::path::Path::new(choice);
    if !path.exists() {
        let names: Vec<&str> = Synthetic::ALL.iter().map(|t| t.name()).collect();
        return Err(format!(
            "{choice:?} is neither a built-in trace ({}, all) nor a file",
            names.join(", ")
        ));
    }
    Trace::read_file(path).map(|trace| vec![trace])
}
