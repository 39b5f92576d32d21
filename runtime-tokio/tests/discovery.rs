//! Bootstrapping from DNS: a name server in this process, on loopback, serves SRV and A records
//! whose contents the tests change while the nodes run. Nodes started in any order, with no
//! seed list, form one cluster (its founder the lowest address); two groups whose names first
//! list only themselves never form two, and become one once the names list everyone.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{fast_membership, fast_settings, logs};
use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, SRV};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use shoal::discovery::DnsDiscovery;
use shoal::{BootstrapSettings, EntityTypeConfig, MemberStatus, Node, NodeBuilder};

/// Each name's records of each type.
type Records = BTreeMap<(String, RecordType), Vec<RData>>;

/// Records by name and type, changed by the test while the server answers from them.
#[derive(Clone, Default)]
struct Zone(Arc<Mutex<Records>>);

impl Zone {
    /// `name`'s SRV records: one per node, each at `<port>.nodes.test.` (A: 127.0.0.1).
    fn list(&self, name: &str, nodes: &[&Node]) {
        let mut zone = self.0.lock().unwrap();
        let mut srv = Vec::new();
        for node in nodes {
            let address: SocketAddr = node.address().to_string().parse().unwrap();
            let host = format!("p{}.nodes.test.", address.port());
            let target = Name::from_ascii(&host).unwrap();
            srv.push(RData::SRV(SRV::new(0, 0, address.port(), target)));
            let a = vec![RData::A(A(Ipv4Addr::LOCALHOST))];
            zone.insert((host, RecordType::A), a);
        }
        zone.insert((name.to_string(), RecordType::SRV), srv);
    }
}

/// Serves `zone` over UDP on a loopback port until the test ends; its address.
async fn serve(zone: Zone) -> SocketAddr {
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let address = socket.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buffer = [0u8; 1500];
        while let Ok((len, from)) = socket.recv_from(&mut buffer).await {
            let Ok(query) = Message::from_vec(&buffer[..len]) else {
                continue;
            };
            let mut reply = Message::new();
            reply
                .set_id(query.id())
                .set_message_type(MessageType::Response)
                .set_op_code(OpCode::Query)
                .set_authoritative(true)
                .set_recursion_desired(query.recursion_desired())
                .set_recursion_available(true);
            reply.add_queries(query.queries().to_vec());
            let mut code = ResponseCode::NXDomain;
            for question in query.queries() {
                let name = question.name().to_lowercase().to_ascii();
                let zone = zone.0.lock().unwrap();
                if let Some(records) = zone.get(&(name, question.query_type())) {
                    code = ResponseCode::NoError;
                    for rdata in records {
                        let name = question.name().clone();
                        reply.add_answer(Record::from_rdata(name, 0, rdata.clone()));
                    }
                }
            }
            reply.set_response_code(code);
            if let Ok(bytes) = reply.to_vec() {
                let _ = socket.send_to(&bytes, from).await;
            }
        }
    });
    address
}

/// A node finding its contacts under `name` at `server`, `required` of them to form.
async fn start(server: SocketAddr, name: &str, required: usize) -> Node {
    let mut membership = fast_membership();
    membership.bootstrap = Some(BootstrapSettings {
        required_contacts: required,
        stable_margin: Duration::from_millis(800),
        probe_interval: Duration::from_millis(100),
    });
    let discovery = DnsDiscovery::srv(name)
        .name_server(server)
        .interval(Duration::from_millis(100));
    NodeBuilder::new("test")
        .secret("test secret")
        .membership(membership)
        .settings(fast_settings())
        .discovery(discovery)
        .entity(EntityTypeConfig::new("counter"), |_| common::Counter {
            total: 0,
            stops: None,
        })
        .start()
        .await
        .unwrap()
}

/// The members each node sees Up or Joining, by node (none: not in a cluster yet).
async fn views(nodes: &[&Node]) -> Vec<BTreeSet<String>> {
    let mut out = Vec::new();
    for node in nodes {
        let view = node.view().await.unwrap();
        let members = (view.members().iter())
            .filter(|m| matches!(m.status, MemberStatus::Up | MemberStatus::Joining))
            .map(|m| m.id.to_string())
            .collect();
        out.push(members);
    }
    out
}

/// Whether two nodes are in clusters that share no member.
fn two_clusters(views: &[BTreeSet<String>]) -> bool {
    let formed: Vec<&BTreeSet<String>> = views.iter().filter(|v| !v.is_empty()).collect();
    (formed.iter()).any(|a| formed.iter().any(|b| a.is_disjoint(b)))
}

/// Polls (at most `within`) until every node sees all of them Up; fails on two clusters.
async fn until_one_cluster(nodes: &[&Node], within: Duration) {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let views = views(nodes).await;
        assert!(!two_clusters(&views), "two clusters: {views:?}");
        let all = nodes.len();
        let up = |v: &BTreeSet<String>| v.len() == all;
        if views.iter().all(up) {
            let ups = all_up(nodes).await;
            if ups {
                return;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not one cluster: {views:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether every node sees every member Up.
async fn all_up(nodes: &[&Node]) -> bool {
    for node in nodes {
        let view = node.view().await.unwrap();
        if view.members().len() != nodes.len()
            || view.members().iter().any(|m| m.status != MemberStatus::Up)
        {
            return false;
        }
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_listed_in_dns_form_one_cluster_founded_by_the_lowest_address() {
    logs();
    let zone = Zone::default();
    let server = serve(zone.clone()).await;
    let name = "_shoal._tcp.svc.test.";
    let mut nodes = Vec::new();
    for _ in 0..3 {
        nodes.push(start(server, name, 2).await);
    }
    let all: Vec<&Node> = nodes.iter().collect();
    zone.list(name, &all);
    until_one_cluster(&all, Duration::from_secs(20)).await;
    let lowest = (nodes.iter())
        .min_by_key(|n| n.address().to_string().parse::<SocketAddr>().unwrap())
        .unwrap();
    let view = nodes[0].view().await.unwrap();
    let founder = view.members().iter().min_by_key(|m| m.up_number).unwrap();
    assert_eq!(
        founder.id,
        lowest.member(),
        "the lowest address formed the cluster"
    );
    for node in nodes {
        node.abort().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_groups_whose_names_list_only_themselves_never_form_two_clusters() {
    logs();
    let zone = Zone::default();
    let server = serve(zone.clone()).await;
    let (a, b) = ("_shoal._tcp.a.test.", "_shoal._tcp.b.test.");
    let mut group_a = Vec::new();
    for _ in 0..3 {
        group_a.push(start(server, a, 3).await);
    }
    let mut group_b = Vec::new();
    for _ in 0..2 {
        group_b.push(start(server, b, 3).await);
    }
    zone.list(a, &group_a.iter().collect::<Vec<_>>());
    zone.list(b, &group_b.iter().collect::<Vec<_>>());
    // The group of three forms; the group of two has too few contacts and waits.
    until_one_cluster(&group_a.iter().collect::<Vec<_>>(), Duration::from_secs(20)).await;
    let waiting = views(&group_b.iter().collect::<Vec<_>>()).await;
    assert!(waiting.iter().all(BTreeSet::is_empty), "{waiting:?}");
    // Both names list everyone: the two join the cluster.
    let everyone: Vec<&Node> = group_a.iter().chain(&group_b).collect();
    zone.list(a, &everyone);
    zone.list(b, &everyone);
    until_one_cluster(&everyone, Duration::from_secs(20)).await;
    for node in group_a.into_iter().chain(group_b) {
        node.abort().await;
    }
}
