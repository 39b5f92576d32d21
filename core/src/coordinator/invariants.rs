//! The coordinator's internal invariants, checked after every drain in debug and simulator
//! builds ([`crate::Node::check_invariants`]): the wire cannot show a table that disagrees with
//! itself, since the coordinator still answers.

use std::collections::BTreeSet;

use crate::coordinator::Coordinator;
use crate::id::ShardId;

impl Coordinator {
    /// The table (shard → region) and the regions' lists (region → shards) are one relation:
    /// every allocated shard is in its region's list once, no list holds a shard allocated
    /// elsewhere or not at all, and shards awaiting an acknowledgement or handed off are
    /// allocated.
    pub(crate) fn check_invariants(&self) -> Result<(), String> {
        let broken = |what: String| {
            Err(format!(
                "coordinator {} of {}: {what}",
                self.me, self.entity_type
            ))
        };
        let highest = self.shards.keys().next_back().map_or(0, |s| s.0);
        let mut listed = Listed::new(highest);
        let mut count = 0;
        for (region, shards) in &self.regions {
            for shard in shards.iter() {
                if listed.contains(*shard) {
                    return broken(format!("{shard} is listed twice (again under {region})"));
                }
                let owner = self.shards.get(shard);
                if owner != Some(region) {
                    return broken(format!(
                        "{shard} is listed under {region}, allocated to {owner:?}"
                    ));
                }
                listed.insert(*shard);
                count += 1;
            }
        }
        if count != self.shards.len() {
            if let Some(shard) = self.shards.keys().find(|s| !listed.contains(**s)) {
                return broken(format!("{shard} is allocated but in no region's list"));
            }
        }
        if let Some(shard) = self.unacked.keys().find(|s| !self.shards.contains_key(s)) {
            return broken(format!(
                "{shard} awaits an acknowledgement but is not allocated"
            ));
        }
        if let Some(shard) = self.handoffs.keys().find(|s| !self.shards.contains_key(s)) {
            return broken(format!("{shard} is being handed off but is not allocated"));
        }
        Ok(())
    }
}

/// The shards found listed so far: bits up to the highest allocated shard (every shard inserted
/// is allocated, checked first), or a set when that is far above any sane number of shards (a
/// peer may name any shard id).
enum Listed {
    Bits(Vec<u64>),
    Set(BTreeSet<ShardId>),
}

impl Listed {
    /// Bits for up to a million shards (128 KiB); a set beyond.
    const MAX_BITS: u32 = 1 << 20;

    fn new(highest: u32) -> Self {
        if highest < Self::MAX_BITS {
            Self::Bits(vec![0; highest as usize / 64 + 1])
        } else {
            Self::Set(BTreeSet::new())
        }
    }

    fn contains(&self, shard: ShardId) -> bool {
        match self {
            Self::Bits(words) => {
                (words.get(shard.0 as usize / 64)).is_some_and(|w| w & (1 << (shard.0 % 64)) != 0)
            }
            Self::Set(set) => set.contains(&shard),
        }
    }

    /// Records `shard` (an allocated one, so within the bits).
    fn insert(&mut self, shard: ShardId) {
        match self {
            Self::Bits(words) => {
                if let Some(w) = words.get_mut(shard.0 as usize / 64) {
                    *w |= 1 << (shard.0 % 64);
                }
            }
            Self::Set(set) => {
                set.insert(shard);
            }
        }
    }
}
