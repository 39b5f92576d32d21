//! A table keyed by [`NodeId`] for the lookup a node makes on every envelope (its peers'
//! addresses and link sequence numbers). A `BTreeMap` there walks three levels of nodes spread
//! over the heap for each lookup, and a simulated cluster of a hundred nodes keeps a hundred
//! such maps: open addressing finds an entry in one probe, usually one cache line.
//!
//! Deterministic: the slot of a key depends on the key alone (Fibonacci hashing), and the table
//! is never iterated, so nothing observable depends on the layout. Keys are the cluster's own
//! node ids (a peer chooses its id as it chooses its address; the table holds one entry per
//! address, as the maps it replaces did).

use crate::id::NodeId;

/// The smallest number of slots a table allocates.
const MIN_SLOTS: usize = 16;

/// Values by node id: open addressing with linear probing, at most half full.
#[derive(Clone, Debug)]
pub(crate) struct NodeTable<V> {
    slots: Vec<Slot<V>>,
    /// A bit per slot: whether it holds an entry. Kept apart (a word per 64 slots, a few
    /// hundred bytes for a thousand peers) so that a slot needs no tag of its own: a peer's
    /// record with its key is one 64-byte line, where a tag would make it 72 bytes over two.
    occupied: Vec<u64>,
    len: usize,
}

/// A key and its value; a slot not marked occupied holds `V::default()`. Aligned to a cache
/// line, so that a slot of 64 bytes or less never straddles two.
#[derive(Clone, Debug)]
#[repr(align(64))]
struct Slot<V> {
    node: NodeId,
    value: V,
}

impl<V: Default> Default for Slot<V> {
    fn default() -> Self {
        Self {
            node: NodeId(0),
            value: V::default(),
        }
    }
}

impl<V> Default for NodeTable<V> {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            occupied: Vec::new(),
            len: 0,
        }
    }
}

impl<V: Clone + Default> NodeTable<V> {
    /// The value for `node`, if any.
    pub(crate) fn get(&self, node: NodeId) -> Option<&V> {
        let at = self.find(node).ok()?;
        Some(&self.slots[at].value)
    }

    /// The value for `node`, inserted with `fresh` first if there is none.
    pub(crate) fn get_or_insert_with(&mut self, node: NodeId, fresh: impl FnOnce() -> V) -> &mut V {
        let at = match self.find(node) {
            Ok(at) => at,
            Err(at) => self.insert_at(at, node, fresh()),
        };
        &mut self.slots[at].value
    }

    /// Starts loading `node`'s home slot (where its entry nearly always is) and the word
    /// that says whether it is occupied: a lookup reads both (see [`crate::hint::prefetch`]).
    pub(crate) fn prefetch(&self, node: NodeId) {
        if !self.slots.is_empty() {
            let at = slot_of(node, self.slots.len());
            crate::hint::prefetch(&self.slots[at]);
            crate::hint::prefetch(&self.occupied[occupancy_bit(at).0]);
        }
    }

    fn is_occupied(&self, at: usize) -> bool {
        let (word, bit) = occupancy_bit(at);
        self.occupied[word] & bit != 0
    }

    /// The slot holding `node` (`Ok`), or the empty slot where it belongs (`Err`); `Err(usize::MAX)`
    /// when the table has no slots yet.
    fn find(&self, node: NodeId) -> Result<usize, usize> {
        if self.slots.is_empty() {
            return Err(usize::MAX);
        }
        let mask = self.slots.len() - 1;
        let mut at = slot_of(node, self.slots.len());
        loop {
            if !self.is_occupied(at) {
                return Err(at);
            }
            if self.slots[at].node == node {
                return Ok(at);
            }
            at = (at + 1) & mask;
        }
    }

    /// Puts a new entry in the empty slot `at` (found by `find`), growing first when the table
    /// would be more than half full; returns the entry's slot.
    fn insert_at(&mut self, at: usize, node: NodeId, value: V) -> usize {
        let at = if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
            self.find(node)
                .expect_err("a new key is absent after growing")
        } else {
            at
        };
        self.fill(at, node, value)
    }

    fn fill(&mut self, at: usize, node: NodeId, value: V) -> usize {
        self.slots[at] = Slot { node, value };
        let (word, bit) = occupancy_bit(at);
        self.occupied[word] |= bit;
        self.len += 1;
        at
    }

    /// Makes room for `entries` entries in all without growing again: a node that learns a
    /// thousand-member view grows its table once rather than through every doubling (each of
    /// which writes the whole table afresh).
    pub(crate) fn reserve(&mut self, entries: usize) {
        let size = entries.saturating_mul(2).next_power_of_two().max(MIN_SLOTS);
        if size > self.slots.len() {
            self.resize(size);
        }
    }

    /// Doubles the slots.
    fn grow(&mut self) {
        self.resize((self.slots.len() * 2).max(MIN_SLOTS));
    }

    /// Makes `size` slots (a power of two, at least twice the entries) and places every entry
    /// again.
    fn resize(&mut self, size: usize) {
        // Copies of one vacant slot: a slot made afresh each time was a `memset` call a slot.
        let slots = std::mem::replace(&mut self.slots, vec![Slot::default(); size]);
        let occupied = std::mem::replace(&mut self.occupied, vec![0; size.div_ceil(64)]);
        self.len = 0;
        for (at, slot) in slots.into_iter().enumerate() {
            let (word, bit) = occupancy_bit(at);
            if occupied[word] & bit == 0 {
                continue;
            }
            let Err(at) = self.find(slot.node) else {
                unreachable!("keys are unique");
            };
            self.fill(at, slot.node, slot.value);
        }
    }
}

/// The word of [`NodeTable::occupied`] and the bit in it that mark slot `at`.
fn occupancy_bit(at: usize) -> (usize, u64) {
    (at / 64, 1 << (at % 64))
}

/// The home slot of `node` in a table of `slots` slots (a power of two): the top bits of the
/// id times 2^64 / φ, which spreads consecutive ids (the simulator numbers its nodes) evenly.
fn slot_of(node: NodeId, slots: usize) -> usize {
    let bits = slots.trailing_zeros();
    let hash = node.0.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    // `bits` is at least 4 (MIN_SLOTS), so the shift is below 64.
    usize::try_from(hash >> (64 - bits)).expect("a slot index fits a usize")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn behaves_as_a_map_through_growth() {
        let mut table = NodeTable::default();
        let mut model = BTreeMap::new();
        // Consecutive ids, spread ids and colliding-looking ids (multiples of a power of two).
        let keys = (0..300)
            .chain((1..200).map(|i| i << 40))
            .chain((1..50).map(|i| i * 1024));
        for (i, key) in keys.enumerate() {
            let node = NodeId(key);
            assert_eq!(table.get(node), model.get(&node), "before {node:?}");
            *table.get_or_insert_with(node, || i) = i;
            model.insert(node, i);
            *table.get_or_insert_with(NodeId(key / 2), || 0) += 1;
            *model.entry(NodeId(key / 2)).or_insert(0) += 1;
        }
        for key in 0..2_000 {
            let node = NodeId(key);
            assert_eq!(table.get(node), model.get(&node));
        }
        assert_eq!(table.len, model.len());
        assert!(table.len * 2 <= table.slots.len(), "at most half full");
    }

    #[test]
    fn a_reserved_table_holds_that_many_without_growing() {
        let mut table = NodeTable::default();
        *table.get_or_insert_with(NodeId(3), || 0) = 3;
        table.reserve(1_000);
        let slots = table.slots.len();
        assert_eq!(slots, 2_048, "at most half full, a power of two");
        for key in 0..1_000 {
            *table.get_or_insert_with(NodeId(key), || 0) += key;
        }
        assert_eq!(table.slots.len(), slots, "no growth");
        assert_eq!(table.get(NodeId(3)), Some(&6), "kept through the resize");
        assert_eq!(table.get(NodeId(999)), Some(&999));
        table.reserve(10);
        assert_eq!(table.slots.len(), slots, "reserving less never shrinks");
    }

    #[test]
    fn an_empty_table_finds_nothing() {
        let table: NodeTable<u8> = NodeTable::default();
        assert_eq!(table.get(NodeId(7)), None);
    }
}
