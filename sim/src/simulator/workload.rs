//! The simulator sends what the workload draws: messages, `StartEntity` commands and queries,
//! each through a running Up member.

use shoal_core::direct::Sender;
use shoal_core::{EntityId, Input, MemberId};

use crate::events::Ev;
use crate::requests::Asked;

use super::Simulator;

impl Simulator {
    /// One client round (sometimes a burst), then the next one is scheduled.
    pub(crate) fn client_round(&mut self) {
        if !self.workload.is_on() {
            return;
        }
        for _ in 0..self.workload.burst() {
            self.send_one();
        }
        if self.workload.wants_start() {
            self.start_one();
        }
        if self.workload.wants_query() {
            self.query_one();
        }
        let next = self.now + self.workload.pause();
        self.schedule(next, Ev::Client);
    }

    fn send_one(&mut self) {
        self.refresh_senders();
        let Some(sender) = self.workload.pick_sender() else {
            return;
        };
        let entity = self.workload.hot_entity();
        if !self.reliable_send(&entity) {
            self.tell(sender, &entity);
        }
    }

    /// A client asks a random Up member to start a random entity (`StartEntity`); the checker
    /// follows its answer.
    fn start_one(&mut self) {
        self.refresh_senders();
        let Some((sender, entity)) = self.workload.start() else {
            return;
        };
        if let Some(r) = &mut self.remembering {
            r.start_commanded(&entity);
        }
        let request = self
            .requests
            .send(self.now, sender, Asked::Start(entity.clone()));
        let command = shoal_core::Command::StartEntity {
            entity_type: self.ty.clone(),
            entity,
        };
        self.input(sender.node, Input::Command { request, command });
    }

    /// A client asks a random Up member a question (see `Workload::query`).
    fn query_one(&mut self) {
        self.refresh_senders();
        let Some((sender, asked, command)) = self.workload.query(self.ty.clone()) else {
            return;
        };
        let stats = asked == Asked::Stats;
        if matches!(asked, Asked::SetLimit(_)) {
            self.mark("a client changed the active-entity limit");
        }
        let request = self.requests.send(self.now, sender, asked);
        self.input(sender.node, Input::Command { request, command });
        if stats {
            // The region's own view of the same: answered at once, from what it hosts.
            let request = self.requests.send(self.now, sender, Asked::RegionState);
            let command = shoal_core::Command::GetShardRegionState {
                entity_type: self.ty.clone(),
            };
            self.input(sender.node, Input::Command { request, command });
        }
    }

    /// Sends the next sequenced message from `sender` to `entity`: on a direct route if its
    /// member has one, else through the node (which may open one).
    pub(crate) fn tell(&mut self, sender: MemberId, entity: &EntityId) {
        let payload = self.check.send(entity, sender);
        self.remembered_told(entity, &payload);
        let Some(payload) = self.send_direct(sender, entity, payload) else {
            return;
        };
        let input = Input::Tell {
            entity_type: self.ty.clone(),
            entity: entity.clone(),
            payload,
        };
        self.begin_letter(sender, Sender::Local, entity);
        self.input(sender.node, input);
        self.end_letter(sender);
    }
}
