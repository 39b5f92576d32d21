//! The holder's side of one lease.

use super::{FencingToken, LeaseAnswer, LeaseCall, LeaseChange, LeaseName, LeaseOwner, LeaseTerms};
use crate::time::{Instant, earliest};

/// Where the holder stands.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
enum State {
    /// Not wanted.
    Released,
    /// Wanted, not held.
    Acquiring,
    /// Held under `token`, safe to act on until `valid_until` (the holder's clock).
    Held {
        token: FencingToken,
        valid_until: Instant,
    },
}

/// One lease, from its holder's side (see the module documentation).
#[derive(Debug)]
pub struct LeaseHolder {
    name: LeaseName,
    owner: LeaseOwner,
    terms: LeaseTerms,
    state: State,
    /// When the acquire call out was sent, if one is.
    in_flight: Option<Instant>,
    /// When the next acquire (or renewal) is due.
    next_call: Option<Instant>,
    /// A release to send (the token it gives up).
    release: Option<FencingToken>,
}

impl LeaseHolder {
    /// The lease `name` for `owner`, not wanted yet.
    pub fn new(name: LeaseName, owner: LeaseOwner, terms: LeaseTerms) -> Self {
        Self {
            name,
            owner,
            terms,
            state: State::Released,
            in_flight: None,
            next_call: None,
            release: None,
        }
    }

    /// The lease is wanted from `now` on (a shard or coordinator is to start).
    pub fn handle_want(&mut self, now: Instant) {
        if self.state == State::Released {
            self.state = State::Acquiring;
            self.next_call = Some(now);
        }
    }

    /// The lease is not wanted any more (what it guarded stopped): it is given up.
    pub fn handle_release(&mut self) {
        if let State::Held { token, .. } = self.state {
            self.release = Some(token);
        }
        self.state = State::Released;
        self.next_call = None;
    }

    /// Gives the lease up for good (what it guarded stopped): the call that releases it, if
    /// it was held. Released, the holder has only that call to send, whatever the time.
    pub fn give_up(&mut self) -> Option<LeaseCall> {
        self.handle_release();
        self.poll_call(Instant::ZERO)
    }

    /// Whether the lease is held (granted, and not yet found lost or released), whatever
    /// the time: its validity is [`LeaseHolder::token`]'s to judge.
    pub fn is_held(&self) -> bool {
        matches!(self.state, State::Held { .. })
    }

    /// The token of the grant held, whatever the time (see [`LeaseHolder::is_held`]).
    pub fn held_token(&self) -> Option<FencingToken> {
        match self.state {
            State::Held { token, .. } => Some(token),
            _ => None,
        }
    }

    /// The token to act under at `now`, if the lease is held and still valid.
    pub fn token(&self, now: Instant) -> Option<FencingToken> {
        match self.state {
            State::Held { token, valid_until } if now < valid_until => Some(token),
            _ => None,
        }
    }

    /// The next call to send at `now`.
    pub fn poll_call(&mut self, now: Instant) -> Option<LeaseCall> {
        if let Some(token) = self.release.take() {
            return Some(LeaseCall::Release {
                name: self.name.clone(),
                owner: self.owner,
                token,
            });
        }
        if self.in_flight.is_some() || self.next_call.is_none_or(|at| at > now) {
            return None;
        }
        self.next_call = None;
        self.in_flight = Some(now);
        Some(LeaseCall::Acquire {
            name: self.name.clone(),
            owner: self.owner,
            ttl: self.terms.ttl,
            sent: now,
        })
    }

    /// The lease it holds or asks for.
    pub fn name(&self) -> &LeaseName {
        &self.name
    }

    /// The store answered the acquire call sent at `sent`; an answer to any other call (one
    /// an earlier holder of this lease on this member sent, or one already taken as failed)
    /// is ignored.
    pub fn handle_answer(
        &mut self,
        now: Instant,
        sent: Instant,
        answer: LeaseAnswer,
    ) -> Option<LeaseChange> {
        if self.in_flight != Some(sent) {
            crate::probe::hit("lease: an answer to another call is ignored");
            return None;
        }
        self.answer(now, answer)
    }

    /// The answer to the call out.
    fn answer(&mut self, now: Instant, answer: LeaseAnswer) -> Option<LeaseChange> {
        let sent = self.in_flight.take()?;
        if self.state == State::Released {
            // Given up meanwhile: a grant that arrives now is given back.
            if let LeaseAnswer::Granted(token) = answer {
                self.release = Some(token);
            }
            return None;
        }
        match answer {
            LeaseAnswer::Granted(token) => {
                let valid_until = sent + self.terms.validity();
                if now >= valid_until {
                    // Answered too late to act on: ask again at once.
                    crate::probe::hit("lease: a grant came too late to act on");
                    self.next_call = Some(now);
                    return self.lose("lease: its validity ran out before a renewal");
                }
                let was = self.state;
                self.state = State::Held { token, valid_until };
                self.next_call = Some(sent + self.terms.renew_every);
                match was {
                    State::Held { token: held, .. } if held == token => None,
                    _ => {
                        crate::probe::hit("lease: acquired");
                        Some(LeaseChange::Acquired(token))
                    }
                }
            }
            LeaseAnswer::Refused | LeaseAnswer::Released => {
                self.next_call = Some(now + self.terms.retry_interval);
                self.lose("lease: a renewal was refused")
            }
            LeaseAnswer::Failed(_) => {
                crate::probe::hit("lease: a call failed");
                self.next_call = Some(now + self.terms.retry_interval);
                self.check_validity(now)
            }
        }
    }

    /// Time passed: a call out too long is taken as failed, and a validity that ran out is
    /// the lease lost.
    pub fn handle_timeout(&mut self, now: Instant) -> Option<LeaseChange> {
        if self
            .in_flight
            .is_some_and(|sent| now >= sent + self.terms.operation_timeout)
        {
            return self.answer(now, LeaseAnswer::Failed("timed out".into()));
        }
        self.check_validity(now)
    }

    /// When [`LeaseHolder::handle_timeout`] or [`LeaseHolder::poll_call`] next has work.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let validity = match self.state {
            State::Held { valid_until, .. } => Some(valid_until),
            _ => None,
        };
        let call = match self.in_flight {
            Some(sent) => Some(sent + self.terms.operation_timeout),
            None => self.next_call,
        };
        earliest(validity, call)
    }

    fn check_validity(&mut self, now: Instant) -> Option<LeaseChange> {
        match self.state {
            State::Held { valid_until, .. } if now >= valid_until => {
                self.lose("lease: its validity ran out before a renewal")
            }
            _ => None,
        }
    }

    fn lose(&mut self, why: &'static str) -> Option<LeaseChange> {
        if !matches!(self.state, State::Held { .. }) {
            return None;
        }
        crate::probe::hit(why);
        self.state = State::Acquiring;
        self.next_call.get_or_insert(Instant::ZERO);
        Some(LeaseChange::Lost)
    }
}
