//! The names of the metrics the runtime exports through the `metrics` facade, in one place:
//! a dashboard or an alert can be checked against this list.

/// `shoal_allocation_waiting_total`: times a coordinator reported that allocation waits
/// (`Event::AllocationWaiting`: its gate is closed while shards are asked for).
pub(crate) const ALLOCATION_WAITING_TOTAL: &str = "shoal_allocation_waiting_total";
/// `shoal_app_messages_malformed_total`: application messages between members (ask replies) that
/// did not decode.
pub(crate) const APP_MESSAGES_MALFORMED_TOTAL: &str = "shoal_app_messages_malformed_total";
/// `shoal_ask_seconds{path}`: histogram of asks' latency, from the ask to its answer or
/// failure, by `path`: `direct` (straight into a running entity's mailbox) or `node`.
pub(crate) const ASK_SECONDS: &str = "shoal_ask_seconds";
/// `shoal_asks_pending`: asks sent through the node and waiting for their reply.
pub(crate) const ASKS_PENDING: &str = "shoal_asks_pending";
/// `shoal_connections_total{direction}`: transport connections established, by `direction`
/// (`inbound`, `outbound`).
pub(crate) const CONNECTIONS_TOTAL: &str = "shoal_connections_total";
/// `shoal_coordinator_unanswered_total`: times a region reported its coordinator unanswered
/// (`Event::CoordinatorUnanswered`).
pub(crate) const COORDINATOR_UNANSWERED_TOTAL: &str = "shoal_coordinator_unanswered_total";
/// `shoal_coordinator_round_trip_seconds`: histogram of how long a region waited for its
/// coordinator to say where a shard lives, from its first request to the answer (allocation
/// included when the shard had no home yet).
pub(crate) const COORDINATOR_ROUND_TRIP_SECONDS: &str = "shoal_coordinator_round_trip_seconds";
/// `shoal_coordinators_started_total`: coordinators started on this node (the oldest member runs
/// them).
pub(crate) const COORDINATORS_STARTED_TOTAL: &str = "shoal_coordinators_started_total";
/// `shoal_core_busy_loops_total`: wakeups that ran 64 timer rounds in a row (a timer that stays
/// due after firing: a bug in the core, logged with the timer).
pub(crate) const CORE_BUSY_LOOPS_TOTAL: &str = "shoal_core_busy_loops_total";
/// `shoal_core_duplicates_total`: envelopes the core dropped as copies (link sequence numbers).
pub(crate) const CORE_DUPLICATES_TOTAL: &str = "shoal_core_duplicates_total";
/// `shoal_core_fenced_total`: coordinator messages from a coordinator the membership view does not
/// name.
pub(crate) const CORE_FENCED_TOTAL: &str = "shoal_core_fenced_total";
/// `shoal_core_from_older_incarnation_total`: envelopes dropped because a newer incarnation was
/// heard at the sender's address.
pub(crate) const CORE_FROM_OLDER_INCARNATION_TOTAL: &str =
    "shoal_core_from_older_incarnation_total";
/// `shoal_core_misaddressed_total`: envelopes addressed to another incarnation of this node.
pub(crate) const CORE_MISADDRESSED_TOTAL: &str = "shoal_core_misaddressed_total";
/// `shoal_core_rejected_total`: messages and inputs ignored because they did not fit the receiver's
/// state or role.
pub(crate) const CORE_REJECTED_TOTAL: &str = "shoal_core_rejected_total";
/// `shoal_core_unknown_entity_type_total`: envelopes for an entity type this node does not know.
pub(crate) const CORE_UNKNOWN_ENTITY_TYPE_TOTAL: &str = "shoal_core_unknown_entity_type_total";
/// `shoal_dead_letters_total{reason}`: messages that could not be delivered, by `reason`
/// (`DeadLetterReason::label`).
pub(crate) const DEAD_LETTERS_TOTAL: &str = "shoal_dead_letters_total";
/// `shoal_dial_failures_total`: outbound connection attempts that failed (connect, handshake).
pub(crate) const DIAL_FAILURES_TOTAL: &str = "shoal_dial_failures_total";
/// `shoal_entities`: entities running on this node.
pub(crate) const ENTITIES: &str = "shoal_entities";
/// `shoal_entities_started_total`: entity incarnations started on this node.
pub(crate) const ENTITIES_STARTED_TOTAL: &str = "shoal_entities_started_total";
/// `shoal_delivery_dropped_total{reason}`: reliably delivered messages an entity dropped
/// (`duplicate`: applied already; `gap`: past a lost one; `stale`: an older producer session).
pub(crate) const DELIVERY_DROPPED_TOTAL: &str = "shoal_delivery_dropped_total";
/// `shoal_delivery_resends_total`: messages reliable producers sent again, unconfirmed.
pub(crate) const DELIVERY_RESENDS_TOTAL: &str = "shoal_delivery_resends_total";
/// `shoal_delivery_unconfirmed{producer}`: messages a reliable producer holds unconfirmed.
pub(crate) const DELIVERY_UNCONFIRMED: &str = "shoal_delivery_unconfirmed";
/// `shoal_entity_letters_malformed_total`: letters for an entity whose envelope (ask and delivery
/// headers) did not decode.
pub(crate) const ENTITY_LETTERS_MALFORMED_TOTAL: &str = "shoal_entity_letters_malformed_total";
/// `shoal_entity_messages_undecodable_total`: messages an entity could not decode into its message
/// type.
pub(crate) const ENTITY_MESSAGES_UNDECODABLE_TOTAL: &str =
    "shoal_entity_messages_undecodable_total";
/// `shoal_entity_panics_total`: entity handlers that panicked (the entity is recreated after a
/// backoff).
pub(crate) const ENTITY_PANICS_TOTAL: &str = "shoal_entity_panics_total";
/// `shoal_envelopes_unaddressed_total`: envelopes the host could not send for want of the
/// receiver's address.
pub(crate) const ENVELOPES_UNADDRESSED_TOTAL: &str = "shoal_envelopes_unaddressed_total";
/// `shoal_events_total{kind}`: the core's events, by `kind` (`Event::kind`).
pub(crate) const EVENTS_TOTAL: &str = "shoal_events_total";
/// `shoal_frames_rejected_total{reason}`: frames refused by a connection's reader, by `reason`
/// (`oversized`, `malformed`, `forged_sender`).
pub(crate) const FRAMES_REJECTED_TOTAL: &str = "shoal_frames_rejected_total";
/// `shoal_handoffs_abandoned_total`: handoffs a coordinator gave up on after its handoff timeout.
pub(crate) const HANDOFFS_ABANDONED_TOTAL: &str = "shoal_handoffs_abandoned_total";
/// `shoal_handoff_seconds`: histogram of handoffs' duration, from the coordinator's start of a
/// handoff to the shard stopped at its owner (recorded where the coordinator runs).
pub(crate) const HANDOFF_SECONDS: &str = "shoal_handoff_seconds";
/// `shoal_handoffs_total`: shards this node stopped (handed off, or stopped with its region).
pub(crate) const HANDOFFS_TOTAL: &str = "shoal_handoffs_total";
/// `shoal_handshakes_failed_total{reason}`: inbound handshakes that failed, by `reason`.
pub(crate) const HANDSHAKES_FAILED_TOTAL: &str = "shoal_handshakes_failed_total";
/// `shoal_mailbox_full_total`: letters refused by a full entity mailbox (each is a `MailboxFull`
/// dead letter).
pub(crate) const MAILBOX_FULL_TOTAL: &str = "shoal_mailbox_full_total";
/// `shoal_messages_buffered_total`: messages regions buffered while a shard's home was unknown or
/// moving.
pub(crate) const MESSAGES_BUFFERED_TOTAL: &str = "shoal_messages_buffered_total";
/// `shoal_messages_delivered_total`: messages regions delivered to entities on this node (direct
/// routes not included).
pub(crate) const MESSAGES_DELIVERED_TOTAL: &str = "shoal_messages_delivered_total";
/// `shoal_messages_forwarded_total`: messages regions forwarded to another member.
pub(crate) const MESSAGES_FORWARDED_TOTAL: &str = "shoal_messages_forwarded_total";
/// `shoal_outbound_queue_full_total`: envelopes refused by a full outbound queue (letters become
/// `OutboundQueueFull` dead letters).
pub(crate) const OUTBOUND_QUEUE_FULL_TOTAL: &str = "shoal_outbound_queue_full_total";
/// `shoal_passivations_total{reason}`: entities asked to passivate, by cause (`requested`,
/// `idle`, `limit`).
pub(crate) const PASSIVATIONS_TOTAL: &str = "shoal_passivations_total";
/// `shoal_rebalance_round_seconds`: histogram of rebalance rounds' duration, from the round to
/// the end of the last handoff it started (recorded where the coordinator runs).
pub(crate) const REBALANCE_ROUND_SECONDS: &str = "shoal_rebalance_round_seconds";
/// `shoal_rebalance_rounds_total`: rebalance rounds this node's coordinators ran.
pub(crate) const REBALANCE_ROUNDS_TOTAL: &str = "shoal_rebalance_rounds_total";
/// `shoal_lease_calls_failed_total`: lease store calls that failed.
pub(crate) const LEASE_CALLS_FAILED_TOTAL: &str = "shoal_lease_calls_failed_total";
/// `shoal_shard_leases_acquired_total`: shard leases acquired.
pub(crate) const SHARD_LEASES_ACQUIRED_TOTAL: &str = "shoal_shard_leases_acquired_total";
/// `shoal_shard_leases_lost_total`: shard leases lost (the shard stops).
pub(crate) const SHARD_LEASES_LOST_TOTAL: &str = "shoal_shard_leases_lost_total";
/// `shoal_remember_store_failures_total`: remember-store requests that failed (the core retries
/// them).
pub(crate) const REMEMBER_STORE_FAILURES_TOTAL: &str = "shoal_remember_store_failures_total";
/// `shoal_remember_store_requests_total`: remember-store requests made.
pub(crate) const REMEMBER_STORE_REQUESTS_TOTAL: &str = "shoal_remember_store_requests_total";
/// `shoal_remembered_ids_misfiled_total`: remembered entity ids found under a shard they do not
/// hash to (skipped).
pub(crate) const REMEMBERED_IDS_MISFILED_TOTAL: &str = "shoal_remembered_ids_misfiled_total";
/// `shoal_shards_fenced_total`: shard instances fenced by a newer epoch.
pub(crate) const SHARDS_FENCED_TOTAL: &str = "shoal_shards_fenced_total";
/// `shoal_state_write_group_size`: writes per state-store transaction (group commit).
pub(crate) const STATE_WRITE_GROUP_SIZE: &str = "shoal_state_write_group_size";
/// `shoal_store_write_seconds{store}`: histogram of store writes' latency, by `store`:
/// `remember` (one remember-store request) or `state` (one group commit of entity state).
pub(crate) const STORE_WRITE_SECONDS: &str = "shoal_store_write_seconds";
/// `shoal_state_writes_failed_total`: state writes refused or failed (the entity restarts).
pub(crate) const STATE_WRITES_FAILED_TOTAL: &str = "shoal_state_writes_failed_total";
/// `shoal_writes_fenced_total`: entity state writes a store refused because a newer incarnation of
/// the entity wrote (`Event::WriteFenced`).
pub(crate) const WRITES_FENCED_TOTAL: &str = "shoal_writes_fenced_total";
/// `shoal_shards_started_total`: shards started on this node.
pub(crate) const SHARDS_STARTED_TOTAL: &str = "shoal_shards_started_total";
