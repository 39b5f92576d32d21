//! The line at a route: handles of this node that must wait before they send (the route is
//! open but the node's letters to the entity still wait for the host, or earlier handles
//! wait) take a ticket and send in ticket order, whichever way they then go. Futures of one
//! task that send concurrently (asks in flight) so keep the order of their first poll, which
//! is the order they were sent in; a ticket abandoned (its future dropped) lets the next one
//! through.

use std::collections::BTreeSet;

/// Tickets given and served.
#[derive(Debug, Default)]
pub(super) struct Line {
    /// The next ticket to give.
    next: u64,
    /// The ticket whose turn it is (all before it have sent or were abandoned).
    serving: u64,
    /// Tickets after `serving` whose holders gave up.
    abandoned: BTreeSet<u64>,
}

impl Line {
    /// Whether nobody waits.
    pub(super) fn is_empty(&self) -> bool {
        self.serving == self.next
    }

    /// Whether the holder of `ticket` (a newcomer: `None`) is first in line.
    pub(super) fn is_first(&self, ticket: Option<u64>) -> bool {
        match ticket {
            Some(ticket) => ticket == self.serving,
            None => self.is_empty(),
        }
    }

    /// A ticket at the end of the line.
    pub(super) fn join(&mut self) -> u64 {
        self.next += 1;
        self.next - 1
    }

    /// The first in line has sent: the next one's turn.
    pub(super) fn served(&mut self) {
        self.serving += 1;
        while self.abandoned.remove(&self.serving) {
            self.serving += 1;
        }
    }

    /// The holder of `ticket` gave up waiting.
    pub(super) fn abandon(&mut self, ticket: u64) {
        if ticket == self.serving {
            self.served();
        } else {
            self.abandoned.insert(ticket);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickets_are_served_in_order_and_abandoned_ones_are_skipped() {
        let mut line = Line::default();
        assert!(line.is_empty() && line.is_first(None));
        let (a, b, c) = (line.join(), line.join(), line.join());
        assert!(!line.is_first(None), "a newcomer lines up behind them");
        assert!(line.is_first(Some(a)) && !line.is_first(Some(b)));
        line.abandon(b);
        assert!(
            line.is_first(Some(a)),
            "an abandoned ticket behind does not jump ahead"
        );
        line.served();
        assert!(line.is_first(Some(c)), "b was skipped");
        line.abandon(c);
        assert!(line.is_empty());
    }
}
