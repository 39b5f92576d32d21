//! The statements and conversions both SQL stores share (PostgreSQL's `$n` parameters; the
//! SQLite store rewrites them to `?n`).

use shoal_core::{Epoch, ShardId};

use super::StoreError;

/// Raises the shard's epoch to the given one unless it is already newer: one row changed if
/// the epoch was accepted, none if it is fenced. `$1` type, `$2` shard, `$3` epoch.
pub(super) const CLAIM_EPOCH: &str = "
INSERT INTO shoal_remembered_shards (entity_type, shard, epoch) VALUES ($1, $2, $3)
ON CONFLICT (entity_type, shard) DO UPDATE SET epoch = excluded.epoch
WHERE shoal_remembered_shards.epoch <= excluded.epoch";

/// The shard's current epoch (to report a refusal).
pub(super) const CURRENT_EPOCH: &str =
    "SELECT epoch FROM shoal_remembered_shards WHERE entity_type = $1 AND shard = $2";

/// The shard's remembered ids.
pub(super) const LOAD: &str = "SELECT entity_id FROM shoal_remembered_entities
WHERE entity_type = $1 AND shard = $2 ORDER BY entity_id";

/// The shards remembering something.
pub(super) const SHARDS: &str = "SELECT DISTINCT shard FROM shoal_remembered_entities
WHERE entity_type = $1 ORDER BY shard";

/// An epoch as the stores' signed 64-bit integer.
pub(super) fn epoch_value(epoch: Epoch) -> Result<i64, StoreError> {
    i64::try_from(epoch.0).map_err(|_| StoreError::Invalid(format!("epoch {}", epoch.0)))
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

/// A shard number read back from the store.
pub(super) fn shard_id(shard: i64) -> Result<ShardId, StoreError> {
    u32::try_from(shard)
        .map(ShardId)
        .map_err(|_| StoreError::Invalid(format!("shard {shard}")))
}
