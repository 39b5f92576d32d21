//! Bootstrap from discovered contacts (`MembershipSettings::bootstrap`) over the scripted
//! cluster's network, checked after every step: never two clusters (two members whose views
//! share nobody). Two groups that discover each other late, Akka's case of a lagging DNS
//! answer, random arrival of contacts; and the negative control, a required count that is not
//! a majority, which the check catches.

use std::collections::BTreeMap;
use std::time::Duration;

use shoal_core::{
    BootstrapSettings, Config, EntityTypeConfig, Incarnation, Input, MemberStatus,
    MembershipSettings, NodeId, Phase, Rng, SeedNode,
};
use sim::scripted::Cluster;

/// Starts node `n` bootstrapping with `required` contacts, no seed list.
fn start(c: &mut Cluster, n: u64, required: usize) {
    let mut s = MembershipSettings::new(Vec::<SeedNode>::new());
    s.gossip_interval = Duration::from_millis(200);
    s.heartbeat_interval = Duration::from_millis(200);
    s.bootstrap = Some(BootstrapSettings {
        required_contacts: required,
        stable_margin: Duration::from_secs(3),
        probe_interval: Duration::from_millis(500),
    });
    let mut config =
        Config::new(NodeId(n), Incarnation(1)).with_entity_type(EntityTypeConfig::new("t"));
    config.membership = Some(s);
    c.start(config);
}

/// Node `n`'s DNS answer: `contacts`.
fn discover(c: &mut Cluster, n: u64, contacts: &[u64]) {
    let contacts = contacts
        .iter()
        .map(|m| SeedNode::from(NodeId(*m)))
        .collect();
    c.input(n, Input::ContactsDiscovered(contacts));
}

/// The clusters among the running members: groups of members whose views share someone.
fn clusters(c: &Cluster) -> Vec<Vec<u64>> {
    let members: Vec<u64> = (c.running().into_iter())
        .filter(|n| c.node(*n).membership_phase() == Some(Phase::Member))
        .collect();
    let mut group: BTreeMap<u64, u64> = members.iter().map(|n| (*n, *n)).collect();
    let find = |group: &BTreeMap<u64, u64>, mut n: u64| {
        while group[&n] != n {
            n = group[&n];
        }
        n
    };
    for n in &members {
        for m in c.node(*n).view().members() {
            let other = m.id.node.0;
            if group.contains_key(&other) {
                let (a, b) = (find(&group, *n), find(&group, other));
                group.insert(a.max(b), a.min(b));
            }
        }
    }
    let mut out: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for n in members {
        out.entry(find(&group, n)).or_default().push(n);
    }
    out.into_values().collect()
}

/// Checks after every step that the members form at most one cluster.
fn one_cluster_at_most(c: &mut Cluster) {
    c.add_check(|c| match clusters(c).as_slice() {
        [] | [_] => Ok(()),
        many => Err(format!("{} clusters: {many:?}", many.len())),
    });
}

/// A cluster whose messages take 1 to `most` ms (drawn from `seed`), checked after every step
/// for two clusters.
fn checked(most: u64, seed: u64) -> Cluster {
    let mut c = Cluster::new();
    c.set_latency(Duration::from_millis(1), Duration::from_millis(most), seed);
    one_cluster_at_most(&mut c);
    c
}

/// Whether every node in `nodes` is an Up member of one cluster.
fn all_up_together(c: &Cluster, nodes: &[u64]) -> bool {
    clusters(c).len() == 1
        && nodes.iter().all(|n| {
            let view = c.node(*n).view();
            nodes.iter().all(|m| {
                view.members()
                    .iter()
                    .any(|x| x.id.node.0 == *m && x.status == MemberStatus::Up)
            })
        })
}

/// Two groups that see only themselves at first (the requirement's case): the group holding a
/// majority forms, the other waits, and joins once it sees everyone.
#[test]
fn two_groups_discovering_each_other_late_form_one_cluster() {
    let mut c = checked(20, 7);
    for n in 1..=5 {
        start(&mut c, n, 3);
    }
    for n in [1, 2, 3] {
        discover(&mut c, n, &[1, 2, 3]);
    }
    for n in [4, 5] {
        discover(&mut c, n, &[4, 5]);
    }
    c.at(15);
    assert_eq!(
        clusters(&c),
        [vec![1, 2, 3]],
        "the majority group formed alone"
    );
    for n in 1..=5 {
        discover(&mut c, n, &[1, 2, 3, 4, 5]);
    }
    c.at(40);
    assert!(all_up_together(&c, &[1, 2, 3, 4, 5]), "{:?}", clusters(&c));
}

/// Akka's rule forms two clusters here: 1 sees {1, 2, 3}, while 2, 4 and 5 see {2, 4, 5} (their
/// DNS answers lag). Every contact is in no cluster and 1 and 2 are each lowest in their set.
/// Here 2's answer names another set: 1 waits; 2 forms; 1 and 3 join 2's cluster.
#[test]
fn a_lagging_dns_answer_does_not_make_two_founders() {
    let mut c = checked(20, 11);
    for n in 1..=5 {
        start(&mut c, n, 3);
    }
    for n in [1, 3] {
        discover(&mut c, n, &[1, 2, 3]);
    }
    for n in [2, 4, 5] {
        discover(&mut c, n, &[2, 4, 5]);
    }
    c.at(15);
    assert_eq!(clusters(&c).len(), 1, "{:?}", clusters(&c));
    assert!(
        c.node(2).membership_phase() == Some(Phase::Member),
        "2 formed (4 and 5 agreed on its set)"
    );
    c.at(40);
    assert!(all_up_together(&c, &[1, 2, 3, 4, 5]), "{:?}", clusters(&c));
}

/// Contacts arriving at random times, per observer, with random start times and latencies:
/// never two clusters, and all five together in the end.
#[test]
fn random_discovery_never_forms_two_clusters() {
    for seed in 0..60 {
        let mut rng = Rng::new(seed);
        let mut c = checked(50, seed);
        // (node, contact) → when the node's DNS first lists the contact (itself at once).
        let mut arrivals: Vec<(u64, u64, u64)> = Vec::new();
        for n in 1..=5 {
            start(&mut c, n, 3);
            for m in 1..=5 {
                let at = if m == n { 0 } else { rng.below(20_000) };
                arrivals.push((at, n, m));
            }
        }
        arrivals.sort_unstable();
        let mut known: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for (at, n, m) in arrivals {
            c.run_until(shoal_core::Instant::ZERO + Duration::from_millis(at));
            let list = known.entry(n).or_default();
            list.push(m);
            let list = list.clone();
            discover(&mut c, n, &list);
        }
        c.at(60);
        assert!(
            all_up_together(&c, &[1, 2, 3, 4, 5]),
            "seed {seed}: {:?}",
            clusters(&c)
        );
    }
}

/// Two groups of drawn sizes, each node's DNS listing only its group until the groups merge at
/// a drawn time (each node hearing of it after a lag of its own), the network split between
/// the groups for a while, and a required count that is a majority of the five: never two
/// clusters, and one of all five once everything settled.
#[test]
fn two_groups_merging_late_across_a_partition_never_form_two_clusters() {
    for seed in 0..60 {
        let mut rng = Rng::new(1_000 + seed);
        let mut c = checked(40, seed);
        let split = 1 + rng.below(4);
        let (first, second): (Vec<u64>, Vec<u64>) = (1..=5).partition(|n| *n <= split);
        let mut order: Vec<u64> = (1..=5).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        for n in order {
            start(&mut c, n, 3);
        }
        for group in [&first, &second] {
            for n in group.iter() {
                discover(&mut c, *n, group);
            }
        }
        let partitioned = rng.below(2) == 0;
        if partitioned {
            c.partition(&first);
        }
        let merge = 2_000 + rng.below(15_000);
        let mut lags: Vec<(u64, u64)> = (1..=5).map(|n| (merge + rng.below(8_000), n)).collect();
        lags.sort_unstable();
        for (at, n) in lags {
            c.run_until(shoal_core::Instant::ZERO + Duration::from_millis(at));
            discover(&mut c, n, &[1, 2, 3, 4, 5]);
        }
        if partitioned {
            c.run_until(c.now() + Duration::from_millis(rng.below(10_000)));
            c.heal();
        }
        let settle = c.now() + Duration::from_secs(40);
        c.run_until(settle);
        assert!(
            all_up_together(&c, &[1, 2, 3, 4, 5]),
            "seed {seed}: groups {first:?} {second:?}, partitioned {partitioned}: {:?}",
            clusters(&c)
        );
    }
}

/// The negative control: a required count that is no majority (2 of 4) lets two groups that
/// never see each other both form, and the check catches it.
#[test]
fn a_required_count_below_a_majority_forms_two_clusters_and_is_caught() {
    let caught = std::panic::catch_unwind(|| {
        let mut c = Cluster::new();
        one_cluster_at_most(&mut c);
        for n in 1..=4 {
            start(&mut c, n, 2);
        }
        for n in [1, 2] {
            discover(&mut c, n, &[1, 2]);
        }
        for n in [3, 4] {
            discover(&mut c, n, &[3, 4]);
        }
        c.at(20);
    });
    let message = caught.expect_err("two clusters formed and the check failed the run");
    let text = message
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(text.contains("2 clusters"), "{text}");
}
