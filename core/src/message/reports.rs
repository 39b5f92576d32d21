//! What regions and coordinators report about where shards run and how many entities they
//! hold: shard homes, region statistics, and a coordinator's state for operators.

use serde::{Deserialize, Serialize};

use crate::id::{MemberId, ShardId};

/// Shards one region hosts, as reported in [`super::Body::ShardHomes`].
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct RegionShards {
    /// The region's member.
    pub region: MemberId,
    /// Its shards, in allocation order.
    pub shards: Vec<ShardId>,
}

/// Entity counts of one region, per shard.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct RegionStats {
    /// The region's member.
    pub region: MemberId,
    /// `(shard, number of live entities)` for every shard the region hosts.
    pub shards: Vec<(ShardId, u32)>,
}

/// What a coordinator's allocation gate waits for before it allocates shards nobody has
/// reported (the README's protocol decision 1): every member that hosts the type registered, no member
/// removed so recently that it may still run shards, and enough hosting regions.
#[derive(Clone, Debug, Default, Deserialize, Eq, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct AllocationGate {
    /// Whether shards nobody reported are allocated now.
    pub open: bool,
    /// Members that host the type (or may: their view entry does not say) and have not
    /// registered. A member that should not host it is misconfigured or still starting.
    pub unregistered: Vec<MemberId>,
    /// Members removed less than `down_removal_margin` ago: they may still run shards the
    /// coordinator has not heard of.
    pub recently_removed: Vec<MemberId>,
    /// Hosting regions registered.
    pub registered: u32,
    /// Hosting regions needed before anything is allocated (`min_registered_regions`).
    pub needed: u32,
    /// The type remembers entities and the remember store has not yet listed its shards
    /// (their epochs come first; the read is retried while the store fails).
    pub store_pending: bool,
    /// The type has a coordinator lease and this coordinator does not hold it (it is asked
    /// for, again after a refusal, until granted).
    #[serde(default)]
    pub lease_pending: bool,
}

impl AllocationGate {
    /// What the gate waits for, in words (`"open"` if nothing).
    pub fn describe(&self) -> String {
        let names = |ids: &[MemberId]| {
            ids.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut reasons = Vec::new();
        if !self.unregistered.is_empty() {
            reasons.push(format!("unregistered: {}", names(&self.unregistered)));
        }
        if !self.recently_removed.is_empty() {
            let removed = names(&self.recently_removed);
            reasons.push(format!("removed within the removal margin: {removed}"));
        }
        if self.registered < self.needed {
            reasons.push(format!(
                "{} of {} regions registered",
                self.registered, self.needed
            ));
        }
        if self.store_pending {
            reasons.push("the remember store's list of shards".into());
        }
        if self.lease_pending {
            reasons.push("the coordinator's lease".into());
        }
        if reasons.is_empty() {
            return "open".into();
        }
        reasons.join("; ")
    }
}

/// A coordinator's state, for operators (`Command::GetCoordinatorState`).
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct CoordinatorState {
    /// The member running the coordinator.
    pub coordinator: MemberId,
    /// The allocation gate.
    pub gate: AllocationGate,
    /// Shards allocated to a region (started or being started).
    pub allocated: u32,
    /// Shards being handed off, in order.
    pub handing_off: Vec<ShardId>,
    /// Shards that regions asked for and that wait for a home, in order.
    pub waiting: Vec<ShardId>,
}
