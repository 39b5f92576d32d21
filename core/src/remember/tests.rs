use super::*;

fn id(name: &str) -> EntityId {
    EntityId::from(name)
}

fn ids(names: &[&str]) -> Vec<EntityId> {
    names.iter().map(|n| id(n)).collect()
}

fn at(millis: u64) -> Instant {
    Instant::from_millis(millis)
}

/// The shard of these tests: the only one, so every id maps to it.
const SHARD: ShardId = ShardId(0);

fn start(settings: RememberSettings) -> (Remembered, RememberOut) {
    let mut out = RememberOut::default();
    let remembered = Remembered::new(
        EntityType::from("counter"),
        (SHARD, 1),
        (Epoch(7), false),
        settings,
        &mut out,
    );
    (remembered, out)
}

/// Completes the request in flight (whatever its sequence).
fn done(r: &mut Remembered, now: Instant, completion: StoreCompletion, out: &mut RememberOut) {
    let seq = if r.phase == Phase::Loading { 0 } else { r.seq };
    r.handle_completion(now, seq, completion, out);
}

fn update(seq: u64, started: &[&str], stopped: &[&str]) -> StoreRequest {
    StoreRequest::Update {
        entity_type: EntityType::from("counter"),
        shard: SHARD,
        epoch: Epoch(7),
        seq,
        started: ids(started),
        stopped: ids(stopped),
        dormant: Vec::new(),
    }
}

/// A shard that has loaded `names` (all recovered at once).
fn loaded(names: &[&str]) -> Remembered {
    let (mut r, _) = start(RememberSettings::default());
    let mut out = RememberOut::default();
    done(&mut r, at(0), StoreCompletion::Loaded(ids(names)), &mut out);
    assert_eq!(out.start, ids(names));
    r
}

#[test]
fn a_shard_loads_with_its_epoch_and_recovers_everything_at_once() {
    let (mut r, out) = start(RememberSettings::default());
    assert_eq!(
        out.requests,
        vec![StoreRequest::Load {
            entity_type: EntityType::from("counter"),
            shard: SHARD,
            epoch: Epoch(7)
        }]
    );
    assert!(!r.is_ready());
    let mut out = RememberOut::default();
    done(
        &mut r,
        at(5),
        StoreCompletion::Loaded(ids(&["a", "b"])),
        &mut out,
    );
    assert!(r.is_ready());
    assert_eq!(out.start, ids(&["a", "b"]));
    assert!(out.requests.is_empty());
    assert_eq!(r.next_wakeup(), None);
}

#[test]
fn constant_recovery_starts_n_every_interval() {
    let settings = RememberSettings {
        recovery: RecoveryStrategy::Constant {
            number: 2,
            every: Duration::from_secs(1),
        },
        ..RememberSettings::default()
    };
    let (mut r, _) = start(settings);
    let mut out = RememberOut::default();
    let names = ["a", "b", "c", "d", "e"];
    done(
        &mut r,
        at(0),
        StoreCompletion::Loaded(ids(&names)),
        &mut out,
    );
    assert_eq!(out.start, ids(&["a", "b"]));
    assert_eq!(r.next_wakeup(), Some(at(1_000)));
    let mut out = RememberOut::default();
    r.handle_wakeup(at(999), &mut out);
    assert!(out.start.is_empty(), "not due yet");
    r.handle_wakeup(at(1_000), &mut out);
    assert_eq!(out.start, ids(&["c", "d"]));
    let mut out = RememberOut::default();
    r.handle_wakeup(at(2_000), &mut out);
    assert_eq!(out.start, ids(&["e"]));
    assert_eq!(r.next_wakeup(), None);
}

#[test]
fn one_write_is_in_flight_and_later_changes_are_batched_behind_it() {
    let mut r = loaded(&["old"]);
    let mut out = RememberOut::default();
    assert!(r.record_started(&id("old"), &mut out), "already durable");
    assert!(!r.record_started(&id("a"), &mut out));
    assert_eq!(out.requests, vec![update(1, &["a"], &[])]);
    let mut out = RememberOut::default();
    assert!(!r.record_started(&id("b"), &mut out));
    assert!(!r.record_started(&id("c"), &mut out));
    r.record_stopped(&id("old"), Leaving::Forgotten, &mut out);
    assert!(out.requests.is_empty(), "one write in flight");
    assert!(r.remembers(&id("b")) && !r.remembers(&id("old")));

    done(&mut r, at(1), StoreCompletion::Written, &mut out);
    assert_eq!(out.start, ids(&["a"]), "a's start is durable: it runs");
    assert_eq!(out.requests, vec![update(2, &["b", "c"], &["old"])]);
    let mut out = RememberOut::default();
    done(&mut r, at(2), StoreCompletion::Written, &mut out);
    assert_eq!(out.start, ids(&["b", "c"]));
    assert!(out.requests.is_empty());
    assert!(r.remembers(&id("a")) && !r.remembers(&id("old")));
}

#[test]
fn a_passivation_during_the_write_of_its_start_forgets_it_next() {
    let mut r = loaded(&[]);
    let mut out = RememberOut::default();
    r.record_started(&id("a"), &mut out);
    r.record_stopped(&id("a"), Leaving::Forgotten, &mut out);
    let mut out = RememberOut::default();
    done(&mut r, at(1), StoreCompletion::Written, &mut out);
    assert!(out.start.is_empty(), "stopped before its start was durable");
    assert_eq!(out.requests, vec![update(2, &[], &["a"])]);
    assert!(!r.remembers(&id("a")));
}

#[test]
fn failed_writes_are_retried_with_backoff_and_reported() {
    let mut r = loaded(&[]);
    let mut out = RememberOut::default();
    r.record_started(&id("a"), &mut out);
    let mut out = RememberOut::default();
    done(
        &mut r,
        at(100),
        StoreCompletion::Failed("timeout".into()),
        &mut out,
    );
    assert_eq!(out.failures, vec!["timeout".to_string()]);
    assert!(out.requests.is_empty());
    assert_eq!(r.next_wakeup(), Some(at(300)));
    // Changes made meanwhile join the retried batch; nothing is sent before the retry.
    r.record_started(&id("b"), &mut out);
    assert!(out.requests.is_empty());
    r.handle_wakeup(at(300), &mut out);
    assert_eq!(out.requests, vec![update(2, &["a", "b"], &[])]);
    let mut out = RememberOut::default();
    done(
        &mut r,
        at(310),
        StoreCompletion::Failed("down".into()),
        &mut out,
    );
    assert_eq!(r.next_wakeup(), Some(at(710)), "the delay doubles");
    r.handle_wakeup(at(710), &mut out);
    let mut out = RememberOut::default();
    done(&mut r, at(720), StoreCompletion::Written, &mut out);
    assert_eq!(out.start, ids(&["a", "b"]));
}

#[test]
fn a_failed_load_is_retried_and_the_delay_is_capped() {
    let settings = RememberSettings {
        retry_max: Duration::from_millis(300),
        ..RememberSettings::default()
    };
    let (mut r, _) = start(settings);
    let mut now = 0;
    for expected in [200, 300, 300] {
        let mut out = RememberOut::default();
        done(
            &mut r,
            at(now),
            StoreCompletion::Failed("down".into()),
            &mut out,
        );
        assert_eq!(r.next_wakeup(), Some(at(now + expected)));
        now += expected;
        r.handle_wakeup(at(now), &mut out);
        assert!(matches!(out.requests[..], [StoreRequest::Load { .. }]));
    }
    let mut out = RememberOut::default();
    done(
        &mut r,
        at(now),
        StoreCompletion::Loaded(ids(&["a"])),
        &mut out,
    );
    assert_eq!(out.start, ids(&["a"]));
}

#[test]
fn a_fenced_instance_writes_nothing_more() {
    let mut r = loaded(&["a"]);
    let mut out = RememberOut::default();
    r.record_started(&id("b"), &mut out);
    let mut out = RememberOut::default();
    done(&mut r, at(1), StoreCompletion::Fenced(Epoch(9)), &mut out);
    assert_eq!(r.fenced_by(), Some(Epoch(9)));
    assert!(
        r.is_settled(),
        "a fenced instance has nothing left it could write"
    );
    assert_eq!(out.failures.len(), 1);
    let mut out = RememberOut::default();
    r.record_started(&id("c"), &mut out);
    r.record_stopped(&id("a"), Leaving::Forgotten, &mut out);
    r.handle_wakeup(at(10_000), &mut out);
    assert_eq!(out, RememberOut::default());
    assert_eq!(r.next_wakeup(), None);
}

#[test]
fn a_start_recorded_while_loading_of_a_remembered_entity_runs_once() {
    let (mut r, _) = start(RememberSettings::default());
    let mut out = RememberOut::default();
    assert!(!r.record_started(&id("a"), &mut out));
    assert!(!r.record_started(&id("new"), &mut out));
    assert!(out.requests.is_empty(), "the load is in flight");
    done(
        &mut r,
        at(1),
        StoreCompletion::Loaded(ids(&["a", "b"])),
        &mut out,
    );
    // "a" was remembered: it starts now, once; "b" through recovery; "new" once written.
    assert_eq!(out.start, ids(&["a", "b"]));
    assert_eq!(out.requests, vec![update(1, &["new"], &[])]);
}

#[test]
fn a_completion_without_a_request_is_ignored() {
    let mut r = loaded(&[]);
    let mut out = RememberOut::default();
    done(&mut r, at(1), StoreCompletion::Written, &mut out);
    assert_eq!(out, RememberOut::default());
}

#[test]
fn a_restart_after_a_failed_stop_is_written_again_not_assumed_durable() {
    // The stop may have been applied although its answer was lost.
    let mut r = loaded(&["a"]);
    let mut out = RememberOut::default();
    r.record_stopped(&id("a"), Leaving::Forgotten, &mut out);
    assert_eq!(out.requests, vec![update(1, &[], &["a"])]);
    done(
        &mut r,
        at(1),
        StoreCompletion::Failed("timeout".into()),
        &mut out,
    );
    let mut out = RememberOut::default();
    assert!(
        !r.record_started(&id("a"), &mut out),
        "must be written again"
    );
    r.handle_wakeup(at(1_000), &mut out);
    assert_eq!(out.requests, vec![update(2, &["a"], &[])]);
}

#[test]
fn an_entity_started_or_passivated_before_its_recovery_step_is_not_recovered() {
    let settings = RememberSettings {
        recovery: RecoveryStrategy::Constant {
            number: 1,
            every: Duration::from_secs(1),
        },
        ..RememberSettings::default()
    };
    let (mut r, _) = start(settings);
    let mut out = RememberOut::default();
    done(
        &mut r,
        at(0),
        StoreCompletion::Loaded(ids(&["a", "b", "c"])),
        &mut out,
    );
    assert_eq!(out.start, ids(&["a"]));
    // A message starts "b" (durable already); "c" is passivated before its turn.
    let mut out = RememberOut::default();
    assert!(r.record_started(&id("b"), &mut out));
    r.record_stopped(&id("c"), Leaving::Forgotten, &mut out);
    for second in 1..4 {
        r.handle_wakeup(at(second * 1_000), &mut out);
    }
    assert!(out.start.is_empty(), "{:?}", out.start);
    assert_eq!(out.requests, vec![update(1, &[], &["c"])]);
}

#[test]
fn a_completion_that_does_not_fit_its_request_puts_the_batch_back() {
    let mut r = loaded(&[]);
    let mut out = RememberOut::default();
    r.record_started(&id("a"), &mut out);
    let mut out = RememberOut::default();
    done(&mut r, at(1), StoreCompletion::Loaded(vec![]), &mut out);
    assert_eq!(out.failures.len(), 1);
    assert!(out.requests.is_empty());
    r.handle_wakeup(at(1_000), &mut out);
    assert_eq!(out.requests, vec![update(2, &["a"], &[])]);
}

#[test]
fn a_refusal_at_its_own_epoch_is_not_a_fencing() {
    // Only an older write of this instance landing late could make the store hold a newer
    // sequence than the request's: its outcome is unknown, as after a failure.
    let mut r = loaded(&[]);
    let mut out = RememberOut::default();
    r.record_started(&id("a"), &mut out);
    let mut out = RememberOut::default();
    done(&mut r, at(1), StoreCompletion::Fenced(Epoch(7)), &mut out);
    assert_eq!(r.fenced_by(), None);
    assert_eq!(out.failures.len(), 1);
    r.handle_wakeup(at(1_000), &mut out);
    assert_eq!(out.requests, vec![update(2, &["a"], &[])]);
}

#[test]
fn an_answer_to_an_earlier_request_is_ignored() {
    let mut r = loaded(&[]);
    let mut out = RememberOut::default();
    r.record_started(&id("a"), &mut out);
    let mut out = RememberOut::default();
    r.handle_completion(at(1), 7, StoreCompletion::Written, &mut out);
    assert_eq!(out, RememberOut::default(), "seq 7 is not in flight");
    r.handle_completion(at(1), 1, StoreCompletion::Written, &mut out);
    assert_eq!(out.start, ids(&["a"]));
}

#[test]
fn a_fenced_instance_starts_nothing_and_a_loading_one_with_nothing_recorded_is_settled() {
    let (r, _) = start(RememberSettings::default());
    assert!(
        r.is_settled(),
        "nothing recorded: a handoff need not wait for the load"
    );
    let mut r = loaded(&["a"]);
    let mut out = RememberOut::default();
    r.record_started(&id("b"), &mut out);
    done(&mut r, at(1), StoreCompletion::Fenced(Epoch(12)), &mut out);
    let mut out = RememberOut::default();
    assert!(
        !r.record_started(&id("a"), &mut out),
        "remembered, but fenced"
    );
    assert_eq!(out, RememberOut::default());
}

#[test]
fn loaded_ids_that_map_to_another_shard_are_never_started_here() {
    let mut out = RememberOut::default();
    let kind = EntityType::from("counter");
    let mut r = Remembered::new(
        kind,
        (ShardId(1), 4),
        (Epoch(7), false),
        Default::default(),
        &mut out,
    );
    let names: Vec<EntityId> = (0..20).map(|i| EntityId::from(format!("e{i}"))).collect();
    let (mut mine, elsewhere): (Vec<EntityId>, Vec<EntityId>) =
        (names.iter().cloned()).partition(|id| shard_of(id, 4) == ShardId(1));
    mine.sort();
    assert!(!mine.is_empty() && !elsewhere.is_empty());
    let mut out = RememberOut::default();
    done(&mut r, at(0), StoreCompletion::Loaded(names), &mut out);
    assert_eq!(out.start, mine);
    assert_eq!(out.misfiled, elsewhere, "reported, not started");
    assert!(!r.remembers(&elsewhere[0]), "not counted as this shard's");
}

#[test]
fn a_held_load_waits_for_the_go_and_nothing_is_sent_before_it() {
    let mut out = RememberOut::default();
    let settings = RememberSettings::default();
    let mut r = Remembered::new(
        EntityType::from("counter"),
        (SHARD, 1),
        (Epoch(7), true),
        settings,
        &mut out,
    );
    assert!(out.requests.is_empty(), "held: no load yet");
    r.handle_wakeup(Instant::from_secs(60), &mut out);
    assert!(out.requests.is_empty(), "no timer sends it either");
    r.handle_go(&mut out);
    assert!(
        matches!(
            out.requests.as_slice(),
            [StoreRequest::Load {
                epoch: Epoch(7),
                ..
            }]
        ),
        "{:?}",
        out.requests
    );
    r.handle_go(&mut out);
    assert_eq!(out.requests.len(), 1, "a second go sends nothing more");
}

/// A dormant id sent, then forgotten before the write lands: the next write forgets it; and
/// a dormant id started again is written as started, once.
#[test]
fn a_dormant_id_forgotten_or_started_again_is_written_once_more() {
    let mut out = RememberOut::default();
    let mut r = loaded(&["a", "b"]);
    r.record_stopped(&id("a"), Leaving::Dormant, &mut out);
    let sent = out.requests.pop().expect("a write");
    let StoreRequest::Update {
        stopped, dormant, ..
    } = &sent
    else {
        panic!("{sent:?}");
    };
    assert_eq!((stopped.len(), dormant.as_slice()), (0, &ids(&["a"])[..]));
    assert!(!r.remembers(&id("a")));
    // Dormant again: nothing more to write. Forgotten: a second write, after the first.
    r.record_stopped(&id("a"), Leaving::Dormant, &mut out);
    r.record_stopped(&id("a"), Leaving::Forgotten, &mut out);
    assert!(out.requests.is_empty(), "one write in flight");
    r.handle_completion(Instant::ZERO, 1, StoreCompletion::Written, &mut out);
    assert_eq!(out.requests, [update(2, &[], &["a"])]);
    // b dormant, then started again before its write lands: started, after it.
    out.requests.clear();
    r.handle_completion(Instant::ZERO, 2, StoreCompletion::Written, &mut out);
    r.record_stopped(&id("b"), Leaving::Dormant, &mut out);
    out.requests.clear();
    assert!(
        !r.record_started(&id("b"), &mut out),
        "its start must be written"
    );
    r.handle_completion(Instant::ZERO, 3, StoreCompletion::Written, &mut out);
    assert_eq!(out.requests, [update(4, &["b"], &[])]);
    out.requests.clear();
    r.handle_completion(Instant::ZERO, 4, StoreCompletion::Written, &mut out);
    assert_eq!(out.start, [id("b")]);
}
