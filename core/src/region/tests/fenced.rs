//! A shard instance the store fenced, hosted on its region again (see `Region::fenced_here`).

use super::*;
use crate::remember::StoreCompletion;

/// A registered region of a type that remembers its entities.
fn remembering() -> Fixture {
    Fixture::registered_with(|c| c.remember = Some(Default::default()))
}

/// A registered, remembering region whose instance of shard 1 (epoch 5) the store fenced (at
/// epoch 7) while a letter from member 3 waited in it.
fn fenced_with_a_letter_waiting() -> (Fixture, ShardId) {
    let mut f = remembering();
    let (s1, first) = (ShardId(1), Epoch(5));
    f.recv(
        1,
        Body::HostShard {
            shard: s1,
            epoch: first,
        },
    );
    f.recv(3, forward(1, "older"));
    let fenced = StoreCompletion::Fenced(Epoch(7));
    f.region
        .handle_store_completed(at(0), (s1, first, 0), fenced, &mut f.out);
    f.take();
    (f, s1)
}

/// The instance of `shard` at `epoch` loads no remembered entity, and its first start is
/// written.
fn loads_nothing_remembered(f: &mut Fixture, shard: ShardId, epoch: Epoch) {
    let loaded = StoreCompletion::Loaded(vec![]);
    f.region
        .handle_store_completed(at(0), (shard, epoch, 0), loaded, &mut f.out);
    let written = StoreCompletion::Written;
    f.region
        .handle_store_completed(at(0), (shard, epoch, 1), written, &mut f.out);
}

/// Seed 21052 (oracle membership): letters that waited in a shard instance the store then
/// fenced stay first in line, because the region hosts the shard again for them, even while it
/// shuts down.
#[test]
fn letters_left_by_a_fenced_instance_are_delivered_first_when_it_is_hosted_again() {
    let mut f = remembering();
    let (s1, first, next) = (ShardId(1), Epoch(5), Epoch(9));
    f.recv(
        1,
        Body::HostShard {
            shard: s1,
            epoch: first,
        },
    );
    f.recv(3, forward(1, "older"));
    f.region.handle_graceful_shutdown(&mut f.out);
    f.take();
    let fenced = StoreCompletion::Fenced(Epoch(7));
    f.region
        .handle_store_completed(at(0), (s1, first, 0), fenced, &mut f.out);
    let reported = f.take();
    assert!(
        reported.contains(&send(
            1,
            Body::ShardFenced {
                shard: s1,
                current: Epoch(7)
            }
        )),
        "{reported:?}"
    );
    f.tell(1, "newer");
    f.recv(
        1,
        Body::HostShard {
            shard: s1,
            epoch: next,
        },
    );
    let hosted = f.take();
    assert!(
        hosted.contains(&send(1, Body::ShardStarted { shard: s1 })),
        "hosted while shutting down: {hosted:?}"
    );
    loads_nothing_remembered(&mut f, s1, next);
    let delivered: Vec<Payload> = f
        .take()
        .into_iter()
        .filter_map(|e| match e {
            Effect::Entity(EntityEffect::Deliver { payload, .. }) => Some(payload),
            _ => None,
        })
        .collect();
    assert_eq!(
        delivered,
        [Payload::from(&b"older"[..]), Payload::from(&b"newer"[..])]
    );
}

/// A shutting-down region whose instance the store fenced, with nothing left waiting, still
/// takes the shard back when the coordinator hosts it here again: a refusal would leave it
/// unhosted, since the coordinator already counts this region's shutdown as under way.
#[test]
fn a_fenced_shard_is_hosted_again_while_shutting_down_even_with_nothing_left() {
    let mut f = remembering();
    let s1 = ShardId(1);
    // Another shard keeps the shutdown from completing.
    for shard in [s1, ShardId(3)] {
        let epoch = Epoch(5);
        f.recv(1, Body::HostShard { shard, epoch });
    }
    f.region.handle_graceful_shutdown(&mut f.out);
    let fenced = StoreCompletion::Fenced(Epoch(7));
    f.region
        .handle_store_completed(at(0), (s1, Epoch(5), 0), fenced, &mut f.out);
    f.take();
    f.recv(
        1,
        Body::HostShard {
            shard: s1,
            epoch: Epoch(9),
        },
    );
    let hosted = f.take();
    assert!(
        hosted.contains(&send(1, Body::ShardStarted { shard: s1 })),
        "{hosted:?}"
    );
    // Any other shard is still refused while shutting down.
    f.recv(
        1,
        Body::HostShard {
            shard: ShardId(2),
            epoch: Epoch(9),
        },
    );
    assert_eq!(f.take(), [send(1, Body::GracefulShutdownReq)]);
}

/// Swarm seed 602228: a coordinator that took over between our `ShardFenced` and the
/// re-hosting placed the shard on another region. The letters the fenced instance left came
/// from other regions, which send newer ones to the new home directly: relayed, they would
/// arrive after those. They are dropped and reported; letters told afterwards go to the new
/// home.
#[test]
fn letters_left_by_a_fenced_instance_are_dropped_when_the_shard_moves_elsewhere() {
    let (mut f, s1) = fenced_with_a_letter_waiting();
    let home = Body::ShardHome {
        shard: s1,
        region: m(3),
    };
    assert_eq!(f.recv(1, home), Handled::Accepted);
    assert_eq!(
        f.take(),
        [
            event(Event::DeadLetter {
                entity_type: ty(),
                entity: entity(1),
                payload: Some(Payload::from(&b"older"[..])),
                reason: DeadLetterReason::FencedShardMoved,
            }),
            event(Event::ShardHomeAnswered {
                entity_type: ty(),
                shard: s1,
                home: m(3),
                waited: Duration::ZERO,
            })
        ]
    );
    assert_eq!(f.region.buffered(), 0, "the budget is released");
    f.tell(1, "newer");
    assert_eq!(f.take(), [send(3, forward(1, "newer"))]);
}

/// Rolling-restart seed 5449 (oracle membership), and swarm seed 602228 again: the coordinator
/// the region told of the fencing fails over before hosting the shard here again. The region
/// claims the shard in its registration with the new coordinator, so that no other region gets
/// it, and tells it of the fencing before asking anything: the new coordinator then hosts it
/// here, and the letters keep their place.
#[test]
fn a_new_coordinator_hears_of_a_fenced_shard_whose_letters_wait_here() {
    let (mut f, s1) = fenced_with_a_letter_waiting();
    f.handle_view(at(0), &coordinator_moved());
    let register = Body::Register {
        shards: vec![s1],
        handing_off: vec![],
    };
    assert_eq!(f.take(), [send(4, register)]);
    f.recv(4, Body::RegisterAck);
    let after_ack: Vec<Effect> = f
        .take()
        .into_iter()
        .filter(|e| matches!(e, Effect::Send(_)))
        .collect();
    let fenced = Body::ShardFenced {
        shard: s1,
        current: Epoch(7),
    };
    assert_eq!(after_ack.first(), Some(&send(4, fenced)), "{after_ack:?}");
    assert_eq!(f.region.buffered(), 1, "the letter waits for the shard");
    // Hosted here again: the letter is delivered, not dropped.
    f.recv(
        4,
        Body::HostShard {
            shard: s1,
            epoch: Epoch(9),
        },
    );
    loads_nothing_remembered(&mut f, s1, Epoch(9));
    let delivered = f
        .take()
        .into_iter()
        .any(|e| matches!(e, Effect::Entity(EntityEffect::Deliver { .. })));
    assert!(delivered);
}

/// A persistent type's entity starts with its shard's epoch; a state store refusing its write
/// (a newer epoch) is reported with both epochs, and stops the shard as a fenced instance: its
/// entities are stopped, and once they are, the coordinator hears `ShardFenced`.
#[test]
fn an_entitys_fenced_write_fences_its_shard() {
    let mut f = Fixture::registered_with(|c| c.persistent = true);
    let (s1, epoch, current) = (ShardId(1), Epoch(5), Epoch(9));
    f.recv(1, Body::HostShard { shard: s1, epoch });
    f.tell(1, "m1");
    let started = f.take();
    assert!(
        started.contains(&Effect::Entity(EntityEffect::Start {
            entity_type: ty(),
            entity: entity(1),
            shard: s1,
            epoch,
            lease_token: None,
        })),
        "the entity carries its shard's epoch: {started:?}"
    );
    // A report for an older instance of the shard changes nothing here.
    f.region
        .handle_write_fenced(at(0), entity(1), (Epoch(3), current), &mut f.out);
    let stale = f.take();
    assert!(
        !stale
            .iter()
            .any(|e| matches!(e, Effect::Entity(EntityEffect::Stop { .. }))),
        "{stale:?}"
    );
    f.region
        .handle_write_fenced(at(0), entity(1), (epoch, current), &mut f.out);
    let fenced = f.take();
    assert!(
        fenced.contains(&event(Event::WriteFenced {
            entity_type: ty(),
            entity: entity(1),
            shard: s1,
            epoch,
            current,
        })),
        "{fenced:?}"
    );
    assert!(
        fenced.contains(&Effect::Entity(EntityEffect::Stop {
            entity_type: ty(),
            entity: entity(1),
            reason: StopReason::HandOff,
        })),
        "{fenced:?}"
    );
    f.region
        .handle_entity_stopped(at(0), &entity(1), &mut f.out);
    let stopped = f.take();
    assert!(
        stopped.contains(&send(1, Body::ShardFenced { shard: s1, current })),
        "{stopped:?}"
    );
}

/// A `HostShard` at an epoch below the fence this region's instance met (a resend of the same
/// allocation, whose acknowledgement is slow) starts nothing and asks nothing: it is answered
/// with the fence again. A newer allocation starts the shard.
#[test]
fn a_host_shard_below_a_known_fence_is_answered_with_the_fence() {
    let (mut f, s1) = fenced_with_a_letter_waiting();
    f.recv(
        1,
        Body::HostShard {
            shard: s1,
            epoch: Epoch(5),
        },
    );
    assert_eq!(
        f.take(),
        [send(
            1,
            Body::ShardFenced {
                shard: s1,
                current: Epoch(7)
            }
        )]
    );
    f.recv(
        1,
        Body::HostShard {
            shard: s1,
            epoch: Epoch(9),
        },
    );
    let hosted = f.take();
    assert!(
        hosted.contains(&send(1, Body::ShardStarted { shard: s1 })),
        "{hosted:?}"
    );
}
