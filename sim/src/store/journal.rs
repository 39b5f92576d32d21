//! The simulated state store: persistent entities' journals, kept by the same store as the
//! remembered entities and fenced by the same per-shard epochs (as the runtime's SQL stores
//! share one table), with the same faults.
//!
//! Its rules are the runtime's: a recovery claims its epoch for the entity's shard and reads
//! the journal; an append must carry an epoch at least the shard's newest (it then becomes the
//! newest) and must follow the entity's newest event (no gap, no duplicate). With
//! `unfenced` (a negative control) appends skip the epoch condition.
//!
//! Its checks do not trust those rules: they keep their own record of the newest epoch any
//! accepted call claimed for each shard, and fail a write accepted from an older one (a stale
//! incarnation writing after a newer one recovered or wrote); no message's event may be in a
//! journal twice (a write made again); and every write an entity was told is durable must be in
//! its journal whenever anyone recovers it.

use std::collections::{BTreeMap, BTreeSet};

use shoal_core::delivery::{HighWater, Mark, ProducerId};
use shoal_core::lease::FencingToken;
use shoal_core::{EntityId, EntityType, Epoch, FencingClaim, FencingVerdict, Instant, ShardId};

use super::SimStore;

/// A persistent entity's call to the store.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum StateCall {
    /// Claim `epoch` (and the shard-lease token, if leased) for the entity's shard and read
    /// its journal.
    Recover {
        entity_type: EntityType,
        entity: EntityId,
        shard: ShardId,
        epoch: Epoch,
        lease_token: Option<FencingToken>,
    },
    /// Append one event per id, numbered from `first_seq`, with a snapshot of the state after
    /// them when `snapshot`, and the delivery mark of the reliably delivered message they are
    /// the effect of (moved in the same write, as the runtime's stores move it).
    Append {
        entity_type: EntityType,
        entity: EntityId,
        shard: ShardId,
        epoch: Epoch,
        lease_token: Option<FencingToken>,
        first_seq: u64,
        ids: Vec<u64>,
        snapshot: bool,
        mark: Option<(ProducerId, Mark)>,
    },
}

/// The store's answer to a [`StateCall`].
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum StateAnswer {
    /// The journal's events (their ids, in order), whether a snapshot stood for the first of
    /// them, and the entity's delivery marks.
    Recovered {
        ids: Vec<u64>,
        from_snapshot: bool,
        marks: HighWater,
    },
    /// The append was made.
    Written,
    /// A newer epoch holds the shard.
    Fenced(Epoch),
    /// The append did not follow the entity's newest event (this many).
    Conflict(u64),
    /// The call failed (or timed out) and changed nothing known.
    Failed(String),
}

/// One entity's journal.
#[derive(Debug, Default)]
struct Journal {
    /// Event `seq` is at `seq - 1`: its id, and the epoch that wrote it.
    events: Vec<(u64, u64)>,
    /// The ids it holds: a message's event appended twice is a duplicate write.
    ids: BTreeSet<u64>,
    /// The newest snapshot's sequence number (0: none).
    snapshot_at: u64,
    /// The newest reliably delivered message applied, per producer.
    marks: HighWater,
}

/// Every journal, and the checks' own records.
#[derive(Debug, Default)]
pub(super) struct Journals {
    journals: BTreeMap<(EntityType, EntityId), Journal>,
    /// The newest epoch an accepted call claimed for each shard.
    claimed: BTreeMap<(EntityType, ShardId), u64>,
    /// Writes each entity was told are durable.
    acknowledged: BTreeMap<EntityId, BTreeSet<u64>>,
    /// Appends skip the epoch condition (the negative control).
    pub(super) unfenced: bool,
    /// What the checks found since the last call.
    violations: Vec<String>,
    /// Appends that landed after their caller heard a timeout (a marker's count).
    landed_late: u64,
}

impl SimStore {
    /// Appends skip the epoch condition: a negative control the checks must catch.
    pub(crate) fn skip_write_fencing(&mut self) {
        self.journals.unfenced = true;
    }

    /// `entity` was told its events `ids` are durable.
    pub(crate) fn acknowledged(&mut self, entity: &EntityId, ids: &[u64]) {
        let acknowledged = self
            .journals
            .acknowledged
            .entry(entity.clone())
            .or_default();
        acknowledged.extend(ids.iter().copied());
    }

    /// What the journal's checks found since the last call.
    pub(crate) fn take_journal_violations(&mut self) -> Vec<String> {
        std::mem::take(&mut self.journals.violations)
    }

    /// The ids of `entity`'s events in its journal, in order.
    pub(crate) fn journal_ids(&self, entity_type: &EntityType, entity: &EntityId) -> Vec<u64> {
        let key = (entity_type.clone(), entity.clone());
        (self.journals.journals.get(&key))
            .map(|j| j.events.iter().map(|(id, _)| *id).collect())
            .unwrap_or_default()
    }

    /// How many appends landed after their caller heard a timeout.
    pub(crate) fn landed_late(&self) -> u64 {
        self.journals.landed_late
    }

    /// Applies `call` arriving at `now` (`late`: its caller already heard a timeout).
    pub(super) fn apply_state(
        &mut self,
        now: Instant,
        call: &StateCall,
        late: bool,
    ) -> StateAnswer {
        let (entity_type, entity, shard, epoch, token) = match call {
            StateCall::Recover {
                entity_type,
                entity,
                shard,
                epoch,
                lease_token,
            }
            | StateCall::Append {
                entity_type,
                entity,
                shard,
                epoch,
                lease_token,
                ..
            } => (entity_type, entity, *shard, *epoch, *lease_token),
        };
        let record = self
            .records
            .entry((entity_type.clone(), shard))
            .or_default();
        let appending = matches!(call, StateCall::Append { .. });
        let claim = FencingClaim {
            token,
            ..FencingClaim::unleased(epoch, 0)
        };
        match FencingVerdict::of(Some(record.claim()), claim) {
            FencingVerdict::Accept(claim) => {
                record.keep(claim);
                // Listed, so that a new coordinator allocates above it.
                record.listed = true;
            }
            _ if appending && self.journals.unfenced => {}
            FencingVerdict::Fenced(current)
            | FencingVerdict::Stale(current)
            | FencingVerdict::Superseded(current) => return StateAnswer::Fenced(current),
        }
        let journal = (self.journals.journals)
            .entry((entity_type.clone(), entity.clone()))
            .or_default();
        let answer = match call {
            StateCall::Recover { .. } => {
                if let Some(acknowledged) = self.journals.acknowledged.get(entity) {
                    let held: BTreeSet<u64> = journal.events.iter().map(|(id, _)| *id).collect();
                    let missing: Vec<&u64> = acknowledged.difference(&held).take(5).collect();
                    if !missing.is_empty() {
                        self.journals.violations.push(format!(
                            "{entity}: acknowledged writes {missing:?} are not in the journal \
                             a recovery at epoch {} read at {now:?}",
                            epoch.0
                        ));
                    }
                }
                StateAnswer::Recovered {
                    ids: journal.events.iter().map(|(id, _)| *id).collect(),
                    from_snapshot: journal.snapshot_at > 0,
                    marks: journal.marks.clone(),
                }
            }
            StateCall::Append {
                first_seq,
                ids,
                snapshot,
                mark,
                ..
            } => {
                let newest = journal.events.len() as u64;
                if *first_seq != newest + 1 {
                    return StateAnswer::Conflict(newest);
                }
                for id in ids {
                    if !journal.ids.insert(*id) {
                        self.journals.violations.push(format!(
                            "{entity}: event {id} appended twice (at epoch {}): a write made \
                             again after it was made",
                            epoch.0
                        ));
                    }
                }
                journal.events.extend(ids.iter().map(|id| (*id, epoch.0)));
                if let Some((producer, mark)) = mark {
                    journal.marks.record(producer, *mark);
                }
                if *snapshot {
                    journal.snapshot_at = journal.events.len() as u64;
                }
                if late {
                    self.journals.landed_late += 1;
                }
                StateAnswer::Written
            }
        };
        // The checks' own record: no call of an older epoch is accepted once a newer one was.
        let claimed = self
            .journals
            .claimed
            .entry((entity_type.clone(), shard))
            .or_insert(0);
        if epoch.0 < *claimed && appending {
            self.journals.violations.push(format!(
                "{entity} ({shard}): a write of epoch {} was accepted after epoch {} had \
                 claimed the shard: a stale incarnation wrote after a newer one",
                epoch.0, *claimed
            ));
        }
        *claimed = (*claimed).max(epoch.0);
        answer
    }
}
