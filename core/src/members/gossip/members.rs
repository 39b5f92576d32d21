//! The members of a gossip state by id: one sorted vector of (id, shared member) pairs rather
//! than a `BTreeMap`. A state is walked whole far more often than it changes (every merge, every
//! view, every downing observation and gossip round walks all members of a state, while a
//! thousand-member cluster forms, for each of the thousands of states each member receives),
//! and a walk of a vector reads consecutive memory, where a tree's follows a pointer per node
//! of eleven entries. Lookups are binary searches, as in the tree; inserts and removals shift
//! the pointers after them, once per join or removal. It encodes as the map it replaces, so
//! the wire format and the state digest are unchanged.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::GossipMember;
use crate::id::MemberId;

/// Members by id, in id order, without repeats.
#[derive(Clone, Debug, Default, Eq, PartialEq)]
pub(crate) struct MemberMap {
    entries: Vec<(MemberId, Arc<GossipMember>)>,
}

impl MemberMap {
    fn find(&self, id: &MemberId) -> Result<usize, usize> {
        crate::members::search(&self.entries, id, |(key, _)| key)
    }

    /// The member `id`, if any.
    pub(crate) fn get(&self, id: &MemberId) -> Option<&Arc<GossipMember>> {
        self.find(id).ok().map(|at| &self.entries[at].1)
    }

    /// The member `id`, to change, if any.
    pub(crate) fn get_mut(&mut self, id: &MemberId) -> Option<&mut Arc<GossipMember>> {
        self.find(id).ok().map(|at| &mut self.entries[at].1)
    }

    /// Whether `id` is a member.
    pub(crate) fn contains_key(&self, id: &MemberId) -> bool {
        self.find(id).is_ok()
    }

    /// Whether each id asked is a member, for ids asked in increasing order: one walk of the
    /// members in all, where a lookup each was a binary search each (a seen set's union asks
    /// about a thousand ids at a time while a large cluster forms).
    pub(crate) fn contains_in_order(&self) -> impl FnMut(&MemberId) -> bool + '_ {
        let mut at = 0;
        move |id| {
            while self.entries.get(at).is_some_and(|(member, _)| member < id) {
                at += 1;
            }
            self.entries.get(at).is_some_and(|(member, _)| member == id)
        }
    }

    /// Sets the member `id` (replacing one there was).
    pub(crate) fn insert(&mut self, id: MemberId, member: Arc<GossipMember>) {
        match self.find(&id) {
            Ok(at) => self.entries[at].1 = member,
            Err(at) => self.entries.insert(at, (id, member)),
        }
    }

    /// Drops the member `id`, if any.
    pub(crate) fn remove(&mut self, id: &MemberId) {
        if let Ok(at) = self.find(id) {
            self.entries.remove(at);
        }
    }

    /// How many members there are.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The (id, member) pairs, in id order.
    pub(crate) fn entries(&self) -> &[(MemberId, Arc<GossipMember>)] {
        &self.entries
    }

    /// The ids, in order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &MemberId> {
        self.entries.iter().map(|(id, _)| id)
    }

    /// The members, in id order.
    pub(crate) fn values(&self) -> impl Iterator<Item = &Arc<GossipMember>> {
        self.entries.iter().map(|(_, m)| m)
    }

    /// Ids and members, in id order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&MemberId, &Arc<GossipMember>)> {
        self.entries.iter().map(|(id, m)| (id, m))
    }
}

impl FromIterator<(MemberId, Arc<GossipMember>)> for MemberMap {
    /// As a map collects: in id order, a repeated id keeping its last member. (Merges collect
    /// their members in order already: one pass checks it.)
    fn from_iter<I: IntoIterator<Item = (MemberId, Arc<GossipMember>)>>(iter: I) -> Self {
        let mut entries: Vec<(MemberId, Arc<GossipMember>)> = iter.into_iter().collect();
        // In order without repeats already (a merge's): kept as collected (even a sorted
        // vector's stable sort allocates scratch for half of it).
        if entries.is_sorted_by(|a, b| a.0 < b.0) {
            return Self { entries };
        }
        entries.sort_by_key(|(id, _)| *id);
        // `dedup_by` keeps the first of equal neighbours; a map keeps the last inserted.
        entries.reverse();
        entries.dedup_by_key(|(id, _)| *id);
        entries.reverse();
        Self { entries }
    }
}

impl Serialize for MemberMap {
    /// As the `BTreeMap` it replaces: a map from id to member, in id order.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for MemberMap {
    /// A member must be keyed by its own id: a state that files a member under another id is
    /// malformed (everything else about a member is looked up by the key, its fate by its id),
    /// and the frame is refused.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = BTreeMap::<MemberId, Arc<GossipMember>>::deserialize(deserializer)?;
        if let Some((key, member)) = map.iter().find(|(key, member)| **key != member.id) {
            return Err(serde::de::Error::custom(format!(
                "member {} filed under the id {key}",
                member.id
            )));
        }
        Ok(Self {
            entries: map.into_iter().collect(),
        })
    }
}

#[cfg(feature = "arbitrary")]
impl<'a> arbitrary::Arbitrary<'a> for MemberMap {
    /// Members keyed by their own ids, as decoding requires.
    fn arbitrary(u: &mut arbitrary::Unstructured<'a>) -> arbitrary::Result<Self> {
        let members = Vec::<Arc<GossipMember>>::arbitrary(u)?;
        Ok(members.into_iter().map(|m| (m.id, m)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    use crate::id::AppVersion;

    fn member(node: u64, incarnation: u64) -> Arc<GossipMember> {
        let id = MemberId::new(node, incarnation);
        Arc::new(GossipMember::joining(
            id,
            BTreeSet::new(),
            AppVersion::default(),
            BTreeSet::new(),
        ))
    }

    #[test]
    fn ids_asked_in_order_are_found_as_by_lookup() {
        let mut map = MemberMap::default();
        for node in [2_u64, 4, 6, 8] {
            map.insert(MemberId::new(node, 1), member(node, 1));
        }
        // Before, between, on and after the members, other incarnations of them too.
        let asked: Vec<MemberId> = (0..11)
            .flat_map(|node| {
                [
                    MemberId::new(node, 0),
                    MemberId::new(node, 1),
                    MemberId::new(node, 2),
                ]
            })
            .collect();
        let mut contains = map.contains_in_order();
        let found: Vec<bool> = asked.iter().map(&mut contains).collect();
        let expected: Vec<bool> = asked.iter().map(|id| map.contains_key(id)).collect();
        assert_eq!(found, expected);
        assert_eq!(found.iter().filter(|f| **f).count(), 4);
    }

    #[test]
    fn behaves_as_the_map_it_replaces() {
        let mut map = MemberMap::default();
        let mut model = BTreeMap::new();
        // Out of order, with repeats and several incarnations of one address.
        for (i, node) in [5_u64, 1, 9, 5, 3, 7, 1, 2].into_iter().enumerate() {
            let incarnation = 1 + (i as u64) % 2;
            let (id, m) = (MemberId::new(node, incarnation), member(node, incarnation));
            map.insert(id, Arc::clone(&m));
            model.insert(id, m);
            assert_eq!(map.len(), model.len());
        }
        map.remove(&MemberId::new(9, 1));
        model.remove(&MemberId::new(9, 1));
        map.remove(&MemberId::new(4, 1));
        assert!(map.iter().eq(model.iter()), "same entries, same order");
        for node in 0..11 {
            for incarnation in 1..3 {
                let id = MemberId::new(node, incarnation);
                assert_eq!(map.get(&id), model.get(&id));
                assert_eq!(map.contains_key(&id), model.contains_key(&id));
            }
        }
        // The sorted-without-repeats path of collecting keeps the entries as they are.
        let sorted: MemberMap = model.iter().map(|(id, m)| (*id, Arc::clone(m))).collect();
        assert!(sorted.iter().eq(model.iter()));
        let collected: MemberMap = model
            .iter()
            .rev()
            .map(|(id, m)| (*id, Arc::clone(m)))
            .chain([(MemberId::new(3, 2), member(3, 9))])
            .collect();
        let mut expected = model.clone();
        expected.insert(MemberId::new(3, 2), member(3, 9));
        assert!(
            collected.iter().eq(expected.iter()),
            "collected in order, the last of a repeated id kept"
        );
    }

    #[test]
    fn encodes_as_the_map_it_replaces() {
        let model: BTreeMap<MemberId, Arc<GossipMember>> = [(4, 1), (2, 3), (9, 1)]
            .into_iter()
            .map(|(n, i)| (MemberId::new(n, i), member(n, i)))
            .collect();
        let map: MemberMap = model.clone().into_iter().collect();
        let bytes = postcard::to_allocvec(&map).expect("encodes");
        assert_eq!(bytes, postcard::to_allocvec(&model).expect("encodes"));
        let decoded: MemberMap = postcard::from_bytes(&bytes).expect("decodes");
        assert_eq!(decoded, map);
    }

    #[test]
    fn a_member_filed_under_another_id_is_refused() {
        // Found by the fuzzer: a peer's state keyed member 5#3 as 1#1, so the gossip targets
        // (read by id) and the seen set (kept by key) disagreed.
        let forged: BTreeMap<MemberId, Arc<GossipMember>> = [
            (MemberId::new(1, 1), member(5, 3)),
            (MemberId::new(2, 1), member(2, 1)),
        ]
        .into();
        let bytes = postcard::to_allocvec(&forged).expect("encodes");
        assert!(
            postcard::from_bytes::<MemberMap>(&bytes).is_err(),
            "refused"
        );
        // Keyed by their own ids, the same members decode.
        let honest: BTreeMap<MemberId, Arc<GossipMember>> = [
            (MemberId::new(5, 3), member(5, 3)),
            (MemberId::new(2, 1), member(2, 1)),
        ]
        .into();
        let bytes = postcard::to_allocvec(&honest).expect("encodes");
        assert!(postcard::from_bytes::<MemberMap>(&bytes).is_ok());
    }
}
