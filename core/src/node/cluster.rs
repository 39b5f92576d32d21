//! The node's side of membership when it manages it itself: membership messages, views handed
//! to the sharding roles when they change, graceful leave (hand off, then exit), and telling
//! the host when this member is out of the cluster.

use crate::effect::{Event, Reply};
use crate::error::CommandError;
use crate::id::{MemberId, RequestId};
use crate::members::MemberStatus;
use crate::membership::Phase;
use crate::message::ClusterMessage;
use crate::node::Node;
use crate::time::Instant;

impl Node {
    pub(super) fn handle_cluster(&mut self, now: Instant, from: MemberId, message: ClusterMessage) {
        let Some(m) = &mut self.membership else {
            self.metrics.rejected += 1;
            tracing::debug!(%from, "membership message, but membership is the host's");
            return;
        };
        m.handle_message(now, from, message, &mut self.rng, &mut self.effects);
    }

    /// `Command::Leave`: this member leaves gracefully. Its regions hand off every shard; once
    /// they have stopped it becomes Exiting, is removed, and [`Event::LeftCluster`] tells the
    /// host it may stop.
    pub(super) fn handle_leave(&mut self, now: Instant, request: RequestId) {
        let Some(m) = &mut self.membership else {
            return self
                .effects
                .reply(request, Err(CommandError::MembershipIsExternal));
        };
        m.leave(now, &mut self.rng, &mut self.effects);
        self.leaving = true;
        for t in self.types.values_mut() {
            t.region.handle_graceful_shutdown(&mut self.effects);
        }
        self.effects.reply(request, Ok(Reply::Accepted));
    }

    /// `Command::LeaveMember` and `Command::Down`: an operator moves `member` to `status`.
    pub(super) fn handle_member_command(
        &mut self,
        now: Instant,
        request: RequestId,
        member: MemberId,
        status: MemberStatus,
    ) {
        let Some(m) = &mut self.membership else {
            return self
                .effects
                .reply(request, Err(CommandError::MembershipIsExternal));
        };
        let result = if m.operator_moves(now, member, status, &mut self.rng, &mut self.effects) {
            Ok(Reply::Accepted)
        } else {
            Err(CommandError::UnknownMember(member))
        };
        self.effects.reply(request, result);
    }

    /// Hands a changed view to the roles, reports a finished handoff of a leaving member, and
    /// tells the host once this member is out.
    pub(super) fn sync_membership(&mut self, now: Instant) {
        let Some(m) = &mut self.membership else {
            return;
        };
        // Asked after every input: this member's own status (a lookup among every member) can
        // only have moved if the state changed. Nearly always nothing changed and nothing is
        // under way: no view to take, no leave to follow, not out.
        let changed = m.may_have_changed();
        if !changed && !self.leaving && matches!(m.phase(), Phase::Joining | Phase::Member) {
            return;
        }
        if let Some(view) = m.take_view(&self.view) {
            self.effects.event(Event::MembershipChanged);
            self.handle_membership(now, view);
            self.deliver_local(now);
        }
        let Some(m) = &mut self.membership else {
            return;
        };
        // Told to leave by another member (`Command::LeaveMember`): hand off, as for `Leave`.
        if !self.leaving && changed && m.status() == Some(MemberStatus::Leaving) {
            self.leaving = true;
            for t in self.types.values_mut() {
                t.region.handle_graceful_shutdown(&mut self.effects);
            }
        }
        if self.leaving && self.types.values().all(|t| t.region.is_stopped()) {
            m.ready_to_exit(now, &mut self.rng, &mut self.effects);
            if let Some(view) = m.take_view(&self.view) {
                self.effects.event(Event::MembershipChanged);
                self.handle_membership(now, view);
                self.deliver_local(now);
            }
        }
        let Some(m) = &self.membership else {
            return;
        };
        let downed = match m.phase() {
            Phase::Downed => true,
            Phase::Removed => false,
            Phase::Joining | Phase::Member => return,
        };
        if !self.left {
            self.left = true;
            self.effects.event(Event::LeftCluster { downed });
        }
    }
}
