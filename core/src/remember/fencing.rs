//! The remember store's fencing verdict, written once for every store (the simulator's and
//! the SQL stores), with the table of cases each is tested against. A store keeps, per shard,
//! the newest epoch it accepted and the sequence number of the newest write at that epoch;
//! every request claims its epoch and sequence (a load is sequence 0, writes count from 1):
//!
//! - an older epoch than the store's is refused (*fenced*): its instance was replaced;
//! - a newer epoch is accepted, and its sequence replaces the store's (a load's resets it);
//! - at the same epoch a load reads and leaves the sequence, and a write is accepted unless
//!   its sequence is older than the store's: a write of this instance that timed out and
//!   landed after a newer one (*stale*), refused as fenced too.

use crate::id::Epoch;

/// What a store holds for one shard.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct ShardClaim {
    /// The newest epoch the store accepted.
    pub epoch: Epoch,
    /// The sequence number of the newest write accepted at that epoch (0: none since its load).
    pub seq: u64,
}

/// A store's verdict on one request.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum FencingVerdict {
    /// Carry the request out and keep this claim for the shard.
    Accept(ShardClaim),
    /// Refuse it: the store holds this newer epoch.
    Fenced(Epoch),
    /// Refuse it: a newer write of the same epoch was accepted (answered as fenced too).
    Stale(Epoch),
}

impl FencingVerdict {
    /// The verdict on a request of `epoch` and `seq` (0 for a load) against what the store
    /// holds for the shard (`None`: nothing yet).
    pub fn of(stored: Option<ShardClaim>, epoch: Epoch, seq: u64) -> Self {
        let claim = ShardClaim { epoch, seq };
        let Some(stored) = stored else {
            return Self::Accept(claim);
        };
        if epoch < stored.epoch {
            return Self::Fenced(stored.epoch);
        }
        if epoch > stored.epoch {
            return Self::Accept(claim);
        }
        match seq {
            0 => Self::Accept(stored),
            _ if seq < stored.seq => Self::Stale(stored.epoch),
            _ => Self::Accept(claim),
        }
    }
}

/// One case of the table every store is tested against: requests to one shard in order, each
/// a load (`seq` 0) or a write, with the answer it must get.
#[derive(Clone, Copy, Debug)]
pub struct FencingCase {
    /// What the case shows.
    pub name: &'static str,
    /// `(epoch, seq, expected)`: `None` accepted, `Some(current)` refused as fenced with the
    /// store's current epoch.
    pub steps: &'static [(u64, u64, Option<u64>)],
}

/// The cases every remember store must pass (the simulator's store and both SQL stores run
/// them; a store of your own can too).
pub const FENCING_CASES: &[FencingCase] = &[
    FencingCase {
        name: "a first load claims its epoch, and its instance writes in order",
        steps: &[(3, 0, None), (3, 1, None), (3, 2, None)],
    },
    FencingCase {
        name: "an older epoch is fenced, for loads and writes",
        steps: &[(3, 0, None), (2, 0, Some(3)), (2, 1, Some(3))],
    },
    FencingCase {
        name: "a write that lands after a newer one of its instance is refused",
        steps: &[(3, 0, None), (3, 2, None), (3, 1, Some(3)), (3, 3, None)],
    },
    FencingCase {
        name: "a load at its own epoch reads and leaves the sequence",
        steps: &[
            (3, 0, None),
            (3, 2, None),
            (3, 0, None),
            (3, 1, Some(3)),
            (3, 2, None),
        ],
    },
    FencingCase {
        name: "a newer epoch takes over and fences the old instance's writes",
        steps: &[
            (3, 0, None),
            (3, 5, None),
            (4, 0, None),
            (3, 6, Some(4)),
            (4, 1, None),
        ],
    },
    FencingCase {
        name: "a newer epoch's load resets the sequence",
        steps: &[
            (3, 0, None),
            (3, 9, None),
            (4, 0, None),
            (4, 1, None),
            (4, 1, None),
        ],
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_passes_every_case() {
        for case in FENCING_CASES {
            let mut stored = None;
            for (i, &(epoch, seq, expected)) in case.steps.iter().enumerate() {
                let verdict = FencingVerdict::of(stored, Epoch(epoch), seq);
                let got = match verdict {
                    FencingVerdict::Accept(claim) => {
                        stored = Some(claim);
                        None
                    }
                    FencingVerdict::Fenced(current) | FencingVerdict::Stale(current) => {
                        Some(current.0)
                    }
                };
                assert_eq!(got, expected, "{}: step {i}", case.name);
            }
        }
    }

    #[test]
    fn stale_and_fenced_are_told_apart() {
        let claim = ShardClaim {
            epoch: Epoch(3),
            seq: 2,
        };
        let stored = Some(claim);
        assert_eq!(
            FencingVerdict::of(stored, Epoch(3), 1),
            FencingVerdict::Stale(Epoch(3))
        );
        assert_eq!(
            FencingVerdict::of(stored, Epoch(2), 9),
            FencingVerdict::Fenced(Epoch(3))
        );
        assert_eq!(
            FencingVerdict::of(stored, Epoch(3), 0),
            FencingVerdict::Accept(claim)
        );
    }
}
