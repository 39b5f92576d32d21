//! The statements and conversions both SQL stores share (PostgreSQL's `$n` parameters; the
//! SQLite store rewrites them to `?n`).

use std::collections::BTreeSet;

use shoal_core::lease::FencingToken;
use shoal_core::{EntityId, Epoch, FencingClaim, FencingVerdict, ShardClaim, ShardId, shard_of};

use super::StoreError;

/// A shard's claim row: `(epoch, seq, lease_token)`.
pub(super) type ClaimRow = (i64, i64, i64);

/// Makes sure the shard has a claim row (epoch 0, sequence 0: what no row means), so that the
/// row lock of `CLAIM_OF_LOCKED` orders concurrent requests of one shard even before its first
/// load. `$1` type, `$2` shard.
#[cfg(feature = "postgres")]
pub(super) const CLAIM_ROW: &str = "
INSERT INTO shoal_remembered_shards (entity_type, shard, epoch, seq) VALUES ($1, $2, 0, 0)
ON CONFLICT (entity_type, shard) DO NOTHING";

/// The shard's claim: its newest accepted epoch, write sequence and shard-lease token. `$1`
/// type, `$2` shard.
#[cfg(feature = "sqlite")]
pub(super) const CLAIM_OF: &str = "SELECT epoch, seq, lease_token FROM shoal_remembered_shards
WHERE entity_type = $1 AND shard = $2";

/// `CLAIM_OF`, locking the row until the transaction ends (PostgreSQL; SQLite's immediate
/// transaction already excludes every other writer).
#[cfg(feature = "postgres")]
pub(super) const CLAIM_OF_LOCKED: &str =
    "SELECT epoch, seq, lease_token FROM shoal_remembered_shards
WHERE entity_type = $1 AND shard = $2 FOR UPDATE";

/// Records the claim `shoal_core::FencingVerdict` accepted. `$1` type, `$2` shard, `$3` epoch,
/// `$4` seq, `$5` lease token.
pub(super) const SET_CLAIM: &str = "
INSERT INTO shoal_remembered_shards (entity_type, shard, epoch, seq, lease_token)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (entity_type, shard) DO UPDATE SET epoch = excluded.epoch, seq = excluded.seq,
lease_token = excluded.lease_token";

/// The shard's remembered ids, dormant ones excepted.
pub(super) const LOAD: &str = "SELECT entity_id FROM shoal_remembered_entities
WHERE entity_type = $1 AND shard = $2 AND NOT dormant ORDER BY entity_id";

/// Every shard with an epoch (every shard ever loaded), with it.
pub(super) const SHARDS: &str = "SELECT shard, epoch FROM shoal_remembered_shards
WHERE entity_type = $1 ORDER BY shard";

/// The number of shards the type's ids are filed under (no row: never recorded).
pub(super) const FILED_UNDER: &str =
    "SELECT number_of_shards FROM shoal_remembered_types WHERE entity_type = $1";

/// Records the number of shards the type's ids are filed under.
pub(super) const SET_FILED_UNDER: &str = "
INSERT INTO shoal_remembered_types (entity_type, number_of_shards) VALUES ($1, $2)
ON CONFLICT (entity_type) DO UPDATE SET number_of_shards = excluded.number_of_shards";

/// Every remembered id of the type, with the shard whose entry holds it.
pub(super) const ENTRIES: &str =
    "SELECT shard, entity_id FROM shoal_remembered_entities WHERE entity_type = $1";

/// The type's newest epoch (0 if none).
pub(super) const TOP_EPOCH: &str =
    "SELECT COALESCE(MAX(epoch), 0) FROM shoal_remembered_shards WHERE entity_type = $1";

/// Forgets one id of a shard: `$1` type, `$2` shard, `$3` id.
pub(super) const FORGET: &str = "DELETE FROM shoal_remembered_entities
WHERE entity_type = $1 AND shard = $2 AND entity_id = $3";

/// Remembers one id in a shard as running (waking it if dormant): `$1` type, `$2` shard, `$3`
/// id.
#[cfg(feature = "sqlite")]
pub(super) const REMEMBER: &str = "
INSERT INTO shoal_remembered_entities (entity_type, shard, entity_id, dormant)
VALUES ($1, $2, $3, FALSE)
ON CONFLICT (entity_type, shard, entity_id) DO UPDATE SET dormant = FALSE";

/// Keeps one id of a shard as dormant (adding it if missing): `$1` type, `$2` shard, `$3` id.
#[cfg(feature = "sqlite")]
pub(super) const KEEP_DORMANT: &str = "
INSERT INTO shoal_remembered_entities (entity_type, shard, entity_id, dormant)
VALUES ($1, $2, $3, TRUE)
ON CONFLICT (entity_type, shard, entity_id) DO UPDATE SET dormant = TRUE";

/// Copies one id's entry, dormant or not, from shard `$2` to shard `$4` (a refile; `FORGET`
/// then removes the original): `$1` type, `$3` id. An entry already there is kept.
pub(super) const COPY_ENTRY: &str = "
INSERT INTO shoal_remembered_entities (entity_type, shard, entity_id, dormant)
SELECT entity_type, CAST($4 AS BIGINT), entity_id, dormant FROM shoal_remembered_entities
WHERE entity_type = $1 AND shard = $2 AND entity_id = $3
ON CONFLICT DO NOTHING";

/// Sets a shard's epoch (above every other of the type: a refile's) and resets its sequence.
pub(super) const SET_EPOCH: &str = "
INSERT INTO shoal_remembered_shards (entity_type, shard, epoch, seq) VALUES ($1, $2, $3, 0)
ON CONFLICT (entity_type, shard) DO UPDATE SET epoch = excluded.epoch, seq = 0";

/// What a refile changes: ids that move to the shard they map to under the new count, and
/// the entries touched, which get `epoch` (above the type's newest, so it fences every
/// instance that loaded one of them before).
#[derive(Debug, Default, PartialEq)]
pub(super) struct Refile {
    /// (from shard, to shard, id).
    pub(super) moves: Vec<(i64, i64, String)>,
    /// Shards whose entries change.
    pub(super) touched: BTreeSet<i64>,
    /// Their new epoch.
    pub(super) epoch: i64,
}

impl Refile {
    /// The refile of `entries` (shard, id) to `number_of_shards` shards, above `top`.
    pub(super) fn plan(
        entries: Vec<(i64, String)>,
        number_of_shards: u32,
        top: i64,
    ) -> Result<Self, StoreError> {
        let mut refile = Self {
            epoch: top
                .checked_add(1)
                .ok_or_else(|| StoreError::Invalid(format!("epoch {top}")))?,
            ..Self::default()
        };
        for (from, id) in entries {
            let to = i64::from(shard_of(&EntityId::from(id.as_str()), number_of_shards).0);
            if to != from {
                refile.touched.extend([from, to]);
                refile.moves.push((from, to, id));
            }
        }
        Ok(refile)
    }
}

/// A number of shards as the stores' integer.
pub(super) fn count_value(number_of_shards: u32) -> i64 {
    i64::from(number_of_shards)
}

/// An epoch and a write sequence as the stores' signed 64-bit integers.
pub(super) fn epoch_value(epoch: Epoch, seq: u64) -> Result<(i64, i64), StoreError> {
    let epoch =
        i64::try_from(epoch.0).map_err(|_| StoreError::Invalid(format!("epoch {}", epoch.0)))?;
    let seq = i64::try_from(seq).map_err(|_| StoreError::Invalid(format!("seq {seq}")))?;
    Ok((epoch, seq))
}

/// The store's verdict on `request` against the shard's claim row as read (`None`: no
/// row): the claim to write, if it changed, or the refusal.
pub(super) fn verdict(
    stored: Option<ClaimRow>,
    request: FencingClaim,
) -> Result<Option<ClaimRow>, StoreError> {
    let read = |value: i64, what: &str| {
        u64::try_from(value).map_err(|_| StoreError::Invalid(format!("{what} {value}")))
    };
    let stored = match stored {
        Some((epoch, seq, token)) => Some(ShardClaim {
            epoch: Epoch(read(epoch, "epoch")?),
            seq: read(seq, "seq")?,
            token: FencingToken(read(token, "lease token")?),
        }),
        None => None,
    };
    match FencingVerdict::of(stored, request) {
        FencingVerdict::Accept(claim) if Some(claim) == stored => Ok(None),
        FencingVerdict::Accept(claim) => {
            let (epoch, seq) = epoch_value(claim.epoch, claim.seq)?;
            let token = i64::try_from(claim.token.0)
                .map_err(|_| StoreError::Invalid(format!("lease token {}", claim.token.0)))?;
            Ok(Some((epoch, seq, token)))
        }
        FencingVerdict::Fenced(current)
        | FencingVerdict::Stale(current)
        | FencingVerdict::Superseded(current) => Err(StoreError::Fenced {
            refused: request.epoch,
            current,
        }),
    }
}

/// A driver's error as the store's: the request changed nothing and may be retried.
pub(super) fn unavailable(error: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(error.to_string())
}

/// A shard number and its epoch read back from the store.
pub(super) fn shard_epoch(shard: i64, epoch: i64) -> Result<(ShardId, Epoch), StoreError> {
    let shard = u32::try_from(shard)
        .map(ShardId)
        .map_err(|_| StoreError::Invalid(format!("shard {shard}")))?;
    let epoch = u64::try_from(epoch).map_err(|_| StoreError::Invalid(format!("epoch {epoch}")))?;
    Ok((shard, Epoch(epoch)))
}
