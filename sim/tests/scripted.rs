//! The scripted cluster itself: entity behaviours and their reactions, stops that take a
//! while, latency with FIFO links, the remember store, and checks of the script's own.

use std::time::Duration;

use shoal_core::{EntityId, Event, NodeId, Payload, RememberSettings, StopReason};
use sim::scripted::{
    Cluster, EntityBehaviour, Reaction, StopAnswer, StopPolicy, config, entity_in_shard, member,
    type_config,
};

/// Answers every message with "ack <payload>" to the member the payload names (`"n<k>:..."`),
/// passivates on "bye", and takes 3 s to stop.
struct Echo;

impl EntityBehaviour for Echo {
    fn on_message(&mut self, _: NodeId, _: &EntityId, payload: &Payload) -> Vec<Reaction> {
        let text = String::from_utf8_lossy(&payload.0).into_owned();
        if text == "bye" {
            return vec![Reaction::Passivate];
        }
        let asker: u64 = text[1..text.find(':').expect("n<k>:...")]
            .parse()
            .expect("a node");
        vec![Reaction::Send {
            to: member(asker),
            payload: Payload::from(format!("ack {text}").as_bytes()),
        }]
    }

    fn on_stop(&mut self, _: NodeId, _: &EntityId, _: StopReason) -> StopAnswer {
        StopAnswer::After(Duration::from_secs(3))
    }
}

fn app_messages(c: &Cluster, at: u64) -> Vec<String> {
    (c.events().iter())
        .filter(|(n, _)| n.0 == at)
        .filter_map(|(_, e)| match e {
            Event::AppMessage { payload, .. } => Some(String::from_utf8_lossy(&payload.0).into()),
            _ => None,
        })
        .collect()
}

#[test]
fn entities_react_as_their_behaviour_says() {
    let mut c = Cluster::with_nodes(3, 6);
    c.set_behaviour(Echo);
    let entity = entity_in_shard(2, 6);
    c.tell(3, &entity, "n3:hello");
    c.settle();
    assert_eq!(app_messages(&c, 3), ["ack n3:hello"]);
    assert!(app_messages(&c, 1).is_empty());
    let (home, _) = c.inbox(&entity)[0];

    // Passivation asked by the entity: it stops, but only 3 s later.
    c.tell(3, &entity, "bye");
    c.settle();
    assert_eq!(
        c.alive_on(home),
        std::slice::from_ref(&entity),
        "still stopping"
    );
    c.advance(Duration::from_secs(3));
    assert!(c.alive_on(home).is_empty(), "stopped after 3 s");
    assert!(
        c.trace()
            .iter()
            .any(|l| l.ends_with(&format!("stop {entity} Passivation(Requested)"))),
        "the node stopped it for passivation"
    );
}

#[test]
fn latency_delays_messages_and_keeps_each_link_in_order() {
    let mut c = Cluster::with_nodes(2, 4);
    c.set_latency(Duration::from_millis(1), Duration::from_millis(50), 7);
    let entity = entity_in_shard(1, 4);
    // Allocate the shard first, then send from the other node: every message crosses a link.
    c.tell(1, &entity, "first");
    c.advance(Duration::from_secs(1));
    let home = c.inbox(&entity)[0].0;
    let other = 3 - home;
    for i in 0..50 {
        c.tell(other, &entity, &i.to_string());
    }
    c.settle();
    assert_eq!(
        c.inbox(&entity).len(),
        1,
        "nothing arrives before its latency"
    );
    c.advance(Duration::from_secs(1));
    let inbox: Vec<String> = c.inbox(&entity).into_iter().map(|(_, p)| p).collect();
    let expected: Vec<String> = std::iter::once("first".to_owned())
        .chain((0..50).map(|i| i.to_string()))
        .collect();
    assert_eq!(inbox, expected, "in order, once each");
    let (frames, bytes) = c.wire();
    assert!(
        frames > 0 && bytes > frames,
        "{frames} frames, {bytes} bytes"
    );
}

#[test]
fn remembered_entities_restart_from_the_store_after_a_crash() {
    let remembering = |n| {
        let mut t = type_config(4);
        t.remember = Some(RememberSettings::default());
        config(n, t)
    };
    let mut c = Cluster::new();
    for n in 1..=3 {
        c.add_node(remembering(n));
    }
    c.publish_view();
    c.advance(Duration::from_secs(1));
    let ids: Vec<String> = (0..4).map(|s| entity_in_shard(s, 4)).collect();
    for id in &ids {
        c.tell(1, id, "hello");
    }
    // The starts are written to the store before the entities run.
    c.advance(Duration::from_secs(1));
    let victim = (2..=3)
        .find(|n| !c.alive_on(*n).is_empty())
        .expect("node 2 or 3 hosts an entity");
    let lost = c.alive_on(victim);
    c.crash(victim);
    c.publish_view();
    // After the removal margin the shards move, and their remembered entities start again
    // without being messaged.
    c.advance(Duration::from_secs(60));
    let running: Vec<String> = (1..=3)
        .filter(|n| *n != victim)
        .flat_map(|n| c.alive_on(n))
        .collect();
    for id in &lost {
        assert!(running.contains(id), "{id} runs again: {running:?}");
        assert_eq!(c.inbox(id).len(), 1, "{id} was not messaged again");
    }
}

#[test]
#[should_panic(expected = "no entity runs twice on one node: e")]
fn a_failing_check_of_the_script_stops_the_run_with_the_trace() {
    let mut c = Cluster::with_nodes(2, 4);
    c.set_behaviour(StopPolicy::Immediate);
    c.add_check(|c| match c.alive().next() {
        Some((_, entity)) => Err(format!("no entity runs twice on one node: {entity}")),
        None => Ok(()),
    });
    c.tell(1, &entity_in_shard(0, 4), "x");
    c.settle();
}

#[test]
fn replies_are_typed() {
    let mut c = Cluster::with_nodes(2, 4);
    let entity = entity_in_shard(3, 4);
    let request = c.command(
        2,
        shoal_core::Command::StartEntity {
            entity_type: shoal_core::EntityType::new(sim::scripted::TYPE),
            entity: EntityId::new(entity.as_str()),
        },
    );
    c.settle();
    match c.reply(request) {
        Some(Ok(shoal_core::Reply::EntityStarted {
            entity: started, ..
        })) => {
            assert_eq!(started.as_str(), entity);
        }
        other => panic!("expected EntityStarted, got {other:?}"),
    }
    assert_eq!(c.replies(request).len(), 1, "answered once");
    assert!(c.alive().any(|(_, e)| e.as_str() == entity));
}

/// Entities that tell themselves without end, at no latency: time cannot move.
struct Chatter;

impl EntityBehaviour for Chatter {
    fn on_message(&mut self, _: NodeId, entity: &EntityId, _: &Payload) -> Vec<Reaction> {
        vec![Reaction::Tell {
            entity: entity.clone(),
            payload: Payload::from(&b"again"[..]),
        }]
    }
}

#[test]
#[should_panic(expected = "time stopped moving")]
fn a_run_whose_time_cannot_move_stops_with_the_trace() {
    let mut c = Cluster::with_nodes(2, 4);
    c.set_behaviour(Chatter);
    c.trace_network(false);
    c.tell(1, &entity_in_shard(0, 4), "start");
    c.advance(Duration::from_secs(1));
}
