//! The PostgreSQL store as a [`LeaseStore`]: one statement per call, on the server's clock.

use std::time::Duration;

use futures_util::future::BoxFuture;
use shoal_core::lease::FencingToken;

use super::StoreError;
use super::lease::{LeaseStore, statements};
use super::postgres::PostgresStore;
use super::sql::unavailable;
use super::state_sql::value_i64;

impl LeaseStore for PostgresStore {
    fn acquire<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Option<FencingToken>, StoreError>> {
        Box::pin(async move {
            let ttl = value_i64(ttl.as_millis().try_into().unwrap_or(u64::MAX), "ttl")?;
            let statement = statements::acquire(statements::POSTGRES_NOW_MS);
            let guard = self.client().await?;
            let connected = guard.as_ref().expect("connected above");
            let row = (connected.client)
                .query_opt(&statement, &[&name, &owner, &ttl])
                .await
                .map_err(unavailable)?;
            Ok(row.map(|row| FencingToken(row.get::<_, i64>(0) as u64)))
        })
    }

    fn release<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        token: FencingToken,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let revision = value_i64(token.0, "revision")?;
            let statement = statements::release(statements::POSTGRES_NOW_MS);
            let guard = self.client().await?;
            let connected = guard.as_ref().expect("connected above");
            (connected.client)
                .execute(&statement, &[&name, &owner, &revision])
                .await
                .map_err(unavailable)?;
            Ok(())
        })
    }
}
