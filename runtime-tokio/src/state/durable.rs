//! Durable-state entities: the whole state is saved, with a revision, whenever a command
//! changes it.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::versioned::{decode, encode};
use super::{PersistError, StateWrite, failure, journal_of, key_of};
use crate::{Entity, EntityContext};

/// The state of a durable-state entity, with its command handler.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use shoal::{DurableState, EntityContext};
///
/// #[derive(Default, Deserialize, Serialize)]
/// struct Profile {
///     name: String,
/// }
///
/// impl DurableState for Profile {
///     type Command = Option<String>;
///     type Reply = String;
///
///     fn handle(&mut self, _ctx: &mut EntityContext, rename: Option<String>) -> String {
///         if let Some(name) = rename {
///             self.name = name;
///         }
///         self.name.clone()
///     }
/// }
/// ```
pub trait DurableState: Serialize + DeserializeOwned + Send + 'static {
    /// What it is sent.
    type Command: Serialize + DeserializeOwned + Send + 'static;
    /// What it answers, once the state the command left is durable.
    type Reply: Serialize + DeserializeOwned + Send + 'static;

    /// The version the state is written with: raise it when its encoding changes, and read
    /// the older ones in [`DurableState::upcast`].
    const VERSION: u32 = 1;

    /// Handles one command, changing the state as it needs: the state is saved afterwards if
    /// its encoding changed, and the reply is sent once it is.
    fn handle(&mut self, ctx: &mut EntityContext, command: Self::Command) -> Self::Reply;

    /// Reads a state that an older `version` of the type wrote (the default reads none).
    fn upcast(version: u32, bytes: &[u8]) -> Result<Self, String> {
        let _ = bytes;
        Err(format!("no upcast from state version {version}"))
    }
}

/// A [`DurableState`] run as an entity; address it as `Region<DurableStateEntity<S>>`. Its
/// answers are `Result<S::Reply, PersistError>`.
pub struct DurableStateEntity<S> {
    state: S,
    /// The revision of the state as stored (0: never saved).
    revision: u64,
    /// Its encoding, to tell whether a command changed it.
    saved: Vec<u8>,
}

impl<S: DurableState> DurableStateEntity<S> {
    /// An entity whose state, before its first save, is `initial`.
    pub fn new(initial: S) -> Self {
        Self {
            state: initial,
            revision: 0,
            saved: Vec::new(),
        }
    }

    /// The state as recovered and changed so far.
    pub fn state(&self) -> &S {
        &self.state
    }
}

impl<S: DurableState> Entity for DurableStateEntity<S> {
    type Message = S::Command;
    type Reply = Result<S::Reply, PersistError>;

    async fn on_start(&mut self, ctx: &mut EntityContext) {
        let Ok(journal) = journal_of(ctx) else {
            return;
        };
        let recovered = match journal.recover(&key_of(ctx)).await {
            Ok(recovered) => recovered,
            Err(error) => {
                failure(ctx, error);
                return;
            }
        };
        ctx.inbox().recovered(recovered.delivered);
        if let Some((revision, stored)) = recovered.snapshot {
            match decode(&stored, S::VERSION, S::upcast) {
                Ok(state) => {
                    self.state = state;
                    self.revision = revision;
                }
                Err(error) => {
                    failure(ctx, error);
                    return;
                }
            }
        }
        match encode(&self.state, S::VERSION) {
            Ok(encoded) => self.saved = encoded.bytes,
            Err(error) => {
                failure(ctx, error);
            }
        }
    }

    async fn handle(&mut self, ctx: &mut EntityContext, command: S::Command) -> Self::Reply {
        let reply = self.state.handle(ctx, command);
        let encoded = encode(&self.state, S::VERSION).map_err(|error| failure(ctx, error))?;
        if encoded.bytes == self.saved {
            return Ok(reply);
        }
        let journal = journal_of(ctx)?;
        let bytes = encoded.bytes.clone();
        let write = StateWrite::State {
            revision: self.revision + 1,
            state: encoded,
            delivered: ctx.inbox().current(),
        };
        journal
            .write(key_of(ctx), write)
            .await
            .map_err(|error| failure(ctx, error))?;
        self.revision += 1;
        self.saved = bytes;
        Ok(reply)
    }
}
