//! The roles of each entity type a node serves, by type name. A node serves a handful of
//! types and looks one up for nearly every input (a sharding message, a tell, its buffered
//! count, its timers): a short list in name order, matched by pointer first (every clone of
//! a name shares it), does in a few instructions what a map's tree walk did in dozens.

use crate::id::EntityType;

/// Values by entity type, in name order (as the map it replaces iterated). It notes when a
/// value was lent out to change, so that what is worked out from the values (the roles' next
/// deadline) is worked out again only then.
#[derive(Debug)]
pub(super) struct TypeTable<V> {
    entries: Vec<(EntityType, V)>,
    /// A value was lent out to change since [`TypeTable::take_touched`] last asked.
    touched: bool,
}

impl<V> FromIterator<(EntityType, V)> for TypeTable<V> {
    /// Later entries replace earlier ones of the same name, as collecting into a map does.
    fn from_iter<I: IntoIterator<Item = (EntityType, V)>>(iter: I) -> Self {
        let mut entries: Vec<(EntityType, V)> = Vec::new();
        for (name, value) in iter {
            match entries.binary_search_by(|(n, _)| n.cmp(&name)) {
                Ok(at) => entries[at].1 = value,
                Err(at) => entries.insert(at, (name, value)),
            }
        }
        Self {
            entries,
            touched: true,
        }
    }
}

impl<V> TypeTable<V> {
    /// The value for `name`.
    pub(super) fn get(&self, name: &EntityType) -> Option<&V> {
        self.entries.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// The value for `name`, to change.
    pub(super) fn get_mut(&mut self, name: &EntityType) -> Option<&mut V> {
        self.touched = true;
        self.entries
            .iter_mut()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
    }

    /// Every value, in name order.
    pub(super) fn values(&self) -> impl Iterator<Item = &V> {
        self.entries.iter().map(|(_, v)| v)
    }

    /// Every value, in name order, to change.
    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.touched = true;
        self.entries.iter_mut().map(|(_, v)| v)
    }

    /// Whether a value was lent out to change since the last call (or since it was built).
    pub(super) fn take_touched(&mut self) -> bool {
        std::mem::take(&mut self.touched)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iterates_in_name_order_and_keeps_the_last_of_a_name() {
        let t: TypeTable<u32> = [("orders", 1), ("carts", 2), ("users", 3), ("carts", 4)]
            .into_iter()
            .map(|(n, v)| (EntityType::new(n), v))
            .collect();
        assert_eq!(t.values().copied().collect::<Vec<_>>(), [4, 1, 3]);
        assert_eq!(t.get(&EntityType::new("carts")), Some(&4));
        assert_eq!(t.get(&EntityType::new("nope")), None);
    }

    #[test]
    fn finds_a_name_by_value_not_only_by_pointer() {
        let mut t: TypeTable<u32> = [(EntityType::new("orders"), 1)].into_iter().collect();
        // A name decoded from the wire is its own allocation.
        let decoded = EntityType::new(String::from("orders"));
        *t.get_mut(&decoded).expect("found") += 1;
        assert_eq!(t.get(&decoded), Some(&2));
    }

    #[test]
    fn notes_each_lend_to_change_once() {
        let mut t: TypeTable<u32> = [(EntityType::new("orders"), 1)].into_iter().collect();
        assert!(t.take_touched(), "a new table is worked out once");
        assert!(!t.take_touched());
        let _ = t.get(&EntityType::new("orders"));
        let _ = t.values().count();
        assert!(!t.take_touched(), "reading is no change");
        let _ = t.get_mut(&EntityType::new("nope"));
        assert!(t.take_touched(), "a lookup to change counts, found or not");
        t.values_mut().for_each(|v| *v += 1);
        assert!(t.take_touched());
        assert!(!t.take_touched());
    }
}
