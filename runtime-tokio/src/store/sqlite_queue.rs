//! The SQLite store as a [`ProducerQueue`]: each call one immediate transaction.

use futures_util::future::BoxFuture;
use rusqlite::{TransactionBehavior, params};
use shoal_core::EntityId;

use super::StoreError;
use super::queue::{ProducerQueue, QueueState, state_of, statements};
use super::sql::unavailable;
use super::sqlite::{SqliteStore, sql};
use super::state_sql::value_i64;

impl ProducerQueue for SqliteStore {
    fn open<'a>(
        &'a self,
        producer: &'a str,
        session: u64,
    ) -> BoxFuture<'a, Result<QueueState, StoreError>> {
        let producer = producer.to_owned();
        self.with(move |connection| {
            let tx = connection
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(unavailable)?;
            let fresh = value_i64(session, "session")?;
            tx.execute(&sql(statements::CLAIM_SESSION), params![producer, fresh])
                .map_err(unavailable)?;
            let session: i64 = tx
                .query_row(&sql(statements::SESSION), params![producer], |row| {
                    row.get(0)
                })
                .map_err(unavailable)?;
            let streams = {
                let mut query = tx.prepare(&sql(statements::STREAMS)).map_err(unavailable)?;
                let rows = query
                    .query_map(params![producer], |row| {
                        Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
                    })
                    .map_err(unavailable)?;
                rows.map(|row| row.map(|(e, n)| (e, n as u64)))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(unavailable)?
            };
            let queued = {
                let mut query = tx.prepare(&sql(statements::QUEUED)).map_err(unavailable)?;
                let rows = query
                    .query_map(params![producer], |row| {
                        Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?, row.get(2)?))
                    })
                    .map_err(unavailable)?;
                rows.map(|row| row.map(|(e, s, p)| (e, s as u64, p)))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(unavailable)?
            };
            tx.commit().map_err(unavailable)?;
            Ok(state_of(session as u64, streams, queued))
        })
    }

    fn push<'a>(
        &'a self,
        producer: &'a str,
        messages: &'a [(EntityId, u64, Vec<u8>)],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let (producer, messages) = (producer.to_owned(), messages.to_vec());
        self.with(move |connection| {
            let tx = connection
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(unavailable)?;
            for (entity, seq, payload) in &messages {
                let seq = value_i64(*seq, "seq")?;
                let values = params![producer, entity.as_str(), seq, payload];
                (tx.prepare_cached(&sql(statements::PUSH))
                    .map_err(unavailable)?)
                .execute(values)
                .map_err(unavailable)?;
                let values = params![producer, entity.as_str(), seq];
                (tx.prepare_cached(&sql(statements::NUMBERED))
                    .map_err(unavailable)?)
                .execute(values)
                .map_err(unavailable)?;
            }
            tx.commit().map_err(unavailable)
        })
    }

    fn confirm<'a>(
        &'a self,
        producer: &'a str,
        confirmed: &'a [(EntityId, u64)],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let (producer, confirmed) = (producer.to_owned(), confirmed.to_vec());
        self.with(move |connection| {
            let tx = connection
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(unavailable)?;
            for (entity, up_to) in &confirmed {
                let values = params![producer, entity.as_str(), value_i64(*up_to, "seq")?];
                (tx.prepare_cached(&sql(statements::CONFIRM))
                    .map_err(unavailable)?)
                .execute(values)
                .map_err(unavailable)?;
            }
            tx.commit().map_err(unavailable)
        })
    }
}
