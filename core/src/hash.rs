//! The stable shard hash. It is part of the wire protocol: every node must map an entity id to
//! the same shard, forever. Golden vectors in the tests pin it.
//!
//! The function is Murmur2 (32-bit, seed `0x9747b28c`) over the entity id's UTF-8 bytes, made
//! positive by masking the sign bit, modulo the number of shards. This is exactly Kafka's default
//! partitioner and Akka's `Murmur2MessageExtractor`, so Shoal places entity ids in the same
//! shards as those systems do for the same shard count.

use crate::id::{EntityId, ShardId};

const SEED: u32 = 0x9747_b28c;
const M: u32 = 0x5bd1_e995;
const R: u32 = 24;

/// The shard of `entity` among `number_of_shards` shards.
///
/// # Panics
/// If `number_of_shards` is zero (config validation rules it out).
pub fn shard_of(entity: &EntityId, number_of_shards: u32) -> ShardId {
    shard_of_bytes(entity.as_str().as_bytes(), number_of_shards)
}

/// [`shard_of`] over raw bytes.
///
/// # Panics
/// If `number_of_shards` is zero.
pub fn shard_of_bytes(bytes: &[u8], number_of_shards: u32) -> ShardId {
    assert!(number_of_shards > 0, "number_of_shards must be positive");
    ShardId((murmur2(bytes) & 0x7fff_ffff) % number_of_shards)
}

/// Murmur2, 32-bit, as in Kafka's `Utils.murmur2` (little-endian 4-byte blocks).
pub fn murmur2(data: &[u8]) -> u32 {
    // Kafka takes the length as a Java int; ids longer than 2 GiB are not a concern here.
    let mut h = SEED ^ (data.len() as u32);
    let mut blocks = data.chunks_exact(4);
    for block in &mut blocks {
        let mut k = u32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = blocks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if let Some(&first) = tail.first() {
        h ^= u32::from(first);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kafka's published vectors (`UtilsTest.testMurmur2`), as signed Java ints.
    #[test]
    fn murmur2_matches_kafka() {
        let cases: [(&str, i32); 6] = [
            ("21", -973_932_308),
            ("foobar", -790_332_482),
            ("a-little-bit-long-string", -985_981_536),
            ("a-little-bit-longer-string", -1_486_304_829),
            (
                "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            ("abc", 479_470_107),
        ];
        for (input, expected) in cases {
            assert_eq!(
                murmur2(input.as_bytes()) as i32,
                expected,
                "murmur2({input:?})"
            );
        }
    }

    /// Pins `shard_of` itself: changing these breaks every running cluster.
    #[test]
    fn shard_of_golden_vectors() {
        let cases: [(&str, u32); 8] = [
            ("", 1000),
            ("a", 1000),
            ("user-1", 1000),
            ("user-2", 1000),
            ("order/42", 100),
            ("ümlaut", 1000),
            ("foobar", 1000),
            ("21", 7),
        ];
        let actual: Vec<_> = cases
            .iter()
            .map(|(id, n)| (*id, *n, shard_of(&EntityId::new(*id), *n).0))
            .collect();
        insta::assert_debug_snapshot!(actual);
    }

    #[test]
    fn shard_of_is_in_range() {
        for n in [1, 2, 3, 10, 1000, u32::MAX] {
            for id in ["", "x", "longer-entity-id", "ünïcödé"] {
                assert!(shard_of(&EntityId::new(id), n).0 < n);
            }
        }
    }
}
