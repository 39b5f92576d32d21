//! Where a sharding message goes on the node that receives it, and what became of it: one
//! exhaustive table, so a new message cannot reach a role by default.

use super::Body;

/// The role a sharding message is for.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub(crate) enum Route {
    /// The type's coordinator (from regions, proxies, and queries).
    Coordinator,
    /// The type's region, sent only by a coordinator: a region obeys it only from the
    /// coordinator its membership view names (fencing).
    RegionFromCoordinator,
    /// The type's region, from anyone: other regions, or answers to the region's queries.
    Region,
    /// The node itself: where the application wants the type's shards.
    Node,
}

/// Whether a role acted on a message; what it did not act on is counted by the node.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub(crate) enum Handled {
    /// Acted on.
    Accepted,
    /// Ignored: sent by a coordinator this region's view does not name.
    Fenced,
    /// Ignored: not a message for this role, or contradicting its state.
    Rejected,
}

impl Body {
    /// The role this message is for.
    pub(crate) fn route(&self) -> Route {
        match self {
            Self::Register { .. }
            | Self::RegisterProxy
            | Self::GetShardHome { .. }
            | Self::ShardStarted { .. }
            | Self::BeginHandOffAck { .. }
            | Self::ShardStopped { .. }
            | Self::ShardFenced { .. }
            | Self::GracefulShutdownReq
            | Self::RegionStopped
            | Self::GetCurrentRegions { .. }
            | Self::GetClusterShardingStats { .. }
            | Self::RegionStatsReply { .. }
            | Self::GetCoordinatorState { .. }
            | Self::Explain { .. }
            | Self::RegionExited { .. } => Route::Coordinator,
            Self::RegisterAck
            | Self::RegisterRequest
            | Self::ShardHome { .. }
            | Self::ShardHomes { .. }
            | Self::HostShard { .. }
            | Self::BeginHandOff { .. }
            | Self::HandOff { .. }
            | Self::GetRegionStats { .. } => Route::RegionFromCoordinator,
            Self::Forward { .. }
            | Self::StartEntity { .. }
            | Self::StartEntityAck { .. }
            | Self::RelayHandOffAck { .. }
            | Self::RelayExit { .. }
            | Self::LocateEntity { .. }
            | Self::EntityLocated { .. }
            | Self::CurrentRegions { .. }
            | Self::ClusterShardingStats { .. }
            | Self::CoordinatorState { .. }
            | Self::Explanation { .. } => Route::Region,
            Self::SetShardLocations { .. } => Route::Node,
        }
    }
}
