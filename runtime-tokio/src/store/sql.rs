//! The statements and conversions both SQL stores share (PostgreSQL's `$n` parameters; the
//! SQLite store rewrites them to `?n`).

use shoal_core::{Epoch, ShardId};

use super::StoreError;

/// Raises the shard's `(epoch, seq)` to the given one unless it is already newer: one row
/// changed if accepted, none otherwise: an older epoch is fenced; an older sequence at the
/// same epoch is a write of that instance that timed out and landed late; a load (seq 0) at
/// the same epoch after writes is a read that leaves the sequence (the caller checks which).
/// `$1` type, `$2` shard, `$3` epoch, `$4` seq (0 for a load, 1, 2, ... for writes).
pub(super) const CLAIM_EPOCH: &str = "
INSERT INTO shoal_remembered_shards (entity_type, shard, epoch, seq) VALUES ($1, $2, $3, $4)
ON CONFLICT (entity_type, shard) DO UPDATE SET epoch = excluded.epoch, seq = excluded.seq
WHERE shoal_remembered_shards.epoch < excluded.epoch
   OR (shoal_remembered_shards.epoch = excluded.epoch
       AND shoal_remembered_shards.seq <= excluded.seq)";

/// The shard's current epoch (to report a refusal).
pub(super) const CURRENT_EPOCH: &str =
    "SELECT epoch FROM shoal_remembered_shards WHERE entity_type = $1 AND shard = $2";

/// The shard's remembered ids.
pub(super) const LOAD: &str = "SELECT entity_id FROM shoal_remembered_entities
WHERE entity_type = $1 AND shard = $2 ORDER BY entity_id";

/// Every shard with an epoch (every shard ever loaded), with it.
pub(super) const SHARDS: &str = "SELECT shard, epoch FROM shoal_remembered_shards
WHERE entity_type = $1 ORDER BY shard";

/// An epoch and a write sequence as the stores' signed 64-bit integers.
pub(super) fn epoch_value(epoch: Epoch, seq: u64) -> Result<(i64, i64), StoreError> {
    let epoch =
        i64::try_from(epoch.0).map_err(|_| StoreError::Invalid(format!("epoch {}", epoch.0)))?;
    let seq = i64::try_from(seq).map_err(|_| StoreError::Invalid(format!("seq {seq}")))?;
    Ok((epoch, seq))
}

/// The refusal of `refused` when the store holds `current`.
pub(super) fn fenced(refused: Epoch, current: i64) -> StoreError {
    StoreError::Fenced {
        refused,
        current: Epoch(u64::try_from(current).unwrap_or(0)),
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
