//! Contacts from DNS for bootstrapping (`NodeBuilder::discovery`, feature `dns`): every
//! interval the node's name is looked up (SRV records with their ports, or A/AAAA records on
//! one port: what a Kubernetes headless service publishes) and the addresses found go to the
//! core as `Input::ContactsDiscovered` (see `MembershipSettings::bootstrap`). The lookups stop
//! once the node is a member.
//!
//! A contact's address is `ip:port` as DNS gives it: a node must advertise exactly that (in
//! Kubernetes, the pod's IP), or its peers probe an address it does not answer to.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use hickory_resolver::config::{LookupIpStrategy, NameServerConfig, ResolverConfig, ResolverOpts};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::proto::xfer::Protocol;
use hickory_resolver::{ResolveError, Resolver, TokioResolver};
use tokio::sync::{mpsc, oneshot};

use crate::host::HostCommand;

/// Where a node finds its contacts in DNS.
#[derive(Clone, Debug)]
pub struct DnsDiscovery {
    name: String,
    port: Option<u16>,
    interval: Duration,
    name_server: Option<SocketAddr>,
}

impl DnsDiscovery {
    /// SRV records of `name` (e.g. `_shoal._tcp.shoal.default.svc.cluster.local.`): each names
    /// a host and its port.
    pub fn srv(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            port: None,
            interval: Duration::from_secs(1),
            name_server: None,
        }
    }

    /// A/AAAA records of `name` (e.g. `shoal.default.svc.cluster.local.`), every node on
    /// `port`.
    pub fn hosts(name: impl Into<String>, port: u16) -> Self {
        Self {
            port: Some(port),
            ..Self::srv(name)
        }
    }

    /// How often the name is looked up (1 s by default, Akka's).
    #[must_use]
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// Asks this name server instead of the system's (`/etc/resolv.conf`).
    #[must_use]
    pub fn name_server(mut self, address: SocketAddr) -> Self {
        self.name_server = Some(address);
        self
    }

    fn resolver(&self) -> Result<TokioResolver, ResolveError> {
        let mut options = ResolverOpts::default();
        // Both families: the default asks for AAAA only when there is no A record.
        options.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
        // Each round must see the records as they are now (pods come and go).
        options.cache_size = 0;
        Ok(match self.name_server {
            Some(server) => {
                let mut config = ResolverConfig::new();
                config.add_name_server(NameServerConfig::new(server, Protocol::Udp));
                Resolver::builder_with_config(config, TokioConnectionProvider::default())
                    .with_options(options)
                    .build()
            }
            None => Resolver::builder_tokio()?.with_options(options).build(),
        })
    }

    /// The contacts DNS lists now: `ip:port` addresses.
    async fn lookup(&self, resolver: &TokioResolver) -> Result<BTreeSet<String>, ResolveError> {
        resolver.clear_cache();
        let targets: Vec<(String, u16)> = match self.port {
            Some(port) => vec![(self.name.clone(), port)],
            None => absent_is_empty(resolver.srv_lookup(self.name.as_str()).await)?
                .map(|srv| {
                    srv.iter()
                        .map(|record| (record.target().to_string(), record.port()))
                        .collect()
                })
                .unwrap_or_default(),
        };
        let mut contacts = BTreeSet::new();
        // Each target looked up itself: a lookup's additional records may hold only some.
        for (host, port) in targets {
            if let Some(ips) = absent_is_empty(resolver.lookup_ip(host.as_str()).await)? {
                contacts.extend(ips.iter().map(|ip| SocketAddr::new(ip, port).to_string()));
            }
        }
        Ok(contacts)
    }
}

/// A name without records is an empty answer, not a failure.
fn absent_is_empty<T>(answer: Result<T, ResolveError>) -> Result<Option<T>, ResolveError> {
    match answer {
        Ok(found) => Ok(Some(found)),
        Err(e) if e.is_no_records_found() || e.is_nx_domain() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Looks the contacts up every interval and hands them to the host, until the node is a
/// member (the host says discovery is done) or has stopped.
pub(crate) async fn run(discovery: DnsDiscovery, host: mpsc::Sender<HostCommand>) {
    let resolver = match discovery.resolver() {
        Ok(resolver) => resolver,
        Err(error) => {
            tracing::error!(%error, "DNS discovery cannot start: no resolver");
            return;
        }
    };
    let mut rounds = tokio::time::interval(discovery.interval);
    rounds.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        rounds.tick().await;
        let contacts = match discovery.lookup(&resolver).await {
            Ok(contacts) => contacts,
            Err(error) => {
                tracing::warn!(name = %discovery.name, %error, "DNS lookup of the contacts failed");
                continue;
            }
        };
        tracing::debug!(name = %discovery.name, ?contacts, "contacts discovered");
        let (answer, wanted) = oneshot::channel();
        let contacts = contacts.into_iter().collect();
        if host
            .send(HostCommand::Discovered { contacts, answer })
            .await
            .is_err()
        {
            return;
        }
        if !wanted.await.unwrap_or(false) {
            return;
        }
    }
}
