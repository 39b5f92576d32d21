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
//!
//! A shard whose type has a shard lease also claims the fencing token it holds the lease
//! under, and the store keeps the newest it saw: a request under an older token is refused
//! (*superseded*) whatever its epoch, so a write an instance sends after losing its lease (a
//! pause, a write in flight) is refused once the next holder has read or written. A request
//! without a token (a shard without a lease, or the remembered set's bookkeeping) is judged
//! by its epoch alone.

use crate::id::{Epoch, FencingToken};

/// What a store holds for one shard.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct ShardClaim {
    /// The newest epoch the store accepted.
    pub epoch: Epoch,
    /// The sequence number of the newest write accepted at that epoch (0: none since its load).
    pub seq: u64,
    /// The newest lease fencing token a request claimed (0: none yet).
    pub token: FencingToken,
}

/// What one request claims: its instance's epoch, its sequence number (0 for a load) and the
/// shard-lease token it acts under, if its type has shard leases.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct FencingClaim {
    /// The shard allocation's epoch.
    pub epoch: Epoch,
    /// 0 for a load; writes count from 1.
    pub seq: u64,
    /// The token the instance holds the shard's lease under.
    pub token: Option<FencingToken>,
}

impl FencingClaim {
    /// A claim of a shard without a lease.
    pub fn unleased(epoch: Epoch, seq: u64) -> Self {
        Self {
            epoch,
            seq,
            token: None,
        }
    }
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
    /// Refuse it: a newer holder of the shard's lease claimed it (answered as fenced too,
    /// with the store's epoch).
    Superseded(Epoch),
}

impl FencingVerdict {
    /// The verdict on `request` against what the store holds for the shard (`None`:
    /// nothing yet).
    pub fn of(stored: Option<ShardClaim>, request: FencingClaim) -> Self {
        let FencingClaim { epoch, seq, token } = request;
        let Some(stored) = stored else {
            let token = token.unwrap_or_default();
            return Self::Accept(ShardClaim { epoch, seq, token });
        };
        if token.is_some_and(|token| token < stored.token) {
            return Self::Superseded(stored.epoch);
        }
        let token = token.map_or(stored.token, |token| token.max(stored.token));
        if epoch < stored.epoch {
            return Self::Fenced(stored.epoch);
        }
        if epoch > stored.epoch {
            return Self::Accept(ShardClaim { epoch, seq, token });
        }
        match seq {
            0 => Self::Accept(ShardClaim { token, ..stored }),
            _ if seq < stored.seq => Self::Stale(stored.epoch),
            _ => Self::Accept(ShardClaim { epoch, seq, token }),
        }
    }

    /// The store's epoch a refusal names, if this is one.
    pub fn refused(self) -> Option<Epoch> {
        match self {
            Self::Accept(_) => None,
            Self::Fenced(current) | Self::Stale(current) | Self::Superseded(current) => {
                Some(current)
            }
        }
    }
}

/// One case of the table every store is tested against: requests to one shard in order, each
/// a load (`seq` 0) or a write, with the answer it must get.
#[derive(Clone, Copy, Debug)]
pub struct FencingCase {
    /// What the case shows.
    pub name: &'static str,
    /// `(epoch, seq, token, expected)`: a step with a token (non-zero) is a state store's
    /// read or write (which claim sequence 0), one without is a remember store's load (`seq`
    /// 0) or write; `None` accepted, `Some(current)` refused as fenced with the store's
    /// current epoch.
    pub steps: &'static [(u64, u64, u64, Option<u64>)],
}

/// The cases every store must pass, its remember store and its state store sharing the
/// shard's claim (the simulator's store and both SQL stores run them; a store of your own can
/// too).
pub const FENCING_CASES: &[FencingCase] = &[
    FencingCase {
        name: "a first load claims its epoch, and its instance writes in order",
        steps: &[(3, 0, 0, None), (3, 1, 0, None), (3, 2, 0, None)],
    },
    FencingCase {
        name: "an older epoch is fenced, for loads and writes",
        steps: &[(3, 0, 0, None), (2, 0, 0, Some(3)), (2, 1, 0, Some(3))],
    },
    FencingCase {
        name: "a write that lands after a newer one of its instance is refused",
        steps: &[
            (3, 0, 0, None),
            (3, 2, 0, None),
            (3, 1, 0, Some(3)),
            (3, 3, 0, None),
        ],
    },
    FencingCase {
        name: "a load at its own epoch reads and leaves the sequence",
        steps: &[
            (3, 0, 0, None),
            (3, 2, 0, None),
            (3, 0, 0, None),
            (3, 1, 0, Some(3)),
            (3, 2, 0, None),
        ],
    },
    FencingCase {
        name: "a newer epoch takes over and fences the old instance's writes",
        steps: &[
            (3, 0, 0, None),
            (3, 5, 0, None),
            (4, 0, 0, None),
            (3, 6, 0, Some(4)),
            (4, 1, 0, None),
        ],
    },
    FencingCase {
        name: "a newer epoch's load resets the sequence",
        steps: &[
            (3, 0, 0, None),
            (3, 9, 0, None),
            (4, 0, 0, None),
            (4, 1, 0, None),
            (4, 1, 0, None),
        ],
    },
    FencingCase {
        name: "a holder that lost the shard's lease is refused once the next holder claimed",
        steps: &[
            (3, 0, 5, None),
            (3, 0, 6, None),
            (3, 0, 5, Some(3)),
            (3, 0, 6, None),
            (3, 1, 0, None),
        ],
    },
    FencingCase {
        name: "an older token is refused whatever its epoch",
        steps: &[
            (3, 0, 6, None),
            (4, 0, 5, Some(3)),
            (4, 0, 7, None),
            (3, 1, 0, Some(4)),
        ],
    },
    FencingCase {
        name: "a request without a token is judged by its epoch alone",
        steps: &[
            (3, 0, 6, None),
            (3, 1, 0, None),
            (2, 0, 0, Some(3)),
            (3, 0, 6, None),
            (3, 2, 0, None),
        ],
    },
];

impl FencingCase {
    /// The claim of step `(epoch, seq, token, _)`.
    pub fn claim(step: (u64, u64, u64, Option<u64>)) -> FencingClaim {
        let (epoch, seq, token, _) = step;
        FencingClaim {
            epoch: Epoch(epoch),
            seq,
            token: (token > 0).then_some(FencingToken(token)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_passes_every_case() {
        for case in FENCING_CASES {
            let mut stored = None;
            for (i, &step) in case.steps.iter().enumerate() {
                let verdict = FencingVerdict::of(stored, FencingCase::claim(step));
                if let FencingVerdict::Accept(claim) = verdict {
                    stored = Some(claim);
                }
                let got = verdict.refused().map(|current| current.0);
                assert_eq!(got, step.3, "{}: step {i}", case.name);
            }
        }
    }

    #[test]
    fn stale_fenced_and_superseded_are_told_apart() {
        let claim = ShardClaim {
            epoch: Epoch(3),
            seq: 2,
            token: FencingToken(7),
        };
        let stored = Some(claim);
        let unleased =
            |epoch, seq| FencingVerdict::of(stored, FencingClaim::unleased(Epoch(epoch), seq));
        assert_eq!(unleased(3, 1), FencingVerdict::Stale(Epoch(3)));
        assert_eq!(unleased(2, 9), FencingVerdict::Fenced(Epoch(3)));
        assert_eq!(unleased(3, 0), FencingVerdict::Accept(claim));
        let older = FencingClaim {
            token: Some(FencingToken(6)),
            ..FencingClaim::unleased(Epoch(4), 0)
        };
        assert_eq!(
            FencingVerdict::of(stored, older),
            FencingVerdict::Superseded(Epoch(3))
        );
        let newer = FencingClaim {
            token: Some(FencingToken(8)),
            ..FencingClaim::unleased(Epoch(3), 0)
        };
        let taken = ShardClaim {
            token: FencingToken(8),
            ..claim
        };
        assert_eq!(
            FencingVerdict::of(stored, newer),
            FencingVerdict::Accept(taken)
        );
    }
}
