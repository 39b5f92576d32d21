//! What the checker reports: a broken guarantee ([`Violation`]) and the property it breaks.

use std::fmt;

use shoal_core::Instant;

/// A broken guarantee.
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct Violation {
    /// When it happened (true time).
    pub at: Instant,
    /// Which property.
    pub property: Property,
    /// What it is about (an entity, a member or a shard, as the trace names it).
    pub subject: String,
    /// What exactly.
    pub detail: String,
}

/// The properties the checker enforces.
#[derive(Clone, Copy, Debug, Eq, Ord, PartialEq, PartialOrd)]
pub enum Property {
    /// Two live incarnations of one entity at the same instant.
    SingleActivation,
    /// A message delivered to an entity that is not running there.
    DeadIncarnation,
    /// A sender's messages delivered out of order or twice.
    Order,
    /// A message lost in a run without loss, crashes or partitions.
    ExactlyOnce,
    /// A buffer beyond its cap, or letters still held by a region that stopped for good
    /// (downed or removed: they must come out as dead letters).
    BufferCap,
    /// New messages not delivered after healing.
    Liveness,
    /// At quiescence the coordinator's table differs from what regions host.
    CoordinatorConsistency,
    /// After healing, rebalancing did not converge (least-shard: shards per region differ by
    /// more than one; external: shards off the node the application chose).
    Rebalance,
    /// The core's driver detected a busy loop (a timer that stays due).
    BusyLoop,
    /// A graceful operation (a handoff for a rebalance, a shutdown or a leave) overran its
    /// bound with no fault active, or a handoff was abandoned waiting for a region its
    /// coordinator knew had crashed or been downed.
    GracefulStall,
    /// A command answered twice, wrongly, or never (a `StartEntity` said started by a member
    /// where the entity does not run, a location answer that is not what runs there).
    CommandReply,
    /// An event that misreports the state it describes (allocation said to wait with the gate
    /// open, for no shard, or for nothing).
    EventReport,
    /// The node asked its host for something the drive contract forbids: a delivery to an
    /// entity it told to stop, or a stop of an entity that is not running.
    HostContract,
    /// An ask's reply that reached another member or incarnation, arrived twice, or never
    /// arrived in a run where nothing was lost.
    AskReply,
    /// Remembering broken: an entity started and never passivated not running (or running
    /// twice) after healing, a write of an old epoch accepted by the store, or two allocations
    /// of a shard at one epoch.
    Remembering,
    /// Persistent state broken: a write of a stale incarnation accepted after a newer one had
    /// recovered or written (its shard's epoch), or a write the entity was told is durable
    /// missing from its journal when it is recovered.
    Persistence,
    /// Reliable delivery broken: after healing, a producer's message never confirmed; a
    /// persistent entity's journal holding one twice, out of order, or not at all once
    /// confirmed; a plain entity never applying one, or applying one before those sent ahead.
    Delivery,
    /// A shard lease broken: a member started or delivered to an entity of a shard while the
    /// lease store's grant of the shard's lease to it did not run (in true time): another
    /// member held it, or its own had expired.
    Lease,
    /// An entity that asked to be passivated still running, its node never having asked it to
    /// stop.
    Passivation,
    /// A node's internal invariants broken after a driver call (`Node::check_invariants`:
    /// a coordinator's table against its region lists, a region's buffer budget and timers),
    /// its route counts misreporting the letters it forwarded, or a region asking for a
    /// shard's home while hosting it or more often than its retry interval allows.
    CoreInvariant,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}] {:?} ({}): {}",
            self.at, self.property, self.subject, self.detail
        )
    }
}
