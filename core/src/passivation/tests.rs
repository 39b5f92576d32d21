//! Each policy against hand-worked access sequences.

use super::{ActiveEntities, ReplacementPolicy};
use crate::id::EntityId;

/// Accesses each of `ids` in turn: the victims each access named, in order.
fn run(active: &mut ActiveEntities, ids: &str) -> Vec<String> {
    ids.chars()
        .map(|c| {
            let victims = active.handle_access(&EntityId::new(c.to_string()));
            victims.iter().map(|v| v.as_str().to_owned()).collect()
        })
        .collect()
}

fn names(victims: &[EntityId]) -> Vec<&str> {
    victims.iter().map(EntityId::as_str).collect()
}

#[test]
fn least_recently_used_passivates_the_entity_accessed_longest_ago() {
    let mut lru = ActiveEntities::new(ReplacementPolicy::LeastRecentlyUsed, 3);
    assert_eq!(run(&mut lru, "abcdbe"), ["", "", "", "a", "", "c"]);
    assert_eq!(lru.len(), 3);
    // Lowered to one: the two oldest go, oldest first.
    assert_eq!(names(&lru.set_limit(1)), ["d", "b"]);
    // A stopped entity no longer counts.
    lru.handle_stopped(&EntityId::new("e"));
    assert!(lru.is_empty());
    assert_eq!(run(&mut lru, "fg"), ["", "f"]);
}

#[test]
fn most_recently_used_passivates_the_entity_accessed_last_before_the_newcomer() {
    let mut mru = ActiveEntities::new(ReplacementPolicy::MostRecentlyUsed, 3);
    assert_eq!(run(&mut mru, "abcdae"), ["", "", "", "c", "", "a"]);
    // A loop one larger than the limit: LRU misses every access, MRU keeps most of it.
    let looped = "abcd".repeat(5);
    let misses = |policy| {
        let mut active = ActiveEntities::new(policy, 3);
        let mut misses = 0;
        for c in looped.chars() {
            let id = EntityId::new(c.to_string());
            misses += usize::from(!active.contains(&id));
            active.handle_access(&id);
        }
        misses
    };
    assert_eq!(misses(ReplacementPolicy::LeastRecentlyUsed), 20);
    assert!(misses(ReplacementPolicy::MostRecentlyUsed) <= 9);
}

#[test]
fn segmented_lru_protects_entities_accessed_twice_from_a_scan() {
    let policy = ReplacementPolicy::SegmentedLeastRecentlyUsed {
        protected_percent: 50,
    };
    let mut slru = ActiveEntities::new(policy, 4);
    // a, b, c, d enter probationary; a, b, c are promoted, and protected (two places)
    // demotes a back to probationary's newest end.
    assert_eq!(run(&mut slru, "abcdabc"), ["", "", "", "", "", "", ""]);
    // A scan: each newcomer evicts probationary's oldest (d, then a, then e, ...), never the
    // protected b and c.
    assert_eq!(run(&mut slru, "efgh"), ["d", "a", "e", "f"]);
    assert_eq!(run(&mut slru, "bc"), ["", ""], "b and c stayed active");
    // Lowered to two: the probationary g and h go; protected may keep one, so b (its older)
    // is demoted to probationary, where it goes first when room is needed.
    assert_eq!(names(&slru.set_limit(2)), ["g", "h"]);
    assert_eq!(slru.len(), 2);
    assert_eq!(run(&mut slru, "i"), ["b"]);
}

#[test]
fn least_frequently_used_passivates_the_least_accessed_and_ages_with_dynamic_aging() {
    let lfu = |aging| {
        ActiveEntities::new(
            ReplacementPolicy::LeastFrequentlyUsed {
                dynamic_aging: aging,
            },
            3,
        )
    };
    // Counts a 3, b 2, c 1: c goes first; without aging the newcomers then evict each
    // other, and a, once popular, stays for ever.
    let mut plain = lfu(false);
    assert_eq!(
        run(&mut plain, "aaabbcdefg"),
        ["", "", "", "", "", "", "c", "d", "e", "f"]
    );
    // With dynamic aging each victim's priority becomes the age a newcomer starts from: d
    // enters at 2 and ties with b (b, older, goes); e enters at 3; f evicts d (2); g ties a,
    // e and f at 3, and a, accessed longest ago, ages out.
    let mut aging = lfu(true);
    assert_eq!(
        run(&mut aging, "aaabbcdefg"),
        ["", "", "", "", "", "", "c", "b", "d", "a"]
    );
}

#[test]
fn at_least_one_entity_is_always_allowed_and_an_active_one_is_never_its_own_victim() {
    let mut lru = ActiveEntities::new(ReplacementPolicy::LeastRecentlyUsed, 0);
    assert_eq!(lru.limit(), 1);
    assert_eq!(run(&mut lru, "aab"), ["", "", "a"]);
}

#[test]
fn w_tinylfu_admits_a_newcomer_to_the_main_area_only_if_it_is_more_frequent() {
    // Limit 10: a window of one, a main area of nine.
    let mut tiny = ActiveEntities::new(ReplacementPolicy::WINDOW_TINY_LFU, 10);
    // a..j: each leaves the window for the main area while it has room; j stays in the window.
    assert!(run(&mut tiny, "abcdefghij").iter().all(String::is_empty));
    assert_eq!(tiny.len(), 10);
    // k pushes j out of the window; the main area is full and j (seen once) is no more
    // frequent than its next victim a (seen once): j is passivated, a stays.
    assert_eq!(run(&mut tiny, "k"), ["j"]);
    // k, seen three times, displaces a when l pushes it out of the window.
    assert_eq!(run(&mut tiny, "kkl"), ["", "", "a"]);
    assert!(tiny.contains(&EntityId::new("k")));
    // Lowered to five: the main area's victims go first.
    assert_eq!(names(&tiny.set_limit(5)), ["b", "c", "d", "e", "f"]);
    assert_eq!(tiny.len(), 5);
}

#[test]
fn w_tinylfu_moves_its_window_toward_the_better_hit_rate() {
    let mut tiny = super::composite::Composite::new(10, super::Admission::DEFAULT);
    assert_eq!(tiny.window_ppm(), 10_000, "1 % at first");
    // A period is ten accesses per entity of the limit. All hits after the first: the hit
    // rate rose from nothing, so the window keeps its first direction, down, and stays at
    // its floor.
    let a = EntityId::new("a");
    for _ in 0..100 {
        tiny.access(&a, 10);
    }
    assert_eq!(tiny.window_ppm(), 10_000);
    // A scan of newcomers: no hits, the rate fell by more than the restart threshold, so it
    // turns and grows by the initial step (6.25 % of the limit).
    for n in 0..100 {
        tiny.access(&EntityId::new(format!("s{n}")), 10);
    }
    assert_eq!(tiny.window_ppm(), 72_500);
    // The scan goes on: the rate held (nothing), so it grows again the same way.
    for n in 100..200 {
        tiny.access(&EntityId::new(format!("s{n}")), 10);
    }
    assert_eq!(tiny.window_ppm(), 72_500 + 62_500);
    assert!(tiny.len() <= 10);
}

#[test]
fn the_hill_climber_keeps_its_direction_while_the_hit_rate_holds_and_decays_its_step() {
    let mut climber = super::composite::HillClimber::new(1);
    let period = |climber: &mut super::composite::HillClimber, hits: usize| {
        (0..10).filter_map(|i| climber.record(i < hits)).last()
    };
    assert_eq!(period(&mut climber, 5), Some(-62_500), "50 %: down first");
    assert_eq!(
        period(&mut climber, 3),
        Some(62_500),
        "30 %: the other way, restarted"
    );
    assert_eq!(period(&mut climber, 3), Some(62_500), "held: the same way");
    assert_eq!(
        period(&mut climber, 3),
        Some(61_250),
        "held: a step 2 % shorter"
    );
}
