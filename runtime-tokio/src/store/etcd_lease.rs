//! Leases in etcd: a key per lease (`<prefix><name>`, its value the holder), attached to an
//! etcd lease of the ttl asked for, so that etcd's clock, not the holders', ends a grant. The
//! fencing token is the key's `create_revision`: etcd's revision grows with every write of the
//! cluster, and the key is created anew for every new holder (after a release deleted it, or
//! its etcd lease expired and etcd deleted it), so a new holder's token is larger than every
//! earlier one, and an extension keeps it. An extension moves the key to a fresh etcd lease of
//! the ttl asked for (a put keeps the key's `create_revision`) in a transaction that checks
//! the key is still this holder's grant.

use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, DeleteOptions, KeyValue, PutOptions, Txn, TxnOp,
    TxnOpResponse,
};
use futures_util::future::BoxFuture;
use shoal_core::lease::FencingToken;

use super::StoreError;
use super::lease::LeaseStore;

/// Where the lease keys go unless [`EtcdLeaseStore::with_prefix`] says otherwise.
pub const DEFAULT_ETCD_PREFIX: &str = "/shoal/leases/";

/// A [`LeaseStore`] on an etcd cluster (etcd 3.4 or later).
#[derive(Clone)]
pub struct EtcdLeaseStore {
    client: Client,
    prefix: String,
}

impl std::fmt::Debug for EtcdLeaseStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdLeaseStore")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl EtcdLeaseStore {
    /// Connects to the etcd members at `endpoints` (`host:port` or `http://host:port`). A call
    /// that gets no answer within `timeout` fails (the lease holder then takes it as failed and
    /// tries again; its grant's validity is judged on its own clock meanwhile).
    pub async fn connect(endpoints: &[String], timeout: Duration) -> Result<Self, StoreError> {
        let options = ConnectOptions::new()
            .with_connect_timeout(timeout)
            .with_timeout(timeout);
        let client = Client::connect(endpoints, Some(options))
            .await
            .map_err(unavailable)?;
        Ok(Self {
            client,
            prefix: DEFAULT_ETCD_PREFIX.to_owned(),
        })
    }

    /// The same store with its lease keys under `prefix` (several clusters on one etcd).
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// Creates the key if nobody holds it, or moves this holder's key to `lease`; the token,
    /// `None` when another holder has it.
    async fn take(
        &self,
        client: &mut Client,
        key: &str,
        owner: &str,
        lease: i64,
    ) -> Result<Option<FencingToken>, StoreError> {
        let put = || TxnOp::put(key, owner, Some(PutOptions::new().with_lease(lease)));
        let create = Txn::new()
            .when([Compare::create_revision(key, CompareOp::Equal, 0)])
            .and_then([put()])
            .or_else([TxnOp::get(key, None)]);
        let created = client.txn(create).await.map_err(unavailable)?;
        if created.succeeded() {
            // The transaction's one write created the key: its revision is the key's
            // create_revision.
            let revision = created.header().map(|h| h.revision());
            return token(revision.unwrap_or(0)).map(Some);
        }
        let Some(held) = first_kv(created.op_responses()) else {
            // Deleted between the compare and the read: free again, taken on the next try.
            return Ok(None);
        };
        if held.value() != owner.as_bytes() {
            return Ok(None);
        }
        // Ours: extended under the fresh etcd lease if it is still the same grant.
        let extend = Txn::new()
            .when([
                Compare::value(key, CompareOp::Equal, owner),
                Compare::create_revision(key, CompareOp::Equal, held.create_revision()),
            ])
            .and_then([put()]);
        if !client.txn(extend).await.map_err(unavailable)?.succeeded() {
            return Ok(None);
        }
        if held.lease() != 0 {
            // The key no longer hangs on it; it would run out by itself anyway.
            let _ = client.lease_revoke(held.lease()).await;
        }
        token(held.create_revision()).map(Some)
    }
}

impl LeaseStore for EtcdLeaseStore {
    fn acquire<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Option<FencingToken>, StoreError>> {
        Box::pin(async move {
            let mut client = self.client.clone();
            let granted = client
                .lease_grant(ttl_seconds(ttl), None)
                .await
                .map_err(unavailable)?;
            let lease = granted.id();
            let taken = self.take(&mut client, &self.key(name), owner, lease).await;
            if !matches!(taken, Ok(Some(_))) {
                // Nothing hangs on it: given back rather than left to run out.
                let _ = client.lease_revoke(lease).await;
            }
            taken
        })
    }

    fn release<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        token: FencingToken,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let revision = i64::try_from(token.0)
                .map_err(|_| StoreError::Invalid(format!("fencing token {}", token.0)))?;
            let key = self.key(name);
            let delete = Txn::new()
                .when([
                    Compare::value(key.as_str(), CompareOp::Equal, owner),
                    Compare::create_revision(key.as_str(), CompareOp::Equal, revision),
                ])
                .and_then([TxnOp::delete(
                    key.as_str(),
                    Some(DeleteOptions::new().with_prev_key()),
                )]);
            let mut client = self.client.clone();
            let deleted = client.txn(delete).await.map_err(unavailable)?;
            let lease = deleted.op_responses().into_iter().find_map(|r| match r {
                TxnOpResponse::Delete(d) => d.prev_kvs().first().map(KeyValue::lease),
                _ => None,
            });
            if let Some(lease) = lease.filter(|id| *id != 0) {
                let _ = client.lease_revoke(lease).await;
            }
            Ok(())
        })
    }
}

/// etcd grants whole seconds: the ttl rounded up, so a grant never ends before its holder's
/// validity (computed from the ttl asked for) does.
fn ttl_seconds(ttl: Duration) -> i64 {
    let seconds = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
    i64::try_from(seconds.max(1)).unwrap_or(i64::MAX)
}

fn first_kv(responses: Vec<TxnOpResponse>) -> Option<KeyValue> {
    responses.into_iter().find_map(|r| match r {
        TxnOpResponse::Get(get) => get.kvs().first().cloned(),
        _ => None,
    })
}

fn token(revision: i64) -> Result<FencingToken, StoreError> {
    u64::try_from(revision)
        .ok()
        .filter(|r| *r > 0)
        .map(FencingToken)
        .ok_or_else(|| StoreError::Invalid(format!("etcd revision {revision}")))
}

fn unavailable(error: etcd_client::Error) -> StoreError {
    StoreError::Unavailable(format!("etcd: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ttl_is_rounded_up_to_whole_seconds() {
        assert_eq!(ttl_seconds(Duration::from_millis(200)), 1);
        assert_eq!(ttl_seconds(Duration::from_secs(10)), 10);
        assert_eq!(ttl_seconds(Duration::from_millis(10_001)), 11);
        assert_eq!(ttl_seconds(Duration::ZERO), 1);
    }

    #[test]
    fn a_revision_that_cannot_be_a_token_is_an_error() {
        assert_eq!(token(7).unwrap(), FencingToken(7));
        assert!(token(0).is_err());
        assert!(token(-1).is_err());
    }
}
