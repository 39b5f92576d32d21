//! Leases kept in a store, for `shoal_core::lease::LeaseHolder`: a row per lease with its
//! holder, its revision (the fencing token: larger for every new holder) and its expiry,
//! computed by the database's clock, so that the holders' clocks never decide who holds it.

use std::time::Duration;

use futures_util::future::BoxFuture;
use shoal_core::lease::FencingToken;

use super::StoreError;

/// A store of leases (object-safe: a node holds an `Arc<dyn LeaseStore>`).
pub trait LeaseStore: Send + Sync + 'static {
    /// Grants `name` to `owner` for `ttl` from now on the store's clock if nobody holds it,
    /// its grant expired, or `owner` holds it (then extended): the grant's fencing token, the
    /// same for an extension and larger than every earlier one for a new holder. `None`:
    /// someone else holds it.
    fn acquire<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Option<FencingToken>, StoreError>>;

    /// Gives `name` up if `owner` holds it under `token` (otherwise changes nothing).
    fn release<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        token: FencingToken,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
}

/// The leases' table (portable SQL; the expiry in milliseconds of the database's clock).
pub const LEASE_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS shoal_leases (
    name TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    revision BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
";

/// Both stores' statements, around the database's clock in milliseconds (`NOW_MS`).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(super) mod statements {
    /// Grants or extends: `$1` name, `$2` owner, `$3` ttl in milliseconds; returns the
    /// revision, or no row when someone else holds an unexpired grant. A holder whose grant
    /// expired gets a new revision even if nobody took it meanwhile: it may have stopped acting
    /// on it, and whatever it guards starts over under the new token.
    pub(crate) fn acquire(now_ms: &str) -> String {
        format!(
            "INSERT INTO shoal_leases (name, owner, revision, expires_at)
VALUES ($1, $2, 1, {now_ms} + $3)
ON CONFLICT (name) DO UPDATE SET
    revision = CASE WHEN shoal_leases.owner = excluded.owner
        AND shoal_leases.expires_at > {now_ms}
        THEN shoal_leases.revision ELSE shoal_leases.revision + 1 END,
    owner = excluded.owner,
    expires_at = excluded.expires_at
WHERE shoal_leases.owner = excluded.owner OR shoal_leases.expires_at <= {now_ms}
RETURNING revision"
        )
    }

    /// Gives up: `$1` name, `$2` owner, `$3` revision (the row stays, expired, so that the
    /// next holder's revision is larger).
    pub(crate) fn release(now_ms: &str) -> String {
        format!(
            "UPDATE shoal_leases SET expires_at = {now_ms}
WHERE name = $1 AND owner = $2 AND revision = $3"
        )
    }

    /// PostgreSQL's clock in milliseconds.
    #[cfg(feature = "postgres")]
    pub(crate) const POSTGRES_NOW_MS: &str =
        "(extract(epoch from clock_timestamp()) * 1000)::bigint";

    /// SQLite's clock in milliseconds.
    #[cfg(feature = "sqlite")]
    pub(crate) const SQLITE_NOW_MS: &str =
        "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)";
}
