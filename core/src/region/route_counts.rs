//! How a node's regions routed messages: the counts hosts read with `Node::route_counts`.

/// How the regions of a node routed messages, counted since it started. A buffered message
/// is counted again when it is later delivered or forwarded.
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq)]
#[non_exhaustive]
pub struct RouteCounts {
    /// Handed to a shard hosted on this node.
    pub delivered: u64,
    /// Forwarded to the member hosting the shard.
    pub forwarded: u64,
    /// Held while the shard's home was unknown or the shard was being handed off.
    pub buffered: u64,
}
