//! The names of the metrics the runtime exports through the `metrics` facade, in one place:
//! a dashboard or an alert can be checked against this list.

/// `shoal_allocation_waiting_total`.
pub(crate) const ALLOCATION_WAITING_TOTAL: &str = "shoal_allocation_waiting_total";
/// `shoal_app_messages_malformed_total`.
pub(crate) const APP_MESSAGES_MALFORMED_TOTAL: &str = "shoal_app_messages_malformed_total";
/// `shoal_asks_pending`.
pub(crate) const ASKS_PENDING: &str = "shoal_asks_pending";
/// `shoal_connections_total`.
pub(crate) const CONNECTIONS_TOTAL: &str = "shoal_connections_total";
/// `shoal_coordinator_unanswered_total`.
pub(crate) const COORDINATOR_UNANSWERED_TOTAL: &str = "shoal_coordinator_unanswered_total";
/// `shoal_coordinators_started_total`.
pub(crate) const COORDINATORS_STARTED_TOTAL: &str = "shoal_coordinators_started_total";
/// `shoal_core_busy_loops_total`.
pub(crate) const CORE_BUSY_LOOPS_TOTAL: &str = "shoal_core_busy_loops_total";
/// `shoal_core_duplicates_total`.
pub(crate) const CORE_DUPLICATES_TOTAL: &str = "shoal_core_duplicates_total";
/// `shoal_core_fenced_total`.
pub(crate) const CORE_FENCED_TOTAL: &str = "shoal_core_fenced_total";
/// `shoal_core_from_older_incarnation_total`.
pub(crate) const CORE_FROM_OLDER_INCARNATION_TOTAL: &str =
    "shoal_core_from_older_incarnation_total";
/// `shoal_core_misaddressed_total`.
pub(crate) const CORE_MISADDRESSED_TOTAL: &str = "shoal_core_misaddressed_total";
/// `shoal_core_rejected_total`.
pub(crate) const CORE_REJECTED_TOTAL: &str = "shoal_core_rejected_total";
/// `shoal_core_unknown_entity_type_total`.
pub(crate) const CORE_UNKNOWN_ENTITY_TYPE_TOTAL: &str = "shoal_core_unknown_entity_type_total";
/// `shoal_dead_letters_total`.
pub(crate) const DEAD_LETTERS_TOTAL: &str = "shoal_dead_letters_total";
/// `shoal_dial_failures_total`.
pub(crate) const DIAL_FAILURES_TOTAL: &str = "shoal_dial_failures_total";
/// `shoal_entities`.
pub(crate) const ENTITIES: &str = "shoal_entities";
/// `shoal_entities_started_total`.
pub(crate) const ENTITIES_STARTED_TOTAL: &str = "shoal_entities_started_total";
/// `shoal_delivery_dropped_total{reason}`: reliably delivered messages an entity dropped
/// (`duplicate`: applied already; `gap`: past a lost one; `stale`: an older producer session).
pub(crate) const DELIVERY_DROPPED_TOTAL: &str = "shoal_delivery_dropped_total";
/// `shoal_delivery_resends_total`: messages reliable producers sent again, unconfirmed.
pub(crate) const DELIVERY_RESENDS_TOTAL: &str = "shoal_delivery_resends_total";
/// `shoal_delivery_unconfirmed{producer}`: messages a reliable producer holds unconfirmed.
pub(crate) const DELIVERY_UNCONFIRMED: &str = "shoal_delivery_unconfirmed";
/// `shoal_entity_letters_malformed_total`.
pub(crate) const ENTITY_LETTERS_MALFORMED_TOTAL: &str = "shoal_entity_letters_malformed_total";
/// `shoal_entity_messages_undecodable_total`.
pub(crate) const ENTITY_MESSAGES_UNDECODABLE_TOTAL: &str =
    "shoal_entity_messages_undecodable_total";
/// `shoal_entity_panics_total`.
pub(crate) const ENTITY_PANICS_TOTAL: &str = "shoal_entity_panics_total";
/// `shoal_envelopes_unaddressed_total`.
pub(crate) const ENVELOPES_UNADDRESSED_TOTAL: &str = "shoal_envelopes_unaddressed_total";
/// `shoal_events_total`: the core's events, by `kind` label (`Event::kind`).
pub(crate) const EVENTS_TOTAL: &str = "shoal_events_total";
/// `shoal_frames_rejected_total`.
pub(crate) const FRAMES_REJECTED_TOTAL: &str = "shoal_frames_rejected_total";
/// `shoal_handoffs_abandoned_total`.
pub(crate) const HANDOFFS_ABANDONED_TOTAL: &str = "shoal_handoffs_abandoned_total";
/// `shoal_handoffs_total`.
pub(crate) const HANDOFFS_TOTAL: &str = "shoal_handoffs_total";
/// `shoal_handshakes_failed_total`.
pub(crate) const HANDSHAKES_FAILED_TOTAL: &str = "shoal_handshakes_failed_total";
/// `shoal_mailbox_full_total`.
pub(crate) const MAILBOX_FULL_TOTAL: &str = "shoal_mailbox_full_total";
/// `shoal_messages_buffered_total`.
pub(crate) const MESSAGES_BUFFERED_TOTAL: &str = "shoal_messages_buffered_total";
/// `shoal_messages_delivered_total`.
pub(crate) const MESSAGES_DELIVERED_TOTAL: &str = "shoal_messages_delivered_total";
/// `shoal_messages_forwarded_total`.
pub(crate) const MESSAGES_FORWARDED_TOTAL: &str = "shoal_messages_forwarded_total";
/// `shoal_outbound_queue_full_total`.
pub(crate) const OUTBOUND_QUEUE_FULL_TOTAL: &str = "shoal_outbound_queue_full_total";
/// `shoal_passivations_total{reason}`: entities asked to passivate, by cause (`requested`,
/// `idle`, `limit`).
pub(crate) const PASSIVATIONS_TOTAL: &str = "shoal_passivations_total";
/// `shoal_rebalance_rounds_total`.
pub(crate) const REBALANCE_ROUNDS_TOTAL: &str = "shoal_rebalance_rounds_total";
/// `shoal_lease_calls_failed_total`.
pub(crate) const LEASE_CALLS_FAILED_TOTAL: &str = "shoal_lease_calls_failed_total";
/// `shoal_shard_leases_acquired_total`.
pub(crate) const SHARD_LEASES_ACQUIRED_TOTAL: &str = "shoal_shard_leases_acquired_total";
/// `shoal_shard_leases_lost_total`.
pub(crate) const SHARD_LEASES_LOST_TOTAL: &str = "shoal_shard_leases_lost_total";
/// `shoal_remember_store_failures_total`.
pub(crate) const REMEMBER_STORE_FAILURES_TOTAL: &str = "shoal_remember_store_failures_total";
/// `shoal_remember_store_requests_total`.
pub(crate) const REMEMBER_STORE_REQUESTS_TOTAL: &str = "shoal_remember_store_requests_total";
/// `shoal_remembered_ids_misfiled_total`.
pub(crate) const REMEMBERED_IDS_MISFILED_TOTAL: &str = "shoal_remembered_ids_misfiled_total";
/// `shoal_shards_fenced_total`.
pub(crate) const SHARDS_FENCED_TOTAL: &str = "shoal_shards_fenced_total";
/// `shoal_state_write_group_size`: writes per state-store transaction (group commit).
pub(crate) const STATE_WRITE_GROUP_SIZE: &str = "shoal_state_write_group_size";
/// `shoal_state_writes_failed_total`: state writes refused or failed (the entity restarts).
pub(crate) const STATE_WRITES_FAILED_TOTAL: &str = "shoal_state_writes_failed_total";
/// `shoal_writes_fenced_total`.
pub(crate) const WRITES_FENCED_TOTAL: &str = "shoal_writes_fenced_total";
/// `shoal_shards_started_total`.
pub(crate) const SHARDS_STARTED_TOTAL: &str = "shoal_shards_started_total";
