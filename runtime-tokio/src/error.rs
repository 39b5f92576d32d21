//! The runtime's errors, one enum per API family.

use shoal_core::{CommandError, ConfigError, DeadLetterReason};

/// Why a node did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The configuration is invalid (the core's check, or the builder's own).
    #[error("invalid configuration: {0}")]
    Config(#[from] ConfigError),
    /// A builder setting is missing or wrong.
    #[error("invalid builder setting: {0}")]
    Builder(String),
    /// The listening socket could not be bound.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The bind address.
        address: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The OS random source failed (the node's seed and nonces come from it).
    #[error("OS randomness unavailable: {0}")]
    Random(String),
}

/// Why an `ask` got no reply.
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AskError {
    /// No reply within the timeout.
    #[error("no reply within the timeout")]
    Timeout,
    /// No region of that entity type runs on this node.
    #[error("unknown entity type")]
    UnknownEntityType,
    /// The node is shutting down (or has stopped).
    #[error("the node is shutting down")]
    ShuttingDown,
    /// The message was dropped on its way, for this reason.
    #[error("dead letter: {0:?}")]
    DeadLetter(DeadLetterReason),
    /// The message or the reply could not be encoded or decoded (mismatched types between
    /// nodes, or a serializer error).
    #[error("codec: {0}")]
    Codec(String),
    /// The entity panicked while handling the message (it is restarted with backoff).
    #[error("the entity panicked handling the message")]
    EntityPanicked,
}

/// Why a `tell` was not accepted.
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TellError {
    /// The node is shutting down (or has stopped).
    #[error("the node is shutting down")]
    ShuttingDown,
    /// The message could not be encoded.
    #[error("codec: {0}")]
    Codec(String),
}

/// Why a query or command failed.
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// The core refused or could not answer it.
    #[error(transparent)]
    Command(#[from] CommandError),
    /// The node is shutting down (or has stopped).
    #[error("the node is shutting down")]
    ShuttingDown,
    /// No answer came in time.
    #[error("no answer in time")]
    Timeout,
    /// The answer was not of the expected kind (a bug; logged).
    #[error("unexpected answer")]
    Unexpected,
}

/// Why [`crate::Node::region`] found no region.
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RegionError {
    /// No entity type of that name was registered with the builder.
    #[error("entity type {0:?} was not registered")]
    NotRegistered(String),
    /// It was registered with another Rust entity type.
    #[error("entity type {0:?} was registered with another Rust type")]
    WrongType(String),
}
