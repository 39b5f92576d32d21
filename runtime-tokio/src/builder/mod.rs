//! [`NodeBuilder`]: everything a node needs before it starts, checked by the core's
//! `Config::validate` and the builder's own rules.

use std::any::TypeId;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shoal_core::{
    Address, AppVersion, Config, Driver, EntityId, EntityType, EntityTypeConfig, Incarnation,
    MembershipSettings, NodeId, SeedNode, ShardingSettings,
};
use tokio::sync::{broadcast, mpsc};
use tracing::Instrument;

use crate::clock::Clock;
use crate::entity::runtime::EntityRuntime;
use crate::entity::{Entity, Factory, FactoryFn};
use crate::error::StartError;
use crate::host::Host;
use crate::host::command::HostHandle;
use crate::host::io::{Feedback, TokioIo};
use crate::host::requests::Requests;
use crate::node::{Node, RegisteredType};
use crate::store::StoreLink;
use crate::store::{Journal, StateStore};
use crate::store::{LeaseLink, LeaseStore, RememberStore};
use crate::transport::handshake::Identity;
use crate::transport::network::{Listener, Network, Tcp};
use crate::transport::{Inbox, Transport, TransportSettings};

mod persistent;

/// Queue sizes between the transport, the entities and the host task.
const INBOUND_QUEUE: usize = 1024;
const COMMAND_QUEUE: usize = 1024;
const EVENT_BUFFER: usize = 1024;

/// Configures and starts a node.
///
/// A node's id is derived from its advertised address, and its incarnation from the start
/// time, so a node restarted at the same address is a new incarnation of the same node.
pub struct NodeBuilder {
    cluster_name: String,
    bind: String,
    advertise: Option<String>,
    seed_nodes: Vec<String>,
    secret: Vec<u8>,
    roles: BTreeSet<String>,
    app_version: AppVersion,
    settings: ShardingSettings,
    membership: Option<MembershipSettings>,
    transport: TransportSettings,
    mailbox_capacity: usize,
    handle_signals: bool,
    network: Arc<dyn Network>,
    seed: Option<u64>,
    incarnation: Option<u64>,
    entity_types: Vec<EntityTypeConfig>,
    factories: HashMap<EntityType, Arc<dyn Factory>>,
    types: HashMap<EntityType, RegisteredType>,
    remember_store: Option<Arc<dyn RememberStore>>,
    lease_store: Option<Arc<dyn LeaseStore>>,
    state_store: Option<Arc<dyn StateStore>>,
    store_timeout: Duration,
    /// Where the contacts for bootstrapping come from.
    #[cfg(feature = "dns")]
    discovery: Option<crate::discovery::DnsDiscovery>,
}

impl NodeBuilder {
    /// A node of the cluster `cluster_name`, listening on an OS-chosen loopback port, forming
    /// a cluster of its own unless seed nodes are given.
    pub fn new(cluster_name: impl Into<String>) -> Self {
        Self {
            cluster_name: cluster_name.into(),
            bind: "127.0.0.1:0".into(),
            advertise: None,
            seed_nodes: Vec::new(),
            secret: Vec::new(),
            roles: BTreeSet::new(),
            app_version: AppVersion::default(),
            settings: ShardingSettings::default(),
            membership: None,
            transport: TransportSettings::default(),
            mailbox_capacity: 1024,
            handle_signals: false,
            network: Arc::new(Tcp),
            seed: None,
            incarnation: None,
            entity_types: Vec::new(),
            factories: HashMap::new(),
            remember_store: None,
            lease_store: None,
            state_store: None,
            store_timeout: Duration::from_secs(10),
            #[cfg(feature = "dns")]
            discovery: None,
            types: HashMap::new(),
        }
    }

    /// The socket address to listen on (`host:port`; port 0 picks a free one).
    pub fn bind(mut self, address: impl Into<String>) -> Self {
        self.bind = address.into();
        self
    }

    /// The address others dial (default: the bound address).
    pub fn advertise(mut self, address: impl Into<String>) -> Self {
        self.advertise = Some(address.into());
        self
    }

    /// Advertised addresses of the seed nodes (Akka's `seed-nodes`). A node listed first
    /// forms the cluster if it finds none; the others join through them.
    pub fn seed_nodes(mut self, seeds: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.seed_nodes = seeds.into_iter().map(Into::into).collect();
        self
    }

    /// Finds the contacts to bootstrap from in DNS (feature `dns`). The membership settings
    /// must say how to bootstrap (`MembershipSettings::bootstrap`); the node advertises its
    /// address as DNS lists it (`advertise`).
    #[cfg(feature = "dns")]
    #[must_use]
    pub fn discovery(mut self, discovery: crate::discovery::DnsDiscovery) -> Self {
        self.discovery = Some(discovery);
        self
    }

    /// The shared secret every member proves it holds in the handshake.
    pub fn secret(mut self, secret: impl AsRef<[u8]>) -> Self {
        self.secret = secret.as_ref().to_vec();
        self
    }

    /// Adds a role (entity types may be restricted to a role).
    pub fn role(mut self, role: impl Into<String>) -> Self {
        self.roles.insert(role.into());
        self
    }

    /// The application's version (allocation prefers members of the newest version).
    pub fn app_version(mut self, version: AppVersion) -> Self {
        self.app_version = version;
        self
    }

    /// The node's random seed (the core's tie-breaks and jitter, the transport's reconnect
    /// jitter). By default drawn from the OS and logged at start, so an incident can be
    /// replayed by setting it here. Handshake nonces never come from it.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// The incarnation this start claims (by default microseconds since the Unix epoch). It
    /// must grow across restarts of a node at one address: members take the larger one as the
    /// node's current life. For deterministic tests on a simulated clock.
    pub fn incarnation(mut self, incarnation: u64) -> Self {
        self.incarnation = Some(incarnation.max(1));
        self
    }

    /// The network the transport dials and listens on (default: real TCP). Tests run whole
    /// clusters on a simulated one.
    pub fn network(mut self, network: impl Network) -> Self {
        self.network = Arc::new(network);
        self
    }

    /// Sharding settings (Akka's defaults unless set).
    pub fn settings(mut self, settings: ShardingSettings) -> Self {
        self.settings = settings;
        self
    }

    /// Membership settings: failure detector, downing, gossip. Their seed nodes and app
    /// version are the builder's.
    pub fn membership(mut self, membership: MembershipSettings) -> Self {
        self.membership = Some(membership);
        self
    }

    /// Transport queue sizes and timeouts.
    pub fn transport(mut self, settings: TransportSettings) -> Self {
        self.transport = settings;
        self
    }

    /// Messages an entity's mailbox holds; more are dead letters (`MailboxFull`).
    pub fn mailbox_capacity(mut self, capacity: usize) -> Self {
        self.mailbox_capacity = capacity;
        self
    }

    /// Leave the cluster gracefully on SIGTERM or ctrl-c (off by default: the application
    /// may want to do more on a signal; then it calls [`Node::leave`] itself).
    pub fn leave_on_signal(mut self, enabled: bool) -> Self {
        self.handle_signals = enabled;
        self
    }

    /// Where entity types with `EntityTypeConfig::remember` keep their remembered entities:
    /// `SqliteStore` (one file, shared by the nodes of one machine) or `PostgresStore`.
    /// Required when a hosted type remembers entities.
    pub fn remember_store(mut self, store: impl RememberStore) -> Self {
        self.remember_store = Some(Arc::new(store));
        self
    }

    /// How long a remember-store request may take before it counts as failed and is retried
    /// (10 s). Its outcome is then unknown: remembering treats it so.
    pub fn remember_store_timeout(mut self, timeout: Duration) -> Self {
        self.store_timeout = timeout;
        self
    }

    /// Hosts entities of type `E`, made by `make` from their id.
    pub fn entity<E: Entity>(
        mut self,
        config: EntityTypeConfig,
        make: impl Fn(&EntityId) -> E + Send + Sync + 'static,
    ) -> Self {
        self.factories
            .insert(config.name.clone(), Arc::new(FactoryFn::<E, _>::new(make)));
        self.register::<E>(config)
    }

    /// Routes to entities of type `E` hosted by other members, hosting none here (Akka's
    /// proxy-only region).
    pub fn proxy<E: Entity>(self, mut config: EntityTypeConfig) -> Self {
        config.proxy_only = true;
        self.register::<E>(config)
    }

    fn register<E: Entity>(mut self, config: EntityTypeConfig) -> Self {
        let registered = RegisteredType {
            rust_type: TypeId::of::<E>(),
            name: std::any::type_name::<E>(),
        };
        self.types.insert(config.name.clone(), registered);
        self.entity_types.retain(|t| t.name != config.name);
        self.entity_types.push(config);
        self
    }

    /// Binds, starts the node's tasks and joins the cluster.
    pub async fn start(self) -> Result<Node, StartError> {
        self.validate()?;
        let (listener, advertised) = self.bind_listener().await?;
        let (config, seeds) = self.configure(&advertised)?;
        self.spawn(listener, config, seeds)
    }

    /// Refuses settings that cannot run, before anything is bound.
    fn validate(&self) -> Result<(), StartError> {
        if self.cluster_name.is_empty() {
            return Err(StartError::Builder("the cluster name is empty".into()));
        }
        if self.mailbox_capacity == 0 {
            return Err(StartError::Builder("mailbox capacity 0".into()));
        }
        let remembering = |t: &EntityTypeConfig| t.remember.is_some();
        let persistent = |t: &EntityTypeConfig| t.persistent;
        self.needs_store(
            remembering,
            self.remember_store.is_some(),
            "remembers entities",
            "remember_store",
        )?;
        self.needs_store(
            persistent,
            self.state_store.is_some(),
            "persists state",
            "state_store",
        )?;
        self.needs_store(
            |t| t.shard_lease.is_some(),
            self.lease_store.is_some(),
            "holds shard leases",
            "lease_store",
        )?;
        if self.store_timeout.is_zero() {
            return Err(StartError::Builder("remember store timeout 0".into()));
        }
        #[cfg(feature = "dns")]
        if self.discovery.is_some()
            && self
                .membership
                .as_ref()
                .is_none_or(|m| m.bootstrap.is_none())
        {
            return Err(StartError::Builder(
                "DNS discovery needs MembershipSettings::bootstrap (how many contacts must agree)"
                    .into(),
            ));
        }
        let lease_majority = (self.membership.as_ref())
            .is_some_and(|m| matches!(m.downing, shoal_core::Downing::LeaseMajority { .. }));
        if lease_majority && self.lease_store.is_none() {
            return Err(StartError::Builder(
                "lease-majority downing needs a lease store: give one with lease_store".into(),
            ));
        }
        Ok(())
    }

    /// Refuses a hosted type that `wants` a store when the node has none (`has`): named with
    /// what it does, the store it lacks and the builder method that gives it (`store`).
    fn needs_store(
        &self,
        wants: impl Fn(&EntityTypeConfig) -> bool,
        has: bool,
        does: &str,
        store: &str,
    ) -> Result<(), StartError> {
        match self.entity_types.iter().find(|t| wants(t) && !t.proxy_only) {
            Some(t) if !has => Err(StartError::Builder(format!(
                "entity type {} {does} but the node has no {} (NodeBuilder::{store})",
                t.name,
                store.replace('_', " ")
            ))),
            _ => Ok(()),
        }
    }

    /// Binds the listener; returns it with the address this node advertises.
    async fn bind_listener(&self) -> Result<(Box<dyn Listener>, String), StartError> {
        let bind_error = |source| StartError::Bind {
            address: self.bind.clone(),
            source,
        };
        let listener = self.network.bind(&self.bind).await.map_err(bind_error)?;
        let advertised = match &self.advertise {
            Some(address) => address.clone(),
            None => listener.local_addr().map_err(bind_error)?.to_string(),
        };
        Ok((listener, advertised))
    }

    /// The core's configuration for a node advertised at `advertised`, and the seed addresses.
    fn configure(&self, advertised: &str) -> Result<(Config, Vec<String>), StartError> {
        let address = Address::new(advertised);
        let incarnation = Incarnation(self.incarnation.unwrap_or_else(incarnation_now));
        let seed = match self.seed {
            Some(seed) => seed,
            None => {
                let mut seed = [0u8; 8];
                getrandom::fill(&mut seed).map_err(|e| StartError::Random(e.to_string()))?;
                u64::from_le_bytes(seed)
            }
        };
        let seeds: Vec<String> = if self.seed_nodes.is_empty() {
            vec![advertised.to_string()]
        } else {
            self.seed_nodes.clone()
        };
        let mut membership = (self.membership.clone())
            .unwrap_or_else(|| MembershipSettings::new(Vec::<SeedNode>::new()));
        membership.seed_nodes = seeds
            .iter()
            .map(|s| SeedNode::new(NodeId::of_address(s), Address::new(s.as_str())))
            .collect();
        membership.app_version = self.app_version;
        let mut config = Config::new(NodeId::of_address(advertised), incarnation);
        config.address = address;
        config.roles = self.roles.clone();
        config.seed = seed;
        config.entity_types = self.entity_types.clone();
        config.settings = self.settings.clone();
        config.membership = Some(membership);
        Ok((config, seeds))
    }

    /// Starts the core, the transport and the host task; returns the node's handle.
    fn spawn(
        self,
        listener: Box<dyn Listener>,
        config: Config,
        seeds: Vec<String>,
    ) -> Result<Node, StartError> {
        let (me, address, seed) = (config.member_id(), config.address.clone(), config.seed);
        let clock = Clock::start();
        let core = shoal_core::Node::new(config, clock.now())?;
        tracing::info!(%me, %address, seed, "node starting (seed and incarnation replay this run)");

        let (control_tx, control_in) = mpsc::channel(INBOUND_QUEUE);
        let (data_tx, data_in) = mpsc::channel(INBOUND_QUEUE);
        let (signals_tx, signals) = mpsc::unbounded_channel();
        let (commands_tx, commands) = mpsc::channel(COMMAND_QUEUE);
        let (store_tx, store_done) = mpsc::unbounded_channel();
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let cluster_name = self.cluster_name.clone();
        let identity = Identity {
            cluster_name: self.cluster_name,
            member: me,
            address: address.clone(),
            secret: self.secret,
        };
        let (routes, accessed) = crate::entity::route::Routes::new();
        let inbox = Inbox {
            control: control_tx,
            data: data_tx,
            routes: Arc::clone(&routes),
        };
        let transport = Transport::start(
            listener,
            self.network,
            identity,
            self.transport,
            seed,
            inbox,
        );
        let io = TokioIo {
            transport,
            entities: EntityRuntime::new(
                self.factories,
                self.mailbox_capacity,
                (self.state_store).map(|store| Journal::start(store, self.store_timeout)),
                (signals_tx, Arc::clone(&routes)),
            ),
            leases: (self.lease_store).map(|store| {
                LeaseLink::new(store, &cluster_name, self.store_timeout, store_tx.clone())
            }),
            store: (self.remember_store)
                .map(|store| StoreLink::new(store, self.store_timeout, store_tx)),
            feedback: Feedback::default(),
        };
        let query = self.settings.shard_region_query_timeout;
        let host = Host {
            me,
            driver: Driver::new(core, clock.now()),
            io,
            clock,
            commands,
            control_in,
            data_in,
            signals,
            store_done,
            asks: Requests::default(),
            requests: Requests::default(),
            events: events.clone(),
            left: false,
            leave_waiters: Vec::new(),
            producers: Default::default(),
            routes: Arc::clone(&routes),
            accessed,
            access_log: Default::default(),
            seeds: seeds.iter().map(|s| Address::new(s.as_str())).collect(),
            command_timeout: query * 4 + Duration::from_secs(5),
        };
        tokio::spawn(
            host.run()
                .instrument(tracing::info_span!("node", member = %me)),
        );
        #[cfg(feature = "dns")]
        if let Some(discovery) = self.discovery {
            let lookups = crate::discovery::run(discovery, commands_tx.clone());
            tokio::spawn(lookups.instrument(tracing::info_span!("discovery", member = %me)));
        }
        let node = Node::new(
            me,
            address,
            HostHandle::new(commands_tx, routes),
            events,
            self.types,
        );
        if self.handle_signals {
            tokio::spawn(crate::node::leave_on_signal(node.clone()));
        }
        Ok(node)
    }
}

/// Microseconds since the Unix epoch: a restarted node is a newer incarnation.
fn incarnation_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.as_micros() as u64)
        .max(1)
}
