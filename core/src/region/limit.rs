//! The type's active-entity limit, divided among the shards this region hosts: re-divided
//! whenever a shard starts or finishes stopping here, and when a command changes the limit.

use super::Region;
use crate::effect::{Effects, Reply};
use crate::error::CommandError;
use crate::id::{RequestId, ShardId};
use crate::passivation::share_of_limit;
use crate::time::Instant;

impl Region {
    /// Gives each hosted shard its share of the limit (shards handing off included: their
    /// entities are all stopping, and their share returns to the others once they are gone).
    pub(super) fn divide_entity_limit(&mut self, now: Instant, out: &mut Effects) {
        let Some(limit) = self.entity_limit else {
            return;
        };
        let ids: Vec<ShardId> = self.shards.keys().copied().collect();
        for (index, id) in ids.iter().enumerate() {
            let share = share_of_limit(limit, ids.len(), index);
            if let Some(shard) = self.shards.get_mut(id) {
                shard.set_entity_limit(now, share, out);
            }
            self.touch(*id);
        }
    }

    /// `Command::SetActiveEntityLimit`: the region's limit becomes `limit` from now on, and
    /// shards over their new share passivate what no longer fits.
    pub(crate) fn handle_set_entity_limit(
        &mut self,
        now: Instant,
        request: RequestId,
        limit: usize,
        out: &mut Effects,
    ) {
        let entity_type = self.entity_type.clone();
        let result = match self.entity_limit {
            None => Err(CommandError::NoActiveEntityLimit(entity_type)),
            Some(_) if limit == 0 => Err(CommandError::ZeroActiveEntityLimit(entity_type)),
            Some(_) => {
                self.entity_limit = Some(limit);
                self.divide_entity_limit(now, out);
                Ok(Reply::Accepted)
            }
        };
        out.reply(request, result);
    }

    /// The region's active-entity limit, if the type has one.
    pub(crate) fn entity_limit(&self) -> Option<usize> {
        self.entity_limit
    }
}
