//! The PostgreSQL store as a [`ProducerQueue`]: each call one transaction.

use futures_util::future::BoxFuture;
use shoal_core::EntityId;

use super::StoreError;
use super::postgres::PostgresStore;
use super::queue::{ProducerQueue, QueueState, state_of, statements};
use super::sql::unavailable;
use super::state_sql::value_i64;

impl ProducerQueue for PostgresStore {
    fn open<'a>(
        &'a self,
        producer: &'a str,
        session: u64,
    ) -> BoxFuture<'a, Result<QueueState, StoreError>> {
        Box::pin(async move {
            let mut guard = self.client().await?;
            let connected = guard.as_mut().expect("connected above");
            let tx = connected.client.transaction().await.map_err(unavailable)?;
            let fresh = value_i64(session, "session")?;
            (tx.execute(statements::CLAIM_SESSION, &[&producer, &fresh])
                .await)
                .map_err(unavailable)?;
            let session: i64 = (tx.query_one(statements::SESSION, &[&producer]).await)
                .map_err(unavailable)?
                .get(0);
            let streams = (tx.query(statements::STREAMS, &[&producer]).await)
                .map_err(unavailable)?
                .iter()
                .map(|row| (row.get::<_, String>(0), row.get::<_, i64>(1) as u64))
                .collect();
            let queued = (tx.query(statements::QUEUED, &[&producer]).await)
                .map_err(unavailable)?
                .iter()
                .map(|row| (row.get(0), row.get::<_, i64>(1) as u64, row.get(2)))
                .collect();
            tx.commit().await.map_err(unavailable)?;
            Ok(state_of(session as u64, streams, queued))
        })
    }

    fn push<'a>(
        &'a self,
        producer: &'a str,
        messages: &'a [(EntityId, u64, Vec<u8>)],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let mut guard = self.client().await?;
            let connected = guard.as_mut().expect("connected above");
            let tx = connected.client.transaction().await.map_err(unavailable)?;
            for (entity, seq, payload) in messages {
                let (entity, seq) = (entity.as_str(), value_i64(*seq, "seq")?);
                (tx.execute(statements::PUSH, &[&producer, &entity, &seq, payload])
                    .await)
                    .map_err(unavailable)?;
                (tx.execute(statements::NUMBERED, &[&producer, &entity, &seq])
                    .await)
                    .map_err(unavailable)?;
            }
            tx.commit().await.map_err(unavailable)
        })
    }

    fn confirm<'a>(
        &'a self,
        producer: &'a str,
        confirmed: &'a [(EntityId, u64)],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let mut guard = self.client().await?;
            let connected = guard.as_mut().expect("connected above");
            let tx = connected.client.transaction().await.map_err(unavailable)?;
            for (entity, up_to) in confirmed {
                let (entity, up_to) = (entity.as_str(), value_i64(*up_to, "seq")?);
                (tx.execute(statements::CONFIRM, &[&producer, &entity, &up_to])
                    .await)
                    .map_err(unavailable)?;
            }
            tx.commit().await.map_err(unavailable)
        })
    }
}
