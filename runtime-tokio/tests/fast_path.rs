//! The fast paths: handles send straight into running entities' mailboxes, and so do a
//! connection's readers with a peer's letters. The node's guarantees hold as on the node's
//! path: one node's messages arrive in order and once, across passivations and full
//! mailboxes, from its own handles and from a peer; an entity busy only on the fast path is
//! not idle to the node; asks on it time out and fail as on the node's path.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Op, builder, counter, logs};
use shoal::{AskError, DeadLetterReason, EntityContext, EntityTypeConfig, Node, NodeBuilder};

const ASK: Duration = Duration::from_secs(5);

/// What every incarnation of a logging entity shares with the test.
#[derive(Default)]
struct Log {
    /// Every message handled, in order, by whichever incarnation.
    seen: Mutex<Vec<u64>>,
    /// Incarnations started.
    starts: AtomicU64,
    /// Incarnations stopped gracefully.
    stops: AtomicU64,
}

/// Appends each message to the log; passivates itself after every `passivate_every`th (0:
/// never); sleeps `work` per message.
struct Logger {
    log: Arc<Log>,
    passivate_every: u64,
    work: Duration,
}

impl shoal::Entity for Logger {
    type Message = u64;
    type Reply = usize;

    async fn handle(&mut self, ctx: &mut EntityContext, n: u64) -> usize {
        if !self.work.is_zero() {
            tokio::time::sleep(self.work).await;
        }
        let mut seen = self.log.seen.lock().unwrap();
        seen.push(n);
        if self.passivate_every > 0 && (n + 1) % self.passivate_every == 0 {
            ctx.passivate();
        }
        seen.len()
    }

    async fn on_start(&mut self, _ctx: &mut EntityContext) {
        self.log.starts.fetch_add(1, Ordering::Relaxed);
    }

    async fn on_stop(&mut self, _ctx: &mut EntityContext) {
        self.log.stops.fetch_add(1, Ordering::Relaxed);
    }
}

async fn logging_node(
    config: EntityTypeConfig,
    mailbox: usize,
    passivate_every: u64,
    work: Duration,
) -> (Node, Arc<Log>) {
    let log = Arc::new(Log::default());
    let shared = Arc::clone(&log);
    let node = NodeBuilder::new("test")
        .mailbox_capacity(mailbox)
        .entity(config, move |_| Logger {
            log: Arc::clone(&shared),
            passivate_every,
            work,
        })
        .start()
        .await
        .unwrap();
    (node, log)
}

/// Waits until the log holds `n` messages.
async fn wait_for(log: &Log, n: usize) {
    let waited = tokio::time::timeout(ASK, async {
        while log.seen.lock().unwrap().len() < n {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    waited.await.expect("every message handled in time");
}

/// Waits until the log holds `sent` messages, and checks they are 0..sent, each once, in order.
async fn handled_each_once_in_order(log: &Log, sent: u64) {
    wait_for(log, sent as usize).await;
    let seen = log.seen.lock().unwrap().clone();
    if let Some(at) = (0..seen.len()).find(|&i| seen[i] != i as u64) {
        let around = &seen[at.saturating_sub(5)..(at + 10).min(seen.len())];
        panic!("out of order or duplicated at {at}: {around:?}");
    }
    assert_eq!(seen.len() as u64, sent, "more than were sent");
}

/// Waits until the entity passivated at least once. How often depends on timing: passivation
/// asks that come while a stop is under way merge, more so on a loaded machine, where the
/// entity handles more before the stop lands.
async fn passivated(log: &Log) {
    let stopped = tokio::time::timeout(ASK, async {
        while log.stops.load(Ordering::Relaxed) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    stopped.await.expect("the entity passivated along the way");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_nodes_messages_arrive_in_order_and_once_across_passivations() {
    logs();
    let (node, log) = logging_node(
        EntityTypeConfig::new("log"),
        1024,
        PASSIVATE_EVERY,
        Duration::ZERO,
    )
    .await;
    let region = node.region::<Logger>("log").unwrap();
    let entity = region.entity_ref("one");
    const SENT: u64 = 3_000;
    const PASSIVATE_EVERY: u64 = 101;
    for n in 0..SENT {
        // Fresh handles now and then: they share the node's route to the entity.
        let handle = match n % 500 {
            0 => region.entity_ref("one"),
            _ => entity.clone(),
        };
        if n % 10 == 9 {
            // Asks take the same route as tells, and keep their place among them; waiting
            // for their reply, the sender lets the host catch up.
            handle.ask(&n, ASK).await.unwrap();
        } else {
            handle.tell(&n).await.unwrap();
        }
    }
    handled_each_once_in_order(&log, SENT).await;
    let stats = node.stats().await.unwrap();
    // A sender faster than the host stays on the node's path while its letters queue up
    // behind a stop; it is back on the fast path once the host has caught up.
    let direct = stats.direct_deliveries;
    assert!(direct > SENT / 2, "only {direct} went on the fast path");
    passivated(&log).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peers_messages_arrive_in_order_and_once_across_passivations() {
    logs();
    const PASSIVATE_EVERY: u64 = 101;
    let (host, log) = logging_node(
        EntityTypeConfig::new("log"),
        1024,
        PASSIVATE_EVERY,
        Duration::ZERO,
    )
    .await;
    // A proxy sends: every message crosses the connection to the hosting node.
    let proxy = NodeBuilder::new("test")
        .seed_nodes([host.address().to_string()])
        .proxy::<Logger>(EntityTypeConfig::new("log"))
        .start()
        .await
        .unwrap();
    let entity = proxy.region::<Logger>("log").unwrap().entity_ref("one");
    const SENT: u64 = 3_000;
    for n in 0..SENT {
        if n % 10 == 9 {
            // Waiting for a reply now and then lets the hosting node's host catch up.
            entity.ask(&n, ASK).await.unwrap();
        } else {
            entity.tell(&n).await.unwrap();
        }
    }
    handled_each_once_in_order(&log, SENT).await;
    // The hosting node's handles sent nothing: what went direct there, its reader delivered.
    let direct = host.stats().await.unwrap().direct_deliveries;
    assert!(
        direct > SENT / 2,
        "only {direct} went on the reader's fast path"
    );
    passivated(&log).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_mailbox_dead_letters_what_it_refuses_and_the_rest_keeps_its_order() {
    logs();
    let (node, log) =
        logging_node(EntityTypeConfig::new("log"), 4, 0, Duration::from_millis(1)).await;
    let mut events = node.events();
    let entity = node.region::<Logger>("log").unwrap().entity_ref("slow");
    entity.ask(&0, ASK).await.unwrap();
    const SENT: u64 = 400;
    for n in 1..SENT {
        entity.tell(&n).await.unwrap();
    }
    // The last one waits its turn behind whatever was accepted.
    let mut attempts = 0;
    let handled = loop {
        attempts += 1;
        match entity.ask(&SENT, ASK).await {
            Ok(handled) => break handled,
            Err(AskError::DeadLetter(DeadLetterReason::MailboxFull)) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(other) => panic!("unexpected {other:?}"),
        }
    };
    let seen = log.seen.lock().unwrap().clone();
    assert_eq!(handled, seen.len());
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "out of order: {seen:?}"
    );
    let mut refused = 0;
    while let Ok(event) = events.try_recv() {
        if let shoal::NodeEvent::Sharding(shoal::Event::DeadLetter { reason, .. }) = event {
            assert_eq!(reason, DeadLetterReason::MailboxFull);
            refused += 1;
        }
    }
    assert!(refused > 0, "a mailbox of 4 refused some of {SENT}");
    // Each message was handled or refused with an event, once: the first ask, the tells,
    // and every attempt of the last ask.
    assert_eq!(seen.len() + refused, SENT as usize + attempts);
    assert!(node.stats().await.unwrap().direct_deliveries > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entity_busy_only_on_the_fast_path_is_not_idle_to_the_node() {
    logs();
    let mut config = EntityTypeConfig::new("log");
    config.passivate_idle_after = Some(Duration::from_millis(400));
    let (node, log) = logging_node(config, 64, 0, Duration::ZERO).await;
    let entity = node.region::<Logger>("log").unwrap().entity_ref("busy");
    // Three idle timeouts' worth of traffic, every message but the first on the fast path.
    for n in 0..60 {
        entity.tell(&n).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    wait_for(&log, 60).await;
    assert_eq!(
        log.starts.load(Ordering::Relaxed),
        1,
        "never passivated while busy"
    );
    assert!(node.stats().await.unwrap().direct_deliveries >= 55);
    // Idle now: passivated after the timeout (the shard looks every half of it).
    let stopped = tokio::time::timeout(ASK, async {
        while log.stops.load(Ordering::Relaxed) == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    stopped.await.expect("passivated once idle");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asks_on_the_fast_path_time_out_fail_on_panics_and_count_late_replies() {
    logs();
    let node = builder(&[]).start().await.unwrap();
    let counter = counter(&node, "direct");
    // The first message opens the route; the others take it.
    assert_eq!(counter.ask(&Op::Add(1), ASK).await, Ok(1));
    let before = node.stats().await.unwrap();
    let asked = counter
        .ask(&Op::Sleep(300), Duration::from_millis(50))
        .await;
    assert_eq!(asked, Err(AskError::Timeout));
    assert_eq!(
        counter.ask(&Op::Panic, ASK).await,
        Err(AskError::EntityPanicked)
    );
    assert_eq!(
        counter.ask(&Op::Add(2), ASK).await,
        Ok(2),
        "restarted afresh"
    );
    let after = node.stats().await.unwrap();
    assert!(after.direct_deliveries >= before.direct_deliveries + 3);
    assert_eq!(
        after.late_replies,
        before.late_replies + 1,
        "the slow reply"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asks_in_flight_together_arrive_in_the_order_they_were_sent() {
    logs();
    let (node, log) = logging_node(EntityTypeConfig::new("log"), 1024, 97, Duration::ZERO).await;
    let entity = node.region::<Logger>("log").unwrap().entity_ref("many");
    const ROUNDS: u64 = 40;
    const IN_FLIGHT: u64 = 50;
    for round in 0..ROUNDS {
        // Sent in the order first polled, which is the order listed; the entity passivates
        // every 97 messages, so rounds cross the switch between the node's path and the
        // fast path both ways.
        let asks = (0..IN_FLIGHT).map(|i| entity.ask_owned(round * IN_FLIGHT + i));
        for answer in futures_util::future::join_all(asks).await {
            answer.unwrap();
        }
    }
    handled_each_once_in_order(&log, ROUNDS * IN_FLIGHT).await;
    let direct = node.stats().await.unwrap().direct_deliveries;
    assert!(
        direct > ROUNDS * IN_FLIGHT / 5,
        "only {direct} on the fast path"
    );
    passivated(&log).await;
}

/// An ask that owns its message, to put many in flight.
trait AskOwned {
    fn ask_owned(&self, n: u64) -> impl Future<Output = Result<usize, AskError>>;
}

impl AskOwned for shoal::EntityRef<Logger> {
    async fn ask_owned(&self, n: u64) -> Result<usize, AskError> {
        self.ask(&n, ASK).await
    }
}
