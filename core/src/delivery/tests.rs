//! Reliable delivery's machines, alone and talking over a lossy, duplicating channel.

use std::time::Duration;

use super::*;
use crate::message::Payload;
use crate::time::Instant;

fn at(ms: u64) -> Instant {
    Instant::ZERO + Duration::from_millis(ms)
}

fn p(n: u64) -> Payload {
    Payload::from(n.to_be_bytes().to_vec())
}

fn settings(window: u32) -> ProducerSettings {
    ProducerSettings {
        initial_window: window,
        max_unconfirmed: 6,
        max_unconfirmed_total: 100,
        resend_after: Duration::from_millis(100),
    }
}

fn drain(producer: &mut Producer, now: Instant) -> Vec<(u64, bool)> {
    std::iter::from_fn(|| producer.poll_transmit(now))
        .map(|t| (t.seq.0, t.resend))
        .collect()
}

#[test]
fn a_producer_sends_what_the_demand_covers_and_completes_sends_as_they_are_confirmed() {
    let mut producer = Producer::new(settings(2), 1, Seq(0));
    for n in 1..=4 {
        assert_eq!(producer.handle_send(at(0), p(n)), Ok(Seq(n)));
    }
    assert_eq!(drain(&mut producer, at(0)), [(1, false), (2, false)]);
    let confirm = Confirm {
        session: 1,
        up_to: Seq(1),
        demand: 3,
        resend: false,
    };
    assert_eq!(producer.handle_confirm(at(10), confirm), [Seq(1)]);
    assert_eq!(
        drain(&mut producer, at(10)),
        [(3, false), (4, false)],
        "demand now covers up to 4"
    );
    assert_eq!(producer.unconfirmed(), 3);
    assert_eq!(producer.confirmed(), Seq(1));
    // The queue is bounded: backpressure instead of unbounded memory.
    for n in 5..=7 {
        producer.handle_send(at(10), p(n)).expect("room");
    }
    assert_eq!(producer.handle_send(at(10), p(8)), Err(WindowFull));
}

#[test]
fn unconfirmed_messages_are_sent_again_after_the_timeout_or_at_once_after_a_move() {
    let mut producer = Producer::new(settings(4), 1, Seq(0));
    for n in 1..=3 {
        producer.handle_send(at(0), p(n)).expect("room");
    }
    assert_eq!(drain(&mut producer, at(0)).len(), 3);
    assert_eq!(producer.poll_timeout(), Some(at(100)));
    assert!(drain(&mut producer, at(99)).is_empty());
    assert_eq!(
        drain(&mut producer, at(100)),
        [(1, true), (2, true), (3, true)]
    );
    producer.handle_moved(at(120));
    assert_eq!(drain(&mut producer, at(120)).len(), 3, "due at once");
    // A gap reported by the entity makes the rest due at once too.
    let gap = Confirm {
        session: 1,
        up_to: Seq(1),
        demand: 4,
        resend: true,
    };
    assert_eq!(producer.handle_confirm(at(130), gap), [Seq(1)]);
    assert_eq!(drain(&mut producer, at(130)), [(2, true), (3, true)]);
}

fn tag(producer: &ProducerId, session: u64, seq: u64, confirmed: u64) -> Tag {
    Tag {
        producer: producer.clone(),
        session,
        seq: Seq(seq),
        confirmed: Seq(confirmed),
    }
}

#[test]
fn a_consumer_applies_each_message_once_in_order_and_its_high_water_survives_a_restart() {
    let a = ProducerId::new("a");
    let mut consumer = Consumer::new(HighWater::default(), 5);
    let second = tag(&a, 1, 2, 0);
    assert_eq!(consumer.handle_message(&second), Verdict::Gap);
    assert_eq!(
        consumer.confirm(&second, Verdict::Gap),
        Some(Confirm {
            session: 1,
            up_to: Seq(0),
            demand: 5,
            resend: true
        })
    );
    assert_eq!(consumer.handle_message(&tag(&a, 1, 1, 0)), Verdict::Apply);
    consumer.processed(&tag(&a, 1, 1, 0));
    assert_eq!(
        consumer.handle_message(&tag(&a, 1, 1, 0)),
        Verdict::Duplicate
    );
    assert_eq!(consumer.handle_message(&second), Verdict::Apply);
    consumer.processed(&second);
    // Stored with the entity's state and read back by its next incarnation.
    let stored = postcard::to_allocvec(consumer.high_water()).expect("encodes");
    let restored: HighWater = postcard::from_bytes(&stored).expect("decodes");
    let again = Consumer::new(restored, 5);
    assert_eq!(again.handle_message(&second), Verdict::Duplicate);
    assert_eq!(again.handle_message(&tag(&a, 1, 3, 0)), Verdict::Apply);
    let b = ProducerId::new("b");
    assert_eq!(
        again.handle_message(&tag(&b, 1, 1, 0)),
        Verdict::Apply,
        "per producer"
    );
}

#[test]
fn a_consumer_without_a_mark_trusts_what_was_confirmed_and_a_newer_session_starts_afresh() {
    let a = ProducerId::new("a");
    // A plain entity's next incarnation knows nothing; the producer had 1..=7 confirmed.
    let mut fresh = Consumer::new(HighWater::default(), 4);
    assert_eq!(fresh.handle_message(&tag(&a, 1, 8, 7)), Verdict::Apply);
    assert_eq!(fresh.handle_message(&tag(&a, 1, 10, 7)), Verdict::Gap);
    fresh.processed(&tag(&a, 1, 8, 7));
    assert_eq!(fresh.handle_message(&tag(&a, 1, 8, 7)), Verdict::Duplicate);
    // The producer restarted without its queue: session 2 numbers from 1 again.
    assert_eq!(fresh.handle_message(&tag(&a, 2, 1, 0)), Verdict::Apply);
    fresh.processed(&tag(&a, 2, 1, 0));
    assert_eq!(
        fresh.high_water().of(&a),
        Mark {
            session: 2,
            seq: Seq(1)
        }
    );
    // The old session's late message is dropped, and nothing is confirmed to it.
    let late = tag(&a, 1, 9, 8);
    assert_eq!(fresh.handle_message(&late), Verdict::Stale);
    assert_eq!(fresh.confirm(&late, Verdict::Stale), None);
    // A producer ignores a confirmation of another session.
    let mut producer = Producer::new(settings(2), 3, Seq(0));
    producer.handle_send(at(0), p(1)).expect("room");
    let other = Confirm {
        session: 2,
        up_to: Seq(1),
        demand: 2,
        resend: false,
    };
    assert!(producer.handle_confirm(at(1), other).is_empty());
    assert_eq!(producer.unconfirmed(), 1);
}

/// A producer and a consumer over a channel that loses a third of the messages and duplicates
/// a tenth, and loses a quarter of the confirmations, with the consumer restarting from its
/// high-water mark halfway: every message is applied exactly once, in order (several seeds).
#[test]
fn over_a_lossy_duplicating_channel_every_message_is_applied_exactly_once_in_order() {
    for seed in 0..20 {
        lossy_run(seed);
    }
}

fn lossy_run(seed: u64) {
    let mut rng = crate::rng::Rng::new(seed);
    let id = ProducerId::new("worker-1");
    let mut producer = Producer::new(settings(3), 1, Seq(0));
    let mut consumer = Consumer::new(HighWater::default(), 3);
    let mut applied: Vec<u64> = Vec::new();
    let mut to_send: u64 = 1;
    let mut confirms: Vec<Confirm> = Vec::new();
    let total = 40;
    let mut now = at(0);
    for step in 0..10_000u64 {
        if applied.len() as u64 == total && producer.unconfirmed() == 0 {
            break;
        }
        while to_send <= total && producer.handle_send(now, p(to_send)).is_ok() {
            to_send += 1;
        }
        while let Some(t) = producer.poll_transmit(now) {
            let copies = match rng.below(10) {
                0..=2 => 0,
                3 => 2,
                _ => 1,
            };
            let sent = tag(&id, 1, t.seq.0, t.confirmed.0);
            for _ in 0..copies {
                let verdict = consumer.handle_message(&sent);
                if verdict == Verdict::Apply {
                    applied.push(u64::from_be_bytes(t.payload.0[..].try_into().unwrap()));
                    consumer.processed(&sent);
                }
                confirms.extend(consumer.confirm(&sent, verdict));
            }
        }
        for confirm in confirms.drain(..) {
            if rng.below(4) != 0 {
                producer.handle_confirm(now, confirm);
            }
        }
        if step == 50 {
            // The entity moves: its next incarnation has only what was stored.
            consumer = Consumer::new(consumer.high_water().clone(), 3);
            producer.handle_moved(now);
        }
        if step == 90 && seed % 2 == 1 {
            // A plain entity moves: its next incarnation has no mark at all, and trusts what
            // the producer says was confirmed.
            consumer = Consumer::new(HighWater::default(), 3);
            producer.handle_moved(now);
        }
        now = producer
            .poll_timeout()
            .unwrap_or(now)
            .max(now + Duration::from_millis(1));
    }
    assert_eq!(applied, (1..=total).collect::<Vec<_>>(), "seed {seed}");
    assert_eq!(
        producer.unconfirmed(),
        0,
        "seed {seed}: every send completed"
    );
}

#[test]
fn resends_stay_within_the_demand_the_entity_granted() {
    let mut producer = Producer::new(settings(4), 1, Seq(0));
    for n in 1..=4 {
        producer.handle_send(at(0), p(n)).expect("room");
    }
    assert_eq!(drain(&mut producer, at(0)).len(), 4, "the initial window");
    // The entity takes one at a time: after its confirmation only one is ever in flight,
    // even when every unconfirmed message is due again.
    let one = Confirm {
        session: 1,
        up_to: Seq(1),
        demand: 1,
        resend: false,
    };
    producer.handle_confirm(at(10), one);
    assert_eq!(producer.poll_timeout(), Some(at(100)));
    assert_eq!(drain(&mut producer, at(100)), [(2, true)]);
    producer.handle_moved(at(150));
    assert_eq!(drain(&mut producer, at(150)), [(2, true)]);
    let two = Confirm {
        up_to: Seq(2),
        ..one
    };
    producer.handle_confirm(at(160), two);
    assert_eq!(
        drain(&mut producer, at(160)),
        [(3, true)],
        "due since the move"
    );
}

#[test]
fn the_resend_wait_doubles_while_nothing_is_confirmed_and_starts_over_when_something_is() {
    let mut producer = Producer::new(settings(2), 1, Seq(0));
    for n in 1..=3 {
        producer.handle_send(at(0), p(n)).expect("room");
    }
    drain(&mut producer, at(0));
    let mut resent_at = Vec::new();
    let mut now = at(0);
    for _ in 0..6 {
        now = producer.poll_timeout().expect("unconfirmed");
        drain(&mut producer, now);
        resent_at.push(now);
    }
    // 100 ms, then twice as long each time, up to 16 times as long.
    assert_eq!(resent_at, [100, 300, 700, 1_500, 3_100, 4_700].map(at));
    let confirm = Confirm {
        session: 1,
        up_to: Seq(1),
        demand: 2,
        resend: false,
    };
    producer.handle_confirm(now, confirm);
    drain(&mut producer, now);
    let next = producer.poll_timeout().expect("unconfirmed");
    drain(&mut producer, next);
    assert_eq!(
        producer.poll_timeout(),
        Some(next + Duration::from_millis(100)),
        "the wait started over"
    );
}

#[test]
fn an_outbox_bounds_what_all_its_entities_hold_unconfirmed_and_times_each() {
    let mut settings = settings(2);
    settings.max_unconfirmed_total = 5;
    let mut outbox = Outbox::new(settings, 7);
    let (a, b) = (crate::EntityId::new("a"), crate::EntityId::new("b"));
    for n in 1..=3 {
        assert_eq!(outbox.handle_send(at(0), &a, p(n)), Ok(Seq(n)));
    }
    assert_eq!(
        outbox.handle_send(at(0), &b, p(1)),
        Ok(Seq(1)),
        "per entity"
    );
    assert_eq!(outbox.handle_send(at(0), &b, p(2)), Ok(Seq(2)));
    assert!(outbox.is_full(&b), "five unconfirmed in all");
    assert_eq!(outbox.handle_send(at(0), &b, p(3)), Err(WindowFull));
    let sent: Vec<(String, u64)> = std::iter::from_fn(|| outbox.poll_transmit(at(0)))
        .map(|(entity, t)| (entity.to_string(), t.seq.0))
        .collect();
    let pairs = |list: &[(&str, u64)]| -> Vec<(String, u64)> {
        list.iter().map(|(e, s)| (e.to_string(), *s)).collect()
    };
    assert_eq!(
        sent,
        pairs(&[("a", 1), ("a", 2), ("b", 1), ("b", 2)]),
        "the window"
    );
    assert_eq!(outbox.poll_timeout(), Some(at(100)));
    let confirm = Confirm {
        session: 7,
        up_to: Seq(2),
        demand: 2,
        resend: false,
    };
    assert_eq!(outbox.handle_confirm(at(50), &a, confirm), [Seq(1), Seq(2)]);
    assert_eq!(outbox.unconfirmed(), 3);
    let next: Vec<_> = std::iter::from_fn(|| outbox.poll_transmit(at(50)))
        .map(|(entity, t)| (entity.to_string(), t.seq.0))
        .collect();
    assert_eq!(next, pairs(&[("a", 3)]));
    // At 100 ms b's two are due again; a's third at 150.
    let resent: Vec<_> = std::iter::from_fn(|| outbox.poll_transmit(at(100)))
        .map(|(entity, t)| (entity.to_string(), t.seq.0))
        .collect();
    assert_eq!(resent, pairs(&[("b", 1), ("b", 2)]));
    assert_eq!(outbox.poll_timeout(), Some(at(150)));
    let streams: Vec<(String, u64)> = (outbox.streams())
        .map(|(entity, producer)| (entity.to_string(), producer.numbered()))
        .collect();
    assert_eq!(streams, pairs(&[("a", 3), ("b", 2)]));
}

#[test]
fn a_message_refused_on_its_way_out_goes_again_soon_without_lengthening_the_wait() {
    let mut outbox = Outbox::new(settings(2), 1);
    let a = crate::EntityId::new("a");
    outbox.handle_send(at(0), &a, p(1)).expect("room");
    assert!(outbox.poll_transmit(at(0)).is_some());
    assert!(outbox.poll_transmit(at(0)).is_none(), "drained");
    assert_eq!(outbox.poll_timeout(), Some(at(100)));
    outbox.handle_refused(at(10), &a, Seq(1));
    assert!(
        outbox.poll_transmit(at(10)).is_none(),
        "not in the same instant"
    );
    assert_eq!(outbox.poll_timeout(), Some(at(35)), "a quarter of the wait");
    let (_, again) = outbox.poll_transmit(at(35)).expect("due");
    assert!(again.resend);
    assert!(outbox.poll_transmit(at(35)).is_none(), "drained");
    assert_eq!(outbox.poll_timeout(), Some(at(135)), "the wait as it was");
}

#[test]
fn refusals_in_a_row_wait_longer_each_time_up_to_the_resend_wait() {
    let mut outbox = Outbox::new(settings(2), 1);
    let a = crate::EntityId::new("a");
    outbox.handle_send(at(0), &a, p(1)).expect("room");
    assert!(outbox.poll_transmit(at(0)).is_some());
    let mut now = at(0);
    let mut waits = Vec::new();
    for _ in 0..5 {
        outbox.handle_refused(now, &a, Seq(1));
        assert!(
            outbox.poll_transmit(now).is_none(),
            "not in the same instant"
        );
        let due = outbox.poll_timeout().expect("due again");
        waits.push((due.as_nanos() - now.as_nanos()) / 1_000_000);
        now = due;
        assert!(outbox.poll_transmit(now).is_some());
    }
    assert_eq!(
        waits,
        [25, 50, 100, 100, 100],
        "doubling, capped at the wait"
    );
}

#[test]
fn a_move_keeps_the_wait_and_a_resend_the_entity_asks_for_starts_it_over() {
    let mut producer = Producer::new(settings(2), 1, Seq(0));
    producer.handle_send(at(0), p(1)).expect("room");
    drain(&mut producer, at(0));
    assert_eq!(drain(&mut producer, at(100)), [(1, true)], "timed out");
    assert_eq!(producer.poll_timeout(), Some(at(300)), "the wait doubled");
    producer.handle_moved(at(150));
    assert_eq!(drain(&mut producer, at(150)), [(1, true)]);
    assert_eq!(producer.poll_timeout(), Some(at(350)), "the wait as it was");
    let failed = Confirm {
        session: 1,
        up_to: Seq(0),
        demand: 2,
        resend: true,
    };
    assert!(producer.handle_confirm(at(160), failed).is_empty());
    assert_eq!(drain(&mut producer, at(160)), [(1, true)]);
    assert_eq!(
        producer.poll_timeout(),
        Some(at(260)),
        "the entity answered: the wait is back at its start"
    );
}

#[test]
fn after_a_failed_write_the_recovered_marks_say_whether_to_confirm_or_ask_again() {
    let a = ProducerId::new("a");
    let message = tag(&a, 2, 3, 1);
    let mut landed = HighWater::default();
    landed.record(
        &a,
        Mark {
            session: 2,
            seq: Seq(3),
        },
    );
    let confirm = Consumer::new(landed, 4).confirm_after_failure(&message);
    let expected = Confirm {
        session: 2,
        up_to: Seq(3),
        demand: 4,
        resend: false,
    };
    assert_eq!(confirm, Some(expected), "the write landed: confirmed");
    let mut lost = HighWater::default();
    lost.record(
        &a,
        Mark {
            session: 2,
            seq: Seq(2),
        },
    );
    let confirm = Consumer::new(lost, 4).confirm_after_failure(&message);
    let again = Confirm {
        up_to: Seq(2),
        resend: true,
        ..expected
    };
    assert_eq!(confirm, Some(again), "it did not: sent again at once");
    let mut newer = HighWater::default();
    newer.record(
        &a,
        Mark {
            session: 3,
            seq: Seq(1),
        },
    );
    let stale = Consumer::new(newer, 4).confirm_after_failure(&message);
    assert_eq!(stale, None, "an older session's: nothing");
}
