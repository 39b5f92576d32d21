//! The simulated lease store: one service the whole cluster shares (a PostgreSQL row per
//! lease, an etcd key), on true time, with the runtime's semantics (a lease is granted when
//! nobody holds it or its grant has expired, extended for its holder, and a new holder gets a
//! larger fencing token) and a service's failures: latency, failed calls, calls applied whose
//! answer is lost (the caller hears a timeout), and windows when it is unreachable.
//!
//! It is also the oracle of the leases' property: a member acts on a shard (starts or
//! delivers to one of its entities) only while the store's grant to it runs, in true time. A
//! holder whose clock drifts, whose calls are slow or lost, or whose process pauses must
//! stop acting before its grant expires; anyone else is granted the lease only after that.

use std::collections::BTreeMap;
use std::time::Duration;

use shoal_core::lease::{FencingToken, LeaseAnswer, LeaseCall, LeaseName, LeaseOwner};
use shoal_core::{Instant, MemberId};

use crate::options::Lease;
use crate::rng::{SimRng, Stream};

/// A lease as the store holds it.
#[derive(Clone, Copy, Debug)]
struct Grant {
    holder: LeaseOwner,
    token: FencingToken,
    /// When it expires, in true time.
    expiry: Instant,
}

/// A call on its way to the store, with who sent it and how long its answer takes back
/// (`None`: the answer is lost; the caller has heard a timeout).
#[derive(Debug)]
struct Arriving {
    member: MemberId,
    call: LeaseCall,
    reply_after: Option<Duration>,
}

/// The store, what is in flight to and from it, and what it did.
#[derive(Debug)]
pub(crate) struct Leasing {
    options: Lease,
    rng: SimRng,
    grants: BTreeMap<LeaseName, Grant>,
    /// The store's revision: every new holder's token is the next one.
    revision: u64,
    arriving: BTreeMap<(Instant, u64), Arriving>,
    answers: BTreeMap<(Instant, u64), (MemberId, LeaseCall, LeaseAnswer)>,
    next: u64,
    /// When an `Ev::Lease` is scheduled.
    wakeup: Option<Instant>,
    /// Grants to a new holder, and refusals (a holder still in its grant kept it).
    pub(crate) granted: u64,
    pub(crate) refused: u64,
}

/// How long a caller waits for an answer before it takes the call as failed.
const CALL_TIMEOUT: Duration = Duration::from_secs(1);

impl Leasing {
    /// The store of a run with `opts`: its shard leases' store, else a faultless one for
    /// lease-majority downing, else none.
    pub(crate) fn of_run(seed: u64, opts: &crate::options::Options) -> Option<Self> {
        let faultless =
            (opts.cluster.downing == crate::options::Downing::LeaseMajority).then(Lease::faultless);
        let options = opts.lease.clone().or(faultless)?;
        Some(Self::new(seed, &options, opts.duration))
    }

    /// Who the store granted the downing lease to, if that grant ran at `since` or later.
    pub(crate) fn downing_holder(&self, since: Instant) -> Option<MemberId> {
        (self.grants.get(&LeaseName::Downing))
            .filter(|g| g.expiry >= since)
            .map(|g| g.holder.member)
    }

    /// The member holding the downing lease at `now`, else the one holding the most other
    /// running grants (the lowest on a tie), if any: the holder a pause tests.
    pub(crate) fn a_holder(&self, now: Instant) -> Option<MemberId> {
        if let Some(holder) = self.downing_holder(now) {
            return Some(holder);
        }
        let mut held: BTreeMap<MemberId, usize> = BTreeMap::new();
        for grant in self.grants.values().filter(|g| g.expiry >= now) {
            *held.entry(grant.holder.member).or_default() += 1;
        }
        let most = held.values().copied().max()?;
        held.into_iter().find(|&(_, n)| n == most).map(|(m, _)| m)
    }

    /// The store of a run of `seed` with `options`, whose faults end at `fault_end` (an outage
    /// or an isolation is cut short there: liveness is judged after it).
    pub(crate) fn new(seed: u64, options: &Lease, fault_end: Duration) -> Self {
        let mut options = options.clone();
        for (_, to) in &mut options.outages {
            *to = (*to).min(fault_end);
        }
        for (_, _, to) in &mut options.isolations {
            *to = (*to).min(fault_end);
        }
        Self {
            options,
            rng: SimRng::of(seed, Stream::LeaseStore),
            grants: BTreeMap::new(),
            revision: 0,
            arriving: BTreeMap::new(),
            answers: BTreeMap::new(),
            next: 0,
            wakeup: None,
            granted: 0,
            refused: 0,
        }
    }

    fn sequence(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    fn answer(&mut self, at: Instant, member: MemberId, call: LeaseCall, answer: LeaseAnswer) {
        let key = (at, self.sequence());
        self.answers.insert(key, (member, call, answer));
    }

    /// `member` sends `call` at `now`. It reaches the store after half its latency and is
    /// applied then; an acquire's answer takes the other half. A failed call changes nothing;
    /// one whose answer is lost is applied all the same; during an outage nothing is applied.
    /// Every call is answered exactly once (a failure after the caller's timeout, as the
    /// runtime's host answers one).
    pub(crate) fn submit(&mut self, now: Instant, member: MemberId, call: LeaseCall) {
        let during =
            |from: Duration, to: Duration| Instant::ZERO + from <= now && now < Instant::ZERO + to;
        let outage = (self.options.outages.iter()).any(|&(from, to)| during(from, to));
        let isolated = (self.options.isolations.iter())
            .any(|&(node, from, to)| node == member.node.0 && during(from, to));
        if outage || isolated {
            let failed = LeaseAnswer::Failed("lease store unavailable".into());
            self.answer(now + CALL_TIMEOUT, member, call, failed);
            return;
        }
        let latency = self
            .rng
            .duration(Duration::from_millis(1), Duration::from_millis(8));
        if self.rng.chance(self.options.failure_rate) {
            let failed = LeaseAnswer::Failed("lease store error".into());
            self.answer(now + latency, member, call, failed);
            return;
        }
        let reply_after = if self.rng.chance(self.options.lost_rate) {
            let failed = LeaseAnswer::Failed("lease store timeout".into());
            self.answer(now + CALL_TIMEOUT, member, call.clone(), failed);
            None
        } else {
            Some(latency - latency / 2)
        };
        let key = (now + latency / 2, self.sequence());
        let arriving = Arriving {
            member,
            call,
            reply_after,
        };
        self.arriving.insert(key, arriving);
    }

    /// Applies what has arrived by `now` and returns the answers due by then, in time order;
    /// `None` for a stale wakeup (one scheduled before an earlier one was armed, as for the
    /// remember store: polling on it would clear the wakeup armed since).
    pub(crate) fn poll(&mut self, now: Instant) -> Option<Vec<(MemberId, LeaseCall, LeaseAnswer)>> {
        if self.wakeup.is_some_and(|armed| armed > now) {
            return None;
        }
        self.wakeup = None;
        let mut due = Vec::new();
        loop {
            let arrival = self.arriving.first_key_value().map(|(k, _)| *k);
            let answer = self.answers.first_key_value().map(|(k, _)| *k);
            match (arrival, answer) {
                (Some(a), b) if a.0 <= now && b.is_none_or(|b| a.0 <= b.0) => {
                    let (_, arriving) = self.arriving.pop_first().expect("peeked");
                    let answer = self.apply(a.0, &arriving.call);
                    if let Some(after) = arriving.reply_after {
                        self.answer(a.0 + after, arriving.member, arriving.call, answer);
                    }
                }
                (_, Some(b)) if b.0 <= now => {
                    let (_, answer) = self.answers.pop_first().expect("peeked");
                    due.push(answer);
                }
                _ => return Some(due),
            }
        }
    }

    /// The next time `poll` has work, if an `Ev::Lease` must be scheduled for it (none is
    /// scheduled for then or earlier).
    pub(crate) fn arm(&mut self, now: Instant) -> Option<Instant> {
        let arrival = self.arriving.first_key_value().map(|(k, _)| k.0);
        let answer = self.answers.first_key_value().map(|(k, _)| k.0);
        let next = shoal_core::earliest(arrival, answer)?;
        if self.wakeup.is_none_or(|w| next < w || w < now) {
            self.wakeup = Some(next);
            return Some(next);
        }
        None
    }

    fn apply(&mut self, at: Instant, call: &LeaseCall) -> LeaseAnswer {
        match call {
            LeaseCall::Acquire {
                name, owner, ttl, ..
            } => {
                // The negative control's store grants less than it was asked for: its holders
                // act on a validity longer than the grant (as a holder ignoring expiry would).
                let ttl = ttl.mul_f64(self.options.store_ttl_factor);
                let grant = self.grants.get(name).copied();
                // As the runtime's stores: a holder extends its running grant under its token;
                // a new holder, or one whose grant ran out (or was released), gets a new one.
                let token = match grant {
                    Some(g) if g.holder == *owner && at < g.expiry => g.token,
                    Some(g) if at < g.expiry => {
                        self.refused += 1;
                        return LeaseAnswer::Refused;
                    }
                    _ => {
                        self.granted += 1;
                        self.revision += 1;
                        FencingToken(self.revision)
                    }
                };
                let expiry = at + ttl;
                let holder = *owner;
                self.grants.insert(
                    name.clone(),
                    Grant {
                        holder,
                        token,
                        expiry,
                    },
                );
                LeaseAnswer::Granted(token)
            }
            LeaseCall::Release { name, owner, token } => {
                if let Some(g) = self.grants.get_mut(name)
                    && g.holder == *owner
                    && g.token == *token
                {
                    g.expiry = g.expiry.min(at);
                }
                LeaseAnswer::Released
            }
        }
    }

    /// Whether `member` may act on `name` at `now` (true time): the store's grant to it runs.
    /// Otherwise, why not.
    pub(crate) fn check_holder(
        &self,
        now: Instant,
        member: MemberId,
        name: &LeaseName,
    ) -> Result<(), String> {
        match self.grants.get(name) {
            Some(g) if g.holder.member == member && now < g.expiry => Ok(()),
            Some(g) if g.holder.member == member => Err(format!(
                "{member} acted on {name} at {now}, after its grant (token {}) expired at {}",
                g.token.0, g.expiry
            )),
            Some(g) => Err(format!(
                "{member} acted on {name} at {now}, held by {} (token {}) until {}",
                g.holder, g.token.0, g.expiry
            )),
            None => Err(format!("{member} acted on {name} at {now}, never granted")),
        }
    }
}
