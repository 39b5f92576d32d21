use shoal_core::passivation::ReplacementPolicy;

use super::zipf::Zipf;
use super::*;
use crate::rng::SimRng;

fn letters(text: &str) -> Trace {
    let keys = text.split_whitespace().map(str::to_string);
    Trace::from_keys("hand", "", keys, Clone::clone)
}

fn policy(name: &str) -> ReplacementPolicy {
    let (_, policy) = (ReplacementPolicy::ALL.iter())
        .find(|(n, _)| *n == name)
        .expect("a policy of ALL");
    *policy
}

fn rate(trace: &Trace, name: &str, limit: usize) -> f64 {
    policy_hits(trace, policy(name), limit) as f64 / trace.len() as f64
}

#[test]
fn the_optimal_hits_as_worked_by_hand() {
    // The textbook string with three slots. Misses and the evictions the future dictates:
    // 7 0 1 cold; 2 evicts 7 (next at 17); 0 hits; 3 evicts 1 (13); 0 hits; 4 evicts 0 (10);
    // 2 3 hit; 0 evicts 4 (never); 3 2 hit; 1 evicts 3 (never); 2 0 1 hit; 7 evicts 2
    // (never); 0 1 hit. Nine misses, eleven hits.
    let trace = letters("7 0 1 2 0 3 0 4 2 3 0 3 2 1 2 0 1 7 0 1");
    assert_eq!(optimal_hits(&trace, 3), 11);
    // One slot: only immediate repeats hit.
    assert_eq!(optimal_hits(&letters("a a b a a"), 1), 2);
    // Room for everything: every access but the first of each entity hits.
    assert_eq!(optimal_hits(&trace, 10), 20 - 6);
}

#[test]
fn the_optimal_is_never_beaten() {
    let limit = 50;
    for synthetic in Synthetic::ALL {
        let trace = synthetic.trace(limit, 7);
        let optimal = optimal_hits(&trace, limit);
        for (name, policy) in ReplacementPolicy::ALL {
            let hits = policy_hits(&trace, policy, limit);
            assert!(
                hits <= optimal,
                "{name} hits {hits} > optimal {optimal} on {}",
                synthetic.name()
            );
        }
    }
}

/// The hits of a cache that knows the Zipf trace's popularity (not its future): the `limit`
/// most popular entities stay once seen, the best any policy learning from the past can do
/// on a stationary workload. The Zipf trace names each entity by its rank.
fn best_online_hits(trace: &Trace, limit: usize) -> usize {
    let mut seen = std::collections::BTreeSet::new();
    let rank = |entity| -> usize { trace.id(entity).as_str()[1..].parse().expect("e<rank>") };
    (trace.accesses().iter())
        .filter(|&&entity| rank(entity) < limit && !seen.insert(entity))
        .count()
}

#[test]
fn w_tinylfu_nears_the_best_online_cache_on_zipf() {
    for limit in [100, 1000] {
        let trace = Synthetic::Zipf.trace(limit, 1);
        let best = best_online_hits(&trace, limit) as f64 / trace.len() as f64;
        let w_tinylfu = rate(&trace, "w-tinylfu", limit);
        assert!(
            w_tinylfu >= 0.9 * best,
            "limit {limit}: w-tinylfu {w_tinylfu:.4}, best online {best:.4}"
        );
    }
}

/// W-TinyLFU within a tenth of the offline optimal on skewed popularity, at the tool's default
/// limit (at limit 100 it reaches 0.875 of it, and with a population a hundred times the
/// limit 0.89: Belady's foresight is worth more when most entities are seen once).
#[test]
fn w_tinylfu_comes_within_a_tenth_of_the_optimal_on_zipf() {
    let limit = 1000;
    let trace = Synthetic::Zipf.trace(limit, 1);
    let optimal = optimal_hits(&trace, limit) as f64 / trace.len() as f64;
    let w_tinylfu = rate(&trace, "w-tinylfu", limit);
    assert!(
        w_tinylfu >= 0.9 * optimal,
        "w-tinylfu {w_tinylfu:.4}, optimal {optimal:.4}"
    );
}

#[test]
fn most_recently_used_wins_the_loop() {
    let limit = 100;
    let trace = Synthetic::Loop.trace(limit, 1);
    let (lru, mru) = (rate(&trace, "lru", limit), rate(&trace, "mru", limit));
    assert_eq!(
        lru, 0.0,
        "LRU evicts exactly the entity the loop needs next"
    );
    assert!(mru > 0.6, "mru {mru:.3}");
}

#[test]
fn scan_resistant_policies_beat_lru_on_scans() {
    let limit = 100;
    let trace = Synthetic::Scan.trace(limit, 1);
    let lru = rate(&trace, "lru", limit);
    for name in ["slru", "w-tinylfu"] {
        let resistant = rate(&trace, name, limit);
        assert!(
            resistant > lru + 0.05,
            "{name} {resistant:.3}, lru {lru:.3}"
        );
    }
}

#[test]
fn aging_follows_drifting_popularity() {
    let limit = 100;
    let trace = Synthetic::Mixed.trace(limit, 1);
    let lfu = rate(&trace, "lfu", limit);
    for name in ["lfu-aging", "w-tinylfu"] {
        let adapting = rate(&trace, name, limit);
        assert!(adapting > lfu + 0.05, "{name} {adapting:.3}, lfu {lfu:.3}");
    }
}

#[test]
fn the_zipf_sampler_follows_the_harmonic_weights() {
    let (population, draws) = (1000, 200_000);
    let zipf = Zipf::new(population, 1.0);
    let mut rng = SimRng::stream(1, 0);
    let mut counts = vec![0u32; population];
    for _ in 0..draws {
        counts[zipf.sample(&mut rng) as usize] += 1;
    }
    let harmonic: f64 = (1..=population).map(|r| 1.0 / r as f64).sum();
    for rank in [0, 1, 9] {
        let expected = draws as f64 / ((rank + 1) as f64 * harmonic);
        let seen = f64::from(counts[rank]);
        assert!(
            (seen - expected).abs() < 0.05 * expected,
            "rank {rank}: {seen} drawn, {expected:.0} expected"
        );
    }
}

#[test]
fn traces_are_deterministic_per_seed() {
    for synthetic in Synthetic::ALL {
        let (a, b) = (synthetic.trace(20, 3), synthetic.trace(20, 3));
        assert_eq!(a.accesses(), b.accesses(), "{}", synthetic.name());
        assert_eq!(a.len(), 2000);
    }
    let other = Synthetic::Zipf.trace(20, 4);
    assert_ne!(Synthetic::Zipf.trace(20, 3).accesses(), other.accesses());
}

#[test]
fn a_trace_file_names_one_entity_a_line() {
    let dir = std::env::temp_dir().join(format!("shoal-passivation-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let path = dir.join("two.txt");
    std::fs::write(&path, "alpha\n\n  beta \nalpha\r\n").expect("written");
    let trace = Trace::read_file(&path).expect("a valid trace");
    assert_eq!(
        (trace.name(), trace.len(), trace.distinct()),
        ("two.txt", 3, 2)
    );
    assert_eq!(trace.accesses(), [0, 1, 0]);
    assert_eq!(trace.id(1).as_str(), "beta");

    let empty = dir.join("empty.txt");
    std::fs::write(&empty, "\n  \n").expect("written");
    let error = Trace::read_file(&empty).expect_err("no ids");
    assert!(error.contains("no entity ids"), "{error}");

    let missing = dir.join("missing.txt");
    let error = Trace::read_file(&missing).expect_err("unreadable");
    assert!(error.contains("cannot read trace file"), "{error}");
    let error = select(&missing.display().to_string(), 10, 1).expect_err("no such file");
    assert!(error.contains("neither a built-in trace"), "{error}");

    let not_text = dir.join("binary");
    std::fs::write(&not_text, [0xff, 0xfe, 0x00]).expect("written");
    assert!(Trace::read_file(&not_text).is_err());
    std::fs::remove_dir_all(&dir).expect("removed");
}

#[test]
fn the_table_has_a_row_per_policy_and_the_optimal() {
    let traces = select("all", 10, 1).expect("built in");
    let table = compare(&traces, 10).to_string();
    assert!(
        table.contains("| policy | zipf | loop | scan | mixed |"),
        "{table}"
    );
    for (name, _) in ReplacementPolicy::ALL {
        assert!(table.contains(&format!("\n| {name} |")), "{table}");
    }
    assert!(table.contains("\n| optimal |"), "{table}");
}
