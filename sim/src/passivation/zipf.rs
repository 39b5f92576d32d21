//! Zipf-distributed ranks: rank `r` (from 0) is drawn with probability proportional to
//! `1 / (r + 1)^s`, the popularity skew of web and cache workloads.

use crate::rng::SimRng;

/// A sampler over a fixed population, by inverse CDF: the cumulative weights are computed
/// once, and each draw is one binary search.
#[derive(Clone, Debug)]
pub(super) struct Zipf {
    /// `cumulative[r]` is the sum of the weights of ranks `0..=r`.
    cumulative: Vec<f64>,
}

impl Zipf {
    /// Ranks `0..population` (at least one) with exponent `exponent`.
    pub(super) fn new(population: usize, exponent: f64) -> Self {
        let mut total = 0.0;
        let cumulative = (1..=population.max(1))
            .map(|rank| {
                total += (rank as f64).powf(-exponent);
                total
            })
            .collect();
        Self { cumulative }
    }

    /// One rank, 0 the most popular.
    pub(super) fn sample(&self, rng: &mut SimRng) -> u64 {
        let total = self.cumulative.last().copied().unwrap_or(0.0);
        let target = rng.unit() * total;
        // The first rank whose cumulative weight exceeds the target; the clamp guards against
        // rounding at the top end.
        let rank = self.cumulative.partition_point(|&c| c <= target);
        rank.min(self.cumulative.len() - 1) as u64
    }
}
