//! The SQLite store as a [`LeaseStore`]: one statement per call, on the database's clock.

use std::time::Duration;

use futures_util::future::BoxFuture;
use rusqlite::{OptionalExtension, params};
use shoal_core::lease::FencingToken;

use super::StoreError;
use super::lease::{LeaseStore, statements};
use super::sql::unavailable;
use super::sqlite::{SqliteStore, sql};
use super::state_sql::value_i64;

impl LeaseStore for SqliteStore {
    fn acquire<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Option<FencingToken>, StoreError>> {
        let (name, owner) = (name.to_owned(), owner.to_owned());
        self.with(move |connection| {
            let ttl = value_i64(ttl.as_millis().try_into().unwrap_or(u64::MAX), "ttl")?;
            let statement = sql(&statements::acquire(statements::SQLITE_NOW_MS));
            let revision: Option<i64> = connection
                .prepare_cached(&statement)
                .map_err(unavailable)?
                .query_row(params![name, owner, ttl], |row| row.get(0))
                .optional()
                .map_err(unavailable)?;
            Ok(revision.map(|r| FencingToken(r as u64)))
        })
    }

    fn release<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        token: FencingToken,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let (name, owner) = (name.to_owned(), owner.to_owned());
        self.with(move |connection| {
            let revision = value_i64(token.0, "revision")?;
            let statement = sql(&statements::release(statements::SQLITE_NOW_MS));
            connection
                .execute(&statement, params![name, owner, revision])
                .map_err(unavailable)?;
            Ok(())
        })
    }
}
