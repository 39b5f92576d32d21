//! The statements and checks both SQL state stores share (PostgreSQL's `$n` parameters; the
//! SQLite store rewrites them to `?n`).

use shoal_core::Epoch;
use shoal_core::delivery::{HighWater, Mark, ProducerId, Seq};

use super::StoreError;
use super::{StateWrite, Versioned};

/// The entity's newest event sequence number (0: none). `$1` type, `$2` id.
pub(super) const LAST_EVENT: &str = "SELECT COALESCE(MAX(seq), 0) FROM shoal_journal
WHERE entity_type = $1 AND entity_id = $2";

/// The entity's snapshot (or durable state). `$1` type, `$2` id.
pub(super) const SNAPSHOT_OF: &str = "SELECT seq, version, payload FROM shoal_snapshots
WHERE entity_type = $1 AND entity_id = $2";

/// The entity's events after `$3`, in order. `$1` type, `$2` id.
pub(super) const EVENTS_AFTER: &str = "SELECT seq, version, payload FROM shoal_journal
WHERE entity_type = $1 AND entity_id = $2 AND seq > $3 ORDER BY seq";

/// Appends one event: `$1` type, `$2` id, `$3` seq, `$4` version, `$5` payload, `$6` epoch.
pub(super) const APPEND: &str = "INSERT INTO shoal_journal
(entity_type, entity_id, seq, version, payload, epoch) VALUES ($1, $2, $3, $4, $5, $6)";

/// Replaces the entity's snapshot (or durable state): `$1` type, `$2` id, `$3` seq, `$4`
/// version, `$5` payload, `$6` epoch.
pub(super) const SET_SNAPSHOT: &str = "INSERT INTO shoal_snapshots
(entity_type, entity_id, seq, version, payload, epoch) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (entity_type, entity_id) DO UPDATE SET seq = excluded.seq,
version = excluded.version, payload = excluded.payload, epoch = excluded.epoch";

/// Moves a producer's mark for the entity: `$1` type, `$2` id, `$3` producer, `$4` session,
/// `$5` seq. The write it rides in is fenced and in sequence, so the newest mark wins.
pub(super) const SET_DELIVERED: &str = "INSERT INTO shoal_delivered
(entity_type, entity_id, producer, session, seq) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (entity_type, entity_id, producer) DO UPDATE SET session = excluded.session,
seq = excluded.seq";

/// The entity's marks, per producer. `$1` type, `$2` id.
pub(super) const DELIVERED_OF: &str = "SELECT producer, session, seq FROM shoal_delivered
WHERE entity_type = $1 AND entity_id = $2";

/// What deleting a type removes, each with the type as `$1`: its state, then what remembering
/// and fencing kept of it.
pub(super) const DELETE_TYPE: [&str; 6] = [
    "DELETE FROM shoal_journal WHERE entity_type = $1",
    "DELETE FROM shoal_snapshots WHERE entity_type = $1",
    "DELETE FROM shoal_delivered WHERE entity_type = $1",
    "DELETE FROM shoal_remembered_entities WHERE entity_type = $1",
    "DELETE FROM shoal_remembered_shards WHERE entity_type = $1",
    "DELETE FROM shoal_remembered_types WHERE entity_type = $1",
];

/// One row a write adds: `(seq, version, payload)`, and whether it is the snapshot.
pub(super) struct Row<'a> {
    pub(super) seq: i64,
    pub(super) version: i64,
    pub(super) payload: &'a [u8],
    pub(super) snapshot: bool,
}

/// The rows `write` adds once its sequence follows `newest` (the entity's newest event, or its
/// durable state's revision), or the conflict: every write is numbered from the one after.
pub(super) fn rows_of(write: &StateWrite, newest: u64) -> Result<Vec<Row<'_>>, StoreError> {
    let (first, expected) = match write {
        StateWrite::Events { first_seq, .. } => (*first_seq, first_seq.saturating_sub(1)),
        StateWrite::State { revision, .. } => (*revision, revision.saturating_sub(1)),
    };
    if first == 0 || expected != newest {
        return Err(StoreError::Conflict {
            expected,
            found: newest,
        });
    }
    match write {
        StateWrite::Events {
            first_seq,
            events,
            snapshot,
            ..
        } => {
            let mut rows = Vec::with_capacity(events.len() + 1);
            let mut seq = *first_seq;
            for event in events {
                rows.push(row(seq, event, false)?);
                seq += 1;
            }
            if let Some(snapshot) = snapshot {
                rows.push(row(seq - 1, snapshot, true)?);
            }
            Ok(rows)
        }
        StateWrite::State {
            revision, state, ..
        } => Ok(vec![row(*revision, state, true)?]),
    }
}

/// The row of `value` at `seq`.
fn row(seq: u64, value: &Versioned, snapshot: bool) -> Result<Row<'_>, StoreError> {
    Ok(Row {
        seq: value_i64(seq, "seq")?,
        version: i64::from(value.version),
        payload: &value.bytes,
        snapshot,
    })
}

/// A sequence number or epoch as the stores' signed 64-bit integer.
pub(super) fn value_i64(value: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| StoreError::Invalid(format!("{what} {value}")))
}

/// An epoch as the stores' integer.
pub(super) fn epoch_i64(epoch: Epoch) -> Result<i64, StoreError> {
    value_i64(epoch.0, "epoch")
}

/// A stored `(seq, version, payload)` read back.
pub(super) fn stored(
    seq: i64,
    version: i64,
    payload: Vec<u8>,
) -> Result<(u64, Versioned), StoreError> {
    let seq = u64::try_from(seq).map_err(|_| StoreError::Invalid(format!("seq {seq}")))?;
    let version =
        u32::try_from(version).map_err(|_| StoreError::Invalid(format!("version {version}")))?;
    Ok((
        seq,
        Versioned {
            version,
            bytes: payload,
        },
    ))
}

/// The newest sequence number (or revision) of an entity whose newest event is `last_event`
/// and whose snapshot is at `snapshot`.
pub(super) fn newest(last_event: i64, snapshot: Option<i64>) -> Result<u64, StoreError> {
    let newest = last_event.max(snapshot.unwrap_or(0));
    u64::try_from(newest).map_err(|_| StoreError::Invalid(format!("seq {newest}")))
}

/// A write's mark as the stores' values: `(producer, session, seq)`.
pub(super) fn delivered_values(write: &StateWrite) -> Result<Option<(&str, i64, i64)>, StoreError> {
    let Some(delivered) = write.delivered() else {
        return Ok(None);
    };
    Ok(Some((
        &delivered.producer.0,
        value_i64(delivered.mark.session, "session")?,
        value_i64(delivered.mark.seq.0, "seq")?,
    )))
}

/// A stored mark read back into `high_water`.
pub(super) fn record_delivered(
    high_water: &mut HighWater,
    (producer, session, seq): (String, i64, i64),
) -> Result<(), StoreError> {
    let invalid = |what: &str, value: i64| StoreError::Invalid(format!("{what} {value}"));
    let mark = Mark {
        session: u64::try_from(session).map_err(|_| invalid("session", session))?,
        seq: Seq(u64::try_from(seq).map_err(|_| invalid("seq", seq))?),
    };
    high_water.record(&ProducerId::new(producer), mark);
    Ok(())
}
