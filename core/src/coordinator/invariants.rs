//! The coordinator's internal invariants, checked after every drain in debug and simulator
//! builds ([`crate::Node::check_invariants`]): the wire cannot show a table that disagrees with
//! itself, since the coordinator still answers.

use std::collections::{BTreeMap, BTreeSet};

use crate::coordinator::Coordinator;
use crate::id::{MemberId, ShardId};

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
        let mut table = Table::new(&self.shards);
        let mut count = 0;
        for (region, shards) in &self.regions {
            for shard in shards.iter() {
                let Listing::First { owner } = table.list(*shard) else {
                    return broken(format!("{shard} is listed twice (again under {region})"));
                };
                if owner != Some(region) {
                    return broken(format!(
                        "{shard} is listed under {region}, allocated to {owner:?}"
                    ));
                }
                count += 1;
            }
        }
        if count != self.shards.len() {
            if let Some(shard) = self.shards.keys().find(|s| !table.is_listed(**s)) {
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

/// The allocation table as the check walks the regions' lists: owners by shard id in a vector
/// up to the highest allocated shard, so each listed shard costs an index rather than a map
/// lookup (the simulator checks its coordinators every 100 simulated ms, and a coordinator of
/// many shards made this the bulk of those checks); the map and a set when ids run far above
/// any sane number of shards (a peer may name any shard id).
enum Table<'a> {
    Dense(Vec<Entry<'a>>),
    Sparse {
        shards: &'a BTreeMap<ShardId, MemberId>,
        listed: BTreeSet<ShardId>,
    },
}

/// What listing a shard found.
enum Listing<'a> {
    /// Listed for the first time: allocated to `owner` (`None`: not allocated).
    First { owner: Option<&'a MemberId> },
    /// Listed before, under this or another region.
    Again,
}

/// A shard in [`Table::Dense`].
#[derive(Clone, Copy)]
enum Entry<'a> {
    /// Not allocated, not listed yet.
    Free,
    /// Allocated to this region, not listed yet.
    Owned(&'a MemberId),
    /// Listed under a region.
    Listed,
}

impl<'a> Table<'a> {
    const MAX_DENSE: u32 = 1 << 20;

    fn new(shards: &'a BTreeMap<ShardId, MemberId>) -> Self {
        let highest = shards.keys().next_back().map_or(0, |s| s.0);
        if highest >= Self::MAX_DENSE {
            return Self::Sparse {
                shards,
                listed: BTreeSet::new(),
            };
        }
        let mut entries = vec![Entry::Free; highest as usize + 1];
        for (shard, owner) in shards {
            entries[shard.0 as usize] = Entry::Owned(owner);
        }
        Self::Dense(entries)
    }

    /// Marks `shard` listed, saying whether it was listed before and, if not, its owner.
    fn list(&mut self, shard: ShardId) -> Listing<'a> {
        match self {
            Self::Dense(entries) => match entries.get_mut(shard.0 as usize) {
                // Beyond the highest allocated shard: unallocated (the check stops there).
                None => Listing::First { owner: None },
                Some(entry) => match std::mem::replace(entry, Entry::Listed) {
                    Entry::Free => Listing::First { owner: None },
                    Entry::Owned(owner) => Listing::First { owner: Some(owner) },
                    Entry::Listed => Listing::Again,
                },
            },
            Self::Sparse { shards, listed } => {
                if listed.insert(shard) {
                    Listing::First {
                        owner: shards.get(&shard),
                    }
                } else {
                    Listing::Again
                }
            }
        }
    }

    /// Whether `shard` was listed.
    fn is_listed(&self, shard: ShardId) -> bool {
        match self {
            Self::Dense(entries) => {
                matches!(entries.get(shard.0 as usize), Some(Entry::Listed))
            }
            Self::Sparse { listed, .. } => listed.contains(&shard),
        }
    }
}
