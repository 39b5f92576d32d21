//! The simulator's side of persistent entities: their recoveries and writes go to the store,
//! its answers come back to them, and a fenced write is reported to the node and ends the
//! incarnation (see `crate::persisting`).

use shoal_core::lease::FencingToken;
use shoal_core::{EntityId, Epoch, Input, MemberId, Payload, ShardId};

use crate::entity_host::Life;
use crate::events::Ev;
use crate::persisting::Next;
use crate::store::{StateAnswer, StateCall};

use super::Simulator;

impl Simulator {
    /// `member` started `entity` in its shard instance of `epoch`, holding the shard's lease
    /// under `lease_token` if the type has shard leases: it recovers first.
    pub(crate) fn persistent_started(
        &mut self,
        member: MemberId,
        entity: &EntityId,
        (shard, epoch, lease_token): (ShardId, Epoch, Option<FencingToken>),
    ) {
        // Asked on every start and delivery: a run without persistence looks nothing up.
        if self.persisting.is_none() {
            return;
        }
        let Some(life) = self.host.running(member, entity) else {
            return;
        };
        let Some(p) = &mut self.persisting else {
            return;
        };
        let call = p.started(life.clone(), shard, (epoch, lease_token));
        self.state_call(life, call);
    }

    /// `member`'s incarnation of `entity` took a message (`ask`: one it answers; `delivery`:
    /// a reliable delivery it confirms): an event to write. The ask given back when the entity
    /// does not persist, to be answered at once.
    pub(crate) fn persistent_handed(
        &mut self,
        member: MemberId,
        entity: &EntityId,
        ask: Option<Payload>,
        delivery: Option<crate::delivering::Reliable>,
    ) -> Option<Payload> {
        if self.persisting.is_none() {
            return ask;
        }
        let Some(life) = self.host.running(member, entity) else {
            return ask;
        };
        let Some(p) = &mut self.persisting else {
            return ask;
        };
        let handed = p.handed(&life, ask, delivery);
        self.persisted_confirmations();
        match handed {
            Ok(Some(call)) => self.state_call(life, call),
            Ok(None) => {}
            Err(ask) => return ask,
        }
        None
    }

    /// Whether `member`'s persistent incarnation of `entity` holds as many messages waiting for
    /// their writes as its mailbox takes.
    pub(crate) fn persistent_mailbox_full(&self, member: MemberId, entity: &EntityId) -> bool {
        let Some(p) = &self.persisting else {
            return false;
        };
        (self.host.running(member, entity)).is_some_and(|life| p.mailbox_full(&life))
    }

    /// The incarnation `life` ended: the asks it had not answered are answered.
    pub(crate) fn persistent_ended(&mut self, life: &Life) {
        let replies = self.persisting.as_mut().map(|p| p.ended(life));
        self.reply_all(life, replies.unwrap_or_default());
    }

    /// `life` answers each of `asks`.
    fn reply_all(&mut self, life: &Life, asks: Vec<Payload>) {
        for payload in asks {
            let reply = Ev::Reply {
                member: life.0,
                entity: life.1.clone(),
                payload,
            };
            self.schedule(self.now, reply);
        }
    }

    /// The store answered `life`'s `call`.
    pub(crate) fn state_answered(&mut self, life: Life, call: StateCall, answer: StateAnswer) {
        let now = self.now;
        match &answer {
            StateAnswer::Recovered {
                from_snapshot: true,
                ..
            } => self.mark("a persistent entity recovered from a snapshot"),
            StateAnswer::Fenced(_) => self.mark("a state store fenced an entity's write"),
            StateAnswer::Conflict(_) => {
                self.mark("a persistent entity's write was out of sequence")
            }
            StateAnswer::Failed(_) => {
                self.mark("a persistent entity's store call failed");
                self.stalls.fault(now);
            }
            _ => {}
        }
        let running = self.persisting.as_ref().is_some_and(|p| p.runs(&life));
        if let (true, StateAnswer::Written, StateCall::Append { entity, ids, .. }) =
            (running, &answer, &call)
        {
            if let Some(r) = &mut self.remembering {
                r.store_mut().acknowledged(entity, ids);
            }
        }
        let Some((next, replies)) = self
            .persisting
            .as_mut()
            .map(|p| p.answered(&life, &call, answer))
        else {
            return;
        };
        self.reply_all(&life, replies);
        self.persisted_confirmations();
        match next {
            Next::Idle => {}
            Next::Call(call) => self.state_call(life, call),
            Next::Fenced { epoch, current } => {
                let (member, entity, _) = life;
                let input = Input::WriteFenced {
                    entity_type: self.ty.clone(),
                    entity: entity.clone(),
                    epoch,
                    current,
                };
                self.input_to(member, input);
                self.stop_fenced(member, &entity);
            }
        }
    }

    /// Sends the confirmations persistent entities owe since the last call.
    fn persisted_confirmations(&mut self) {
        let Some(p) = &mut self.persisting else {
            return;
        };
        let (confirms, recognised) = (p.take_confirms(), p.take_recognised());
        if recognised > 0 {
            self.mark(
                "a message sent again after its entity moved was recognised by its stored mark",
            );
        }
        self.send_confirmations(confirms);
    }

    /// Submits `call` of `life` to the store.
    fn state_call(&mut self, life: Life, call: StateCall) {
        let now = self.now;
        if let Some(r) = &mut self.remembering {
            r.submit_state(now, life, call);
        }
        self.arm_store();
    }
}
