//! A min-heap with four children per node for the event queue. A run of a hundred nodes keeps
//! thousands of events pending and takes one per step: a binary heap's pop walks a dozen levels,
//! a cache miss each near the bottom; four children sit in one or two cache lines and halve the
//! levels. The order taken is the same (keys are unique: time, then sequence number).

/// The smallest element first.
#[derive(Debug)]
pub(crate) struct QuadHeap<T> {
    items: Vec<T>,
}

impl<T> Default for QuadHeap<T> {
    fn default() -> Self {
        Self { items: Vec::new() }
    }
}

impl<T: Ord + Copy> QuadHeap<T> {
    /// Adds `item`.
    pub(crate) fn push(&mut self, item: T) {
        let mut at = self.items.len();
        self.items.push(item);
        // Move the hole up while the parent is larger.
        while at > 0 {
            let parent = (at - 1) / 4;
            if self.items[parent] <= item {
                break;
            }
            self.items[at] = self.items[parent];
            at = parent;
        }
        self.items[at] = item;
    }

    /// The smallest element.
    pub(crate) fn peek(&self) -> Option<&T> {
        self.items.first()
    }

    /// Removes and returns the smallest element.
    pub(crate) fn pop(&mut self) -> Option<T> {
        let last = self.items.pop()?;
        let Some(&top) = self.items.first() else {
            return Some(last);
        };
        // The last element fills the hole left at the root, moving down past smaller children.
        let len = self.items.len();
        let mut at = 0;
        loop {
            let first = 4 * at + 1;
            if first >= len {
                break;
            }
            let mut least = first;
            for child in first + 1..(first + 4).min(len) {
                if self.items[child] < self.items[least] {
                    least = child;
                }
            }
            if self.items[least] >= last {
                break;
            }
            self.items[at] = self.items[least];
            at = least;
        }
        self.items[at] = last;
        Some(top)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    #[test]
    fn takes_the_order_a_binary_heap_takes() {
        let mut quad = QuadHeap::default();
        let mut binary = BinaryHeap::new();
        let mut rng = crate::rng::SimRng::stream(7, 0);
        let mut next = || rng.next_u64();
        for seq in 0..20_000_u64 {
            // Bursts of pushes and pops, many equal times (the sequence number breaks ties).
            if next() % 3 != 0 {
                let item = (next() % 500, seq);
                quad.push(item);
                binary.push(Reverse(item));
            } else {
                assert_eq!(quad.pop(), binary.pop().map(|Reverse(i)| i));
            }
            assert_eq!(quad.peek(), binary.peek().map(|Reverse(i)| i));
        }
        while let Some(Reverse(item)) = binary.pop() {
            assert_eq!(quad.pop(), Some(item));
        }
        assert_eq!(quad.pop(), None);
    }
}
