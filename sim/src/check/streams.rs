//! The checker's per-(entity, sender) streams: kept in the order they began, and found through
//! a row per entity indexed by the sender's node number. The checker looks a stream up for
//! every message sent and delivered; a sorted list of an entity's senders took a binary search
//! over several cache lines there (a hundred senders an entity at 100 nodes), a row takes one
//! read. A node's later incarnations (restarts) share its row slot with the first, so the rare
//! streams of theirs are kept in a map beside. Rows are indexed as the simulator's other
//! per-address tables are ([`crate::nodes::index`]).

use std::collections::BTreeMap;

use shoal_core::MemberId;

use super::{Ent, Stream};
use crate::nodes::index;

/// A stream's key: the entity and the member that sends to it.
pub(super) type StreamKey = (Ent, MemberId);

/// A row slot with no stream.
const EMPTY: u32 = u32::MAX;

/// Every stream, in the order they began, with the index that finds them.
#[derive(Debug, Default)]
pub(super) struct Streams {
    /// The streams, in the order they began (the end-of-run report walks them).
    begun: Vec<(StreamKey, Stream)>,
    /// Per entity number: per sender node number, the index in `begun` of the first stream
    /// from that node (whatever its incarnation), or `EMPTY`.
    rows: Vec<Vec<u32>>,
    /// Streams whose row slot holds another's (a later incarnation of the node).
    others: BTreeMap<StreamKey, u32>,
}

impl Streams {
    /// The stream from `sender` to `ent`, if one began.
    pub(super) fn get(&self, ent: Ent, sender: MemberId) -> Option<&Stream> {
        let at = self.find(ent, sender)?;
        Some(&self.begun[at].1)
    }

    /// The stream from `sender` to `ent`, begun now if there is none.
    pub(super) fn get_or_begin(&mut self, ent: Ent, sender: MemberId) -> &mut Stream {
        let at = match self.find(ent, sender) {
            Some(at) => at,
            None => self.begin(ent, sender),
        };
        &mut self.begun[at].1
    }

    /// Every stream, in the order they began.
    pub(super) fn iter(&self) -> impl Iterator<Item = &(StreamKey, Stream)> + '_ {
        self.begun.iter()
    }

    fn find(&self, ent: Ent, sender: MemberId) -> Option<usize> {
        let slot = self.row_slot(ent, sender).unwrap_or(EMPTY);
        if slot != EMPTY && self.begun[slot as usize].0 == (ent, sender) {
            return Some(slot as usize);
        }
        self.others.get(&(ent, sender)).map(|&at| at as usize)
    }

    fn row_slot(&self, ent: Ent, sender: MemberId) -> Option<u32> {
        self.rows
            .get(ent.0 as usize)?
            .get(index(sender.node))
            .copied()
    }

    fn begin(&mut self, ent: Ent, sender: MemberId) -> usize {
        let at = self.begun.len();
        let slot = u32::try_from(at)
            .ok()
            .filter(|&i| i != EMPTY)
            .expect("fewer than 2^32 - 1 streams");
        self.begun.push(((ent, sender), Stream::default()));
        let (e, node) = (ent.0 as usize, index(sender.node));
        if e >= self.rows.len() {
            self.rows.resize_with(e + 1, Vec::new);
        }
        let row = &mut self.rows[e];
        if node >= row.len() {
            row.resize(node + 1, EMPTY);
        }
        if row[node] == EMPTY {
            row[node] = slot;
        } else {
            self.others.insert((ent, sender), slot);
        }
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(node: u64, incarnation: u64) -> MemberId {
        MemberId::new(node, incarnation)
    }

    #[test]
    fn each_key_finds_its_own_stream_whatever_shares_its_row_slot() {
        let mut streams = Streams::default();
        let keys = [
            (Ent(3), member(7, 1)),
            (Ent(3), member(7, 2)), // a later incarnation: same row slot
            (Ent(3), member(2, 1)),
            (Ent(0), member(7, 1)),
            (Ent(3), member(70_000, 1)), // a long row
            (Ent(3), member(7, 3)),
        ];
        for (n, &(ent, sender)) in keys.iter().enumerate() {
            assert!(streams.get(ent, sender).is_none(), "{n} not begun yet");
            streams.get_or_begin(ent, sender).sent = n as u64 + 10;
        }
        for (n, &(ent, sender)) in keys.iter().enumerate() {
            assert_eq!(
                streams.get(ent, sender).map(|s| s.sent),
                Some(n as u64 + 10)
            );
            assert_eq!(streams.get_or_begin(ent, sender).sent, n as u64 + 10);
        }
        let order: Vec<StreamKey> = streams.iter().map(|(key, _)| *key).collect();
        assert_eq!(order, keys, "in the order they began");
        assert!(streams.get(Ent(1), member(7, 1)).is_none());
        assert!(streams.get(Ent(3), member(7, 4)).is_none());
        assert!(streams.get(Ent(99), member(7, 1)).is_none());
    }
}
