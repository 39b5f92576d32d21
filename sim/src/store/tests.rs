//! The simulated store against hand-made request sequences.

use super::*;

fn counter() -> EntityType {
    EntityType::from("counter")
}

fn load(epoch: u64) -> StoreRequest {
    StoreRequest::Load {
        entity_type: counter(),
        shard: ShardId(1),
        epoch: Epoch(epoch),
    }
}

fn write(epoch: u64, started: &[&str], stopped: &[&str]) -> StoreRequest {
    write_seq(epoch, 1, started, stopped)
}

fn write_seq(epoch: u64, seq: u64, started: &[&str], stopped: &[&str]) -> StoreRequest {
    StoreRequest::Update {
        entity_type: counter(),
        shard: ShardId(1),
        epoch: Epoch(epoch),
        seq,
        started: started.iter().map(|s| EntityId::from(*s)).collect(),
        stopped: stopped.iter().map(|s| EntityId::from(*s)).collect(),
        dormant: Vec::new(),
    }
}

fn store(settings: StoreSettings) -> SimStore {
    SimStore::new(settings, SimRng::stream(7, 99))
}

/// Submits `request` at `now` and runs the store until it answers.
fn ask(s: &mut SimStore, now: Instant, request: StoreRequest) -> (Instant, StoreCompletion) {
    match call(s, now, Call::Remember(request)) {
        (at, Answer::Remember(completion)) => (at, completion),
        (_, other) => panic!("a remember request answered {other:?}"),
    }
}

/// Submits `call` at `now` and runs the store until it answers.
fn call(s: &mut SimStore, now: Instant, call: Call) -> (Instant, Answer) {
    let ticket = s.submit(now, MemberId::new(1, 1), call);
    loop {
        let at = s.next_event().expect("an answer is pending");
        let mut answers = s.poll(at).into_iter();
        if let Some((_, answer)) = answers.find(|(t, _)| *t == ticket) {
            return (at, answer);
        }
    }
}

#[test]
fn the_store_passes_every_fencing_case() {
    for case in shoal_core::FENCING_CASES {
        let mut s = store(StoreSettings::default());
        let now = Instant::from_secs(1);
        for (i, &step) in case.steps.iter().enumerate() {
            let (epoch, seq, token, expected) = step;
            let request = match (token, seq) {
                (1.., _) => Call::State(StateCall::Recover {
                    entity_type: counter(),
                    entity: EntityId::from("e"),
                    shard: ShardId(1),
                    epoch: Epoch(epoch),
                    lease_token: shoal_core::FencingCase::claim(step).token,
                }),
                (0, 0) => Call::Remember(load(epoch)),
                (0, _) => Call::Remember(write_seq(epoch, seq, &[], &[])),
            };
            let got = match call(&mut s, now, request).1 {
                Answer::Remember(StoreCompletion::Fenced(current))
                | Answer::State(StateAnswer::Fenced(current)) => Some(current.0),
                Answer::Remember(StoreCompletion::Loaded(_) | StoreCompletion::Written)
                | Answer::State(StateAnswer::Recovered { .. }) => None,
                other => panic!("{}: step {i}: {other:?}", case.name),
            };
            assert_eq!(got, expected, "{}: step {i}", case.name);
        }
    }
}

#[test]
fn writes_apply_and_older_epochs_are_fenced_without_effect() {
    let mut s = store(StoreSettings::default());
    let now = Instant::from_secs(1);
    assert_eq!(ask(&mut s, now, load(2)).1, StoreCompletion::Loaded(vec![]));
    let (at, completion) = ask(&mut s, now, write(2, &["a", "b"], &[]));
    assert_eq!(completion, StoreCompletion::Written);
    assert!(at > now && at <= now + Duration::from_millis(5));
    let stale = ask(&mut s, now, write(1, &["stale"], &["a"])).1;
    assert_eq!(stale, StoreCompletion::Fenced(Epoch(2)));
    assert_eq!(
        ask(&mut s, now, load(1)).1,
        StoreCompletion::Fenced(Epoch(2))
    );
    assert_eq!(s.fenced, 2);
    ask(&mut s, now, write(3, &[], &["b"]));
    assert_eq!(
        s.remembered(&counter(), ShardId(1)),
        vec![EntityId::from("a")]
    );
    assert_eq!(s.epoch(&counter(), ShardId(1)), Epoch(3));
    assert_eq!(s.next_event(), None);
}

#[test]
fn an_outage_fails_every_request_after_the_timeout_and_changes_nothing() {
    let settings = StoreSettings {
        outages: vec![(Instant::from_secs(10), Instant::from_secs(20))],
        ..StoreSettings::default()
    };
    let mut s = store(settings);
    let (at, completion) = ask(&mut s, Instant::from_secs(15), write(1, &["a"], &[]));
    assert_eq!(at, Instant::from_secs(17));
    assert!(matches!(completion, StoreCompletion::Failed(_)));
    assert!(s.remembered(&counter(), ShardId(1)).is_empty());
    let after = ask(&mut s, Instant::from_secs(20), write(1, &["a"], &[]));
    assert_eq!(after.1, StoreCompletion::Written);
}

#[test]
fn a_timed_out_write_can_land_after_the_caller_gave_up_and_after_a_newer_write() {
    let settings = StoreSettings {
        timeout_rate: 1.0,
        ..StoreSettings::default()
    };
    let mut s = store(settings);
    let start = Instant::from_secs(1);
    let first = s.submit(
        start,
        MemberId::new(1, 1),
        Call::Remember(write(1, &["a"], &[])),
    );
    let heard = s.poll(start + Duration::from_secs(2));
    assert!(matches!(heard[..], [(t, Answer::Remember(StoreCompletion::Failed(_)))] if t == first));
    // Whether or not it has landed yet, it lands by twice the timeout.
    s.poll(start + Duration::from_secs(4));
    assert_eq!(
        s.remembered(&counter(), ShardId(1)),
        vec![EntityId::from("a")]
    );
    // A late write applies against what the store holds when it arrives: the newer
    // epoch fences it.
    let mut s = store(StoreSettings {
        timeout_rate: 1.0,
        ..StoreSettings::default()
    });
    s.submit(
        start,
        MemberId::new(1, 1),
        Call::Remember(write(1, &["late"], &[])),
    );
    s.settings.timeout_rate = 0.0;
    s.submit(start, MemberId::new(2, 1), Call::Remember(load(2)));
    s.poll(start + Duration::from_secs(10));
    assert!(s.remembered(&counter(), ShardId(1)).is_empty());
    assert_eq!(s.fenced, 1);
    assert!(s.take_violations().is_empty());
}

#[test]
fn a_late_write_of_an_instance_cannot_undo_its_newer_one() {
    let mut s = store(StoreSettings {
        timeout_rate: 1.0,
        ..StoreSettings::default()
    });
    let start = Instant::from_secs(1);
    s.settings.timeout_rate = 0.0;
    ask(&mut s, start, load(3));
    ask(&mut s, start, write_seq(3, 1, &["a"], &[]));
    s.settings.timeout_rate = 1.0;
    // The stop times out and lands up to two timeouts later; the restart is written first.
    s.submit(
        start,
        MemberId::new(1, 1),
        Call::Remember(write_seq(3, 2, &[], &["a"])),
    );
    s.settings.timeout_rate = 0.0;
    ask(&mut s, start, write_seq(3, 3, &["a"], &[]));
    s.poll(start + Duration::from_secs(10));
    assert_eq!(
        s.remembered(&counter(), ShardId(1)),
        vec![EntityId::from("a")]
    );
    assert_eq!((s.stale, s.fenced), (1, 0));
}

#[test]
fn two_members_loading_one_epoch_is_a_violation_and_the_shards_list_has_epochs() {
    let mut s = store(StoreSettings::default());
    let now = Instant::from_secs(1);
    ask(&mut s, now, load(4));
    ask(&mut s, now, write(4, &["a"], &[]));
    assert!(s.take_violations().is_empty(), "one member, one epoch");
    let ticket = s.submit(now, MemberId::new(2, 1), Call::Remember(load(4)));
    while !s
        .poll(s.next_event().unwrap())
        .iter()
        .any(|(t, _)| *t == ticket)
    {}
    assert_eq!(s.take_violations().len(), 1);
    // A count under which "a" is where it was written: nothing is refiled.
    let number_of_shards = (2..)
        .find(|n| shoal_core::shard_of(&EntityId::from("a"), *n) == ShardId(1))
        .expect("some count maps a to shard 1");
    let listed = ask(
        &mut s,
        now,
        StoreRequest::Shards {
            entity_type: counter(),
            number_of_shards,
        },
    )
    .1;
    assert_eq!(
        listed,
        StoreCompletion::Shards(vec![(ShardId(1), Epoch(4))])
    );
}

/// Remembers `ids` as a shard count of `n` files them, each shard loaded at `epoch`.
fn file(s: &mut SimStore, ids: &[EntityId], n: u32, epoch: u64) {
    let now = Instant::from_secs(1);
    for shard in 0..n {
        let started: Vec<EntityId> = (ids.iter())
            .filter(|id| shoal_core::shard_of(id, n).0 == shard)
            .cloned()
            .collect();
        let (entity_type, shard, epoch) = (counter(), ShardId(shard), Epoch(epoch));
        let load = StoreRequest::Load {
            entity_type: entity_type.clone(),
            shard,
            epoch,
        };
        ask(s, now, load);
        let (seq, stopped) = (1, Vec::new());
        let write = StoreRequest::Update {
            entity_type,
            shard,
            epoch,
            seq,
            started,
            stopped,
            dormant: Vec::new(),
        };
        assert_eq!(ask(s, now, write).1, StoreCompletion::Written);
    }
}

fn shards(s: &mut SimStore, number_of_shards: u32) -> Vec<(ShardId, Epoch)> {
    let read = StoreRequest::Shards {
        entity_type: counter(),
        number_of_shards,
    };
    match ask(s, Instant::from_secs(2), read).1 {
        StoreCompletion::Shards(listed) => listed,
        other => panic!("{other:?}"),
    }
}

#[test]
fn another_number_of_shards_refiles_every_id_and_fences_what_loaded_before() {
    let mut s = store(StoreSettings::default());
    let ids: Vec<EntityId> = (0..40).map(|i| EntityId::from(format!("e{i}"))).collect();
    file(&mut s, &ids, 8, 3);
    assert_eq!(shards(&mut s, 8).len(), 8);
    assert_eq!(s.refiled, 0, "filed under 8 already");

    let listed = shards(&mut s, 5);
    assert!(s.refiled > 0);
    for shard in 0..8 {
        let held = s.remembered(&counter(), ShardId(shard));
        let belong = |id: &EntityId| shoal_core::shard_of(id, 5).0 == shard;
        assert!(held.iter().all(belong), "shard {shard} holds {held:?}");
    }
    let mut all: Vec<EntityId> = (0..8)
        .flat_map(|shard| s.remembered(&counter(), ShardId(shard)))
        .collect();
    all.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(all, expected, "nothing lost, nothing twice");
    // Entries 5 to 7 are empty now, still listed (with their epochs, which fence).
    assert_eq!(listed.len(), 8);
    assert!(listed.iter().all(|(_, epoch)| *epoch == Epoch(4)));
    // An instance that loaded under the old count can no longer write.
    let late = StoreRequest::Update {
        entity_type: counter(),
        shard: ShardId(1),
        epoch: Epoch(3),
        seq: 2,
        started: vec![EntityId::from("x")],
        stopped: Vec::new(),
        dormant: Vec::new(),
    };
    let now = Instant::from_secs(3);
    assert_eq!(ask(&mut s, now, late).1, StoreCompletion::Fenced(Epoch(4)));

    let moved = s.refiled;
    shards(&mut s, 5);
    assert_eq!(s.refiled, moved, "filed under 5 already");
    shards(&mut s, 13);
    let held: Vec<(ShardId, EntityId)> = (0..13)
        .flat_map(|shard| {
            let held = s.remembered(&counter(), ShardId(shard));
            held.into_iter().map(move |id| (ShardId(shard), id))
        })
        .collect();
    assert_eq!(held.len(), ids.len());
    assert!(
        held.iter()
            .all(|(shard, id)| shoal_core::shard_of(id, 13) == *shard)
    );
    assert!(s.take_violations().is_empty());
}

#[test]
fn failures_change_nothing_and_the_same_seed_gives_the_same_answers() {
    let settings = StoreSettings {
        failure_rate: 0.5,
        tail_rate: 0.3,
        ..StoreSettings::default()
    };
    let run = || {
        let mut s = store(settings.clone());
        let answers: Vec<(Instant, StoreCompletion)> = (0..50)
            .map(|i| {
                ask(
                    &mut s,
                    Instant::from_secs(i),
                    write(1, &[&format!("e{i}")], &[]),
                )
            })
            .collect();
        let written = answers
            .iter()
            .filter(|(_, c)| *c == StoreCompletion::Written)
            .count();
        assert_eq!(s.remembered(&counter(), ShardId(1)).len(), written);
        assert!(written > 0 && written < 50, "{written}");
        answers
    };
    assert_eq!(run(), run());
}
