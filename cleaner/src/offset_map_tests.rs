//! Unit tests of `offset_map.rs`: the map against a `HashMap` model,
//! probe costs at the load limit, per-pass table sizing, the memory per
//! key of the default buffer, collisions sharing a slot, and the settings
//! and allocations it refuses. Private items are reached through
//! `super::*`, so the file is the module's `#[path = "offset_map_tests.rs"]
//! mod tests`.

use std::collections::{HashMap, HashSet};

use super::*;

const TEST_KEY: [u64; 2] = [0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210];

fn map_with_slots(slots: usize) -> OffsetMap {
    OffsetMap::with_hash_key(slots * BYTES_PER_ENTRY, DEFAULT_LOAD_FACTOR, TEST_KEY).unwrap()
}

/// SplitMix64: a seeded generator for reproducible random keys.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn key(&mut self) -> Vec<u8> {
        let len = (self.next() % 24) as usize + 1;
        (0..len).map(|_| self.next() as u8).collect()
    }
}

impl OffsetMap {
    /// Checks the table's invariants (module doc): slots past the table
    /// in use are empty, the count matches, every run is ordered by home
    /// slot, and every key is found where a probe looks for it.
    fn check_invariants(&self) {
        assert!(self.slots[self.in_use..].iter().all(Slot::is_empty));
        let used: Vec<usize> = (0..self.in_use)
            .filter(|&i| !self.slots[i].is_empty())
            .collect();
        assert_eq!(used.len(), self.entries);
        assert!(self.entries <= self.max_entries && self.max_entries < self.in_use);
        for &i in &used {
            let slot = &self.slots[i];
            let previous = if i == 0 { self.in_use - 1 } else { i - 1 };
            let before = &self.slots[previous];
            if !before.is_empty() {
                // Ordered run: the previous entry is at most as far
                // past its home as this one is, plus the one slot.
                assert!(
                    self.displacement(previous, before) + 1 >= self.displacement(i, slot),
                    "slot {i} out of order"
                );
            } else {
                assert_eq!(self.displacement(i, slot), 0, "slot {i} after a gap");
            }
            let hash = KeyHash {
                fingerprint: slot.fingerprint,
            };
            assert_eq!(self.probe(&hash).index, i);
        }
    }
}

#[test]
fn model_against_a_hashmap() {
    // Small tables, so runs wrap around the end and maps fill; random
    // table sizes per pass through `clear_for`, ascending offsets with
    // repeats, as passes put them.
    for seed in 0..40u64 {
        let mut rng = SplitMix64(seed);
        let budget = (3 + rng.next() % 400) as usize * BYTES_PER_ENTRY;
        let load_factor = [0.5, 0.75, DEFAULT_LOAD_FACTOR][(rng.next() % 3) as usize];
        let mut map = OffsetMap::with_hash_key(budget, load_factor, [seed, !seed]).unwrap();
        for _pass in 0..3 {
            map.clear_for(rng.next() % 300);
            let mut model: HashMap<Vec<u8>, u64> = HashMap::new();
            let key_space = 1 + rng.next() % 600;
            let mut offset = rng.next() % 1000;
            let mut full_seen = false;
            for _ in 0..1500 {
                let key = (rng.next() % key_space).to_le_bytes().to_vec();
                let known = model.contains_key(&key);
                let outcome = map.put(&key, offset);
                if known || model.len() < map.max_entries() {
                    assert_eq!(outcome, PutOutcome::Stored, "seed {seed}");
                    let newest = model.entry(key.clone()).or_insert(offset);
                    *newest = (*newest).max(offset);
                } else {
                    // A new key at the load limit: nothing stored.
                    assert_eq!(outcome, PutOutcome::Full, "seed {seed}");
                    assert_eq!(map.get(&key), None, "seed {seed}");
                    full_seen = true;
                }
                // Now and then an older offset of a known key.
                if known && rng.next() % 8 == 0 {
                    assert_eq!(map.put(&key, offset / 2), PutOutcome::Stored);
                }
                offset += 1 + rng.next() % 3;
            }
            map.check_invariants();
            assert_eq!(map.len(), model.len(), "seed {seed}");
            for (key, &newest) in &model {
                assert_eq!(map.get(key), Some(newest), "seed {seed} key {key:?}");
            }
            for k in key_space..key_space + 200 {
                assert_eq!(map.get(&k.to_le_bytes()), None, "seed {seed}");
            }
            if model.len() == map.max_entries() {
                assert!(full_seen || key_space as usize == model.len());
            }
        }
    }
}

#[test]
fn misses_cost_about_what_hits_cost_at_the_load_limit() {
    // Counted, not timed. At load 0.9 plain linear probing reads about
    // 50 slots for a miss (Knuth); the ordered table stops at the first
    // entry whose home comes after the key's.
    let mut map = map_with_slots(50_000);
    let mut i = 0u64;
    while map.put(&i.to_le_bytes(), i) == PutOutcome::Stored {
        i += 1;
    }
    assert_eq!(map.len(), map.max_entries());
    map.check_invariants();
    let mean = |keys: std::ops::Range<u64>| {
        let n = keys.end - keys.start;
        let read: usize = keys
            .map(|k| map.probe(&map.hash(&k.to_le_bytes())).slots_read)
            .sum();
        read as f64 / n as f64
    };
    let hits = mean(0..20_000);
    let misses = mean(1 << 40..(1 << 40) + 20_000);
    assert!(hits < 8.0, "mean slots read by a hit: {hits}");
    assert!(misses < 12.0, "mean slots read by a miss: {misses}");
}

#[test]
fn clear_for_sizes_the_table_to_the_pass() {
    let mut map = OffsetMap::with_hash_key(1 << 20, DEFAULT_LOAD_FACTOR, TEST_KEY).unwrap();
    let all = map.slots();
    assert_eq!(map.slots_in_use(), all);
    assert_eq!(map.max_entries(), map.capacity());
    // 1000 keys: 2 × 1000 / 0.9 slots, the key bound twice within the
    // load limit.
    map.clear_for(1000);
    assert_eq!(map.slots_in_use(), 2223);
    assert!(map.max_entries() >= 2000);
    for k in 0..1000u64 {
        assert_eq!(map.put(&k.to_le_bytes(), k), PutOutcome::Stored);
    }
    // Only the table in use was written.
    assert!(map.slots[map.slots_in_use()..].iter().all(Slot::is_empty));
    map.check_invariants();
    // A bound too low ends the pass at the smaller limit, safely.
    map.clear_for(1);
    assert_eq!(map.slots_in_use(), MIN_SLOTS_IN_USE);
    assert!(
        map.slots.iter().all(Slot::is_empty),
        "the old keys are gone"
    );
    let mut stored = 0u64;
    while map.put(&stored.to_le_bytes(), stored) == PutOutcome::Stored {
        stored += 1;
    }
    assert_eq!(stored as usize, map.max_entries());
    assert_eq!(map.max_entries(), 921);
    for k in 0..stored {
        assert_eq!(map.get(&k.to_le_bytes()), Some(k));
    }
    // A bound past the table uses all of it; `clear` is that.
    map.clear_for(u64::MAX / 2);
    assert_eq!(map.slots_in_use(), all);
    map.clear_for(10);
    map.clear();
    assert_eq!(map.slots_in_use(), all);
    assert_eq!(map.max_entries(), map.capacity());
    // A budget under the minimum table uses what there is.
    let mut small = map_with_slots(10);
    small.clear_for(0);
    assert_eq!(small.slots_in_use(), 10);
    assert_eq!(small.max_entries(), 9);
}

#[test]
fn default_buffer_maps_six_million_keys_in_under_20_bytes_each() {
    // Counted from the real allocation and real puts, not computed: the
    // default dedupe buffer, one thread, the default load factor.
    let config = crate::config::CleanerConfig::default();
    let budget = config.dedupe_buffer_bytes / config.threads;
    let mut map = OffsetMap::with_hash_key(budget, config.load_factor, TEST_KEY).unwrap();
    map.clear_for(u64::MAX);
    // Uniformly random fingerprints, as SipHash gives, without hashing
    // six million keys in a debug build; `put_hashed` is `put`'s path.
    let mut rng = SplitMix64(7);
    let hashes = std::iter::repeat_with(|| KeyHash {
        fingerprint: rng.next(),
    });
    let mut keys = 0u64;
    let mut first = None;
    let mut last = None;
    for hash in hashes {
        if map.put_hashed(&hash, keys) != PutOutcome::Stored {
            assert_eq!(map.get_hashed(&hash), None, "the key that did not fit");
            break;
        }
        first.get_or_insert(hash);
        last = Some(hash);
        keys += 1;
    }
    assert_eq!(map.len() as u64, keys);
    assert!(
        keys >= 6_000_000,
        "keys per pass at the default buffer: {keys}"
    );
    assert_eq!(std::mem::size_of::<Slot>(), 16, "bytes per slot");
    assert!(map.allocated_bytes() <= budget);
    let per_key = map.allocated_bytes() as f64 / keys as f64;
    // 16 B a slot at load 0.9: 17.8 B of buffer a key (Kafka 26.7).
    assert!(per_key <= 20.0, "allocated bytes per key kept: {per_key}");
    // Spot checks: the first and the last key stored.
    assert_eq!(first.and_then(|h| map.get_hashed(&h)), Some(0));
    assert_eq!(last.and_then(|h| map.get_hashed(&h)), Some(keys - 1));
}

#[test]
fn put_then_get() {
    let mut map = map_with_slots(100);
    assert_eq!(map.get(b"a"), None);
    assert_eq!(map.put(b"a", 10), PutOutcome::Stored);
    assert_eq!(map.put(b"b", 11), PutOutcome::Stored);
    assert_eq!(map.get(b"a"), Some(10));
    assert_eq!(map.get(b"b"), Some(11));
    assert_eq!(map.get(b"c"), None);
    assert_eq!(map.get(b""), None);
    assert_eq!(map.len(), 2);
    assert!(!map.is_empty());
}

#[test]
fn empty_key_is_a_key() {
    let mut map = map_with_slots(10);
    assert_eq!(map.put(b"", 3), PutOutcome::Stored);
    assert_eq!(map.get(b""), Some(3));
    assert_eq!(map.get(b"\0"), None);
}

#[test]
fn keeps_the_maximum_offset() {
    let mut map = map_with_slots(100);
    assert_eq!(map.put(b"k", 5), PutOutcome::Stored);
    assert_eq!(map.put(b"k", 9), PutOutcome::Stored);
    assert_eq!(map.get(b"k"), Some(9));
    // An older offset for the same key changes nothing.
    assert_eq!(map.put(b"k", 7), PutOutcome::Stored);
    assert_eq!(map.get(b"k"), Some(9));
    assert_eq!(map.put(b"k", 1), PutOutcome::Stored);
    assert_eq!(map.get(b"k"), Some(9));
    assert_eq!(map.len(), 1);
}

#[test]
fn clear_forgets_everything_and_keeps_memory() {
    let mut map = OffsetMap::new(50 * BYTES_PER_ENTRY, DEFAULT_LOAD_FACTOR).unwrap();
    for i in 0..40u64 {
        assert_eq!(map.put(&i.to_le_bytes(), 100 + i), PutOutcome::Stored);
    }
    let slots = map.slots();
    let table = map.slots.as_ptr();
    map.clear();
    assert_eq!(map.len(), 0);
    assert!(map.is_empty());
    assert_eq!(map.slots(), slots);
    assert_eq!(map.slots.as_ptr(), table, "clear must not reallocate");
    for i in 0..40u64 {
        assert_eq!(map.get(&i.to_le_bytes()), None);
    }
    // A new pass starts from nothing, with values below the old ones.
    assert_eq!(map.put(b"x", 3), PutOutcome::Stored);
    assert_eq!(map.get(b"x"), Some(3));
}

#[test]
fn fills_exactly_at_the_load_factor() {
    let mut map = map_with_slots(100);
    assert_eq!(map.max_entries(), 90);
    for i in 0..90u64 {
        assert_eq!(map.put(&i.to_be_bytes(), i), PutOutcome::Stored, "key {i}");
    }
    assert_eq!(map.len(), 90);
    assert!((map.utilization() - 0.9).abs() < 1e-12);
    // A new key does not fit, and is not half-stored.
    assert_eq!(map.put(b"new", 90), PutOutcome::Full);
    assert_eq!(map.get(b"new"), None);
    assert_eq!(map.len(), 90);
    // Known keys still take newer offsets at the limit.
    assert_eq!(map.put(&5u64.to_be_bytes(), 91), PutOutcome::Stored);
    assert_eq!(map.get(&5u64.to_be_bytes()), Some(91));
    for i in (0..90u64).filter(|&i| i != 5) {
        assert_eq!(map.get(&i.to_be_bytes()), Some(i));
    }
}

#[test]
fn map_for_two_keys_supports_a_partial_pass() {
    // Three slots at 0.9 hold two keys: the smallest useful map.
    let mut map = map_with_slots(3);
    assert_eq!(map.max_entries(), 2);
    let dirty: [(&[u8], u64); 5] = [(b"a", 0), (b"b", 1), (b"a", 2), (b"c", 3), (b"b", 4)];

    // First pass: maps records up to the first one that does not fit.
    let mut end = None;
    for &(key, offset) in &dirty {
        match map.put(key, offset) {
            PutOutcome::Stored => {}
            PutOutcome::Full => {
                end = Some(offset);
                break;
            }
        }
    }
    assert_eq!(end, Some(3));
    assert_eq!(map.get(b"a"), Some(2));
    assert_eq!(map.get(b"b"), Some(1));
    assert_eq!(map.get(b"c"), None);

    // Second pass resumes at the record that did not fit.
    map.clear();
    for &(key, offset) in dirty.iter().filter(|(_, o)| *o >= 3) {
        assert_eq!(map.put(key, offset), PutOutcome::Stored);
    }
    assert_eq!(map.get(b"c"), Some(3));
    assert_eq!(map.get(b"b"), Some(4));
    assert_eq!(map.get(b"a"), None);
}

#[test]
fn values_are_stored_whole() {
    let mut map = map_with_slots(10);
    // Far apart, as places in different segments of a pass are.
    assert_eq!(map.put(b"first", 7), PutOutcome::Stored);
    assert_eq!(map.put(b"far", MAX_VALUE), PutOutcome::Stored);
    assert_eq!(map.get(b"far"), Some(MAX_VALUE));
    assert_eq!(map.get(b"first"), Some(7));
    // The one value the empty marker takes is refused, not wrapped.
    assert_eq!(map.put(b"beyond", u64::MAX), PutOutcome::Full);
    assert_eq!(map.put(b"first", u64::MAX), PutOutcome::Full);
    assert_eq!(map.get(b"first"), Some(7));
    assert_eq!(map.get(b"beyond"), None);
    assert_eq!(map.len(), 2);
    // Zero is a value like any other.
    assert_eq!(map.put(b"zero", 0), PutOutcome::Stored);
    assert_eq!(map.get(b"zero"), Some(0));
}

#[test]
fn colliding_fingerprints_share_a_slot_holding_the_larger_value() {
    // The map cannot tell colliding keys apart; what it promises is that
    // their slot holds the largest value put for any of them, so the
    // pass's key comparison sees the newest record of the pair.
    let mut map =
        OffsetMap::with_colliding_fingerprints(100 * BYTES_PER_ENTRY, DEFAULT_LOAD_FACTOR, 0)
            .unwrap();
    assert_eq!(map.hash(b"a"), map.hash(b"b"));
    assert_eq!(map.put(b"a", 5), PutOutcome::Stored);
    assert_eq!(map.put(b"b", 9), PutOutcome::Stored);
    assert_eq!(map.put(b"a", 7), PutOutcome::Stored);
    assert_eq!(map.len(), 1);
    assert_eq!(map.get(b"a"), Some(9));
    assert_eq!(map.get(b"anything"), Some(9));
    // A few bits: few fingerprints, each slot the maximum of its keys.
    let mut map =
        OffsetMap::with_colliding_fingerprints(100 * BYTES_PER_ENTRY, DEFAULT_LOAD_FACTOR, 2)
            .unwrap();
    let mut newest = HashMap::new();
    for v in 0..200u64 {
        let key = (v % 37).to_le_bytes();
        assert_eq!(map.put(&key, v), PutOutcome::Stored);
        let e = newest.entry(map.hash(&key)).or_insert(v);
        *e = (*e).max(v);
    }
    assert!(map.len() <= 4);
    map.check_invariants();
    for k in 0..37u64 {
        let hash = map.hash(&k.to_le_bytes());
        assert_eq!(map.get_hashed(&hash), newest.get(&hash).copied());
    }
}

#[test]
fn many_random_keys_without_false_hits() {
    let seed = 0x5eed_c1ea_0f0f;
    let mut rng = SplitMix64(seed);
    let mut map = OffsetMap::with_hash_key(
        120_000 * BYTES_PER_ENTRY,
        DEFAULT_LOAD_FACTOR,
        [seed, !seed],
    )
    .unwrap();
    let mut model: HashMap<Vec<u8>, u64> = HashMap::new();
    let mut keys: Vec<Vec<u8>> = Vec::new();
    // Ascending offsets with repeated keys, as a dirty range has.
    let mut offset = 0u64;
    while model.len() < 100_000 {
        let key = if !keys.is_empty() && rng.next() % 4 == 0 {
            keys[(rng.next() % keys.len() as u64) as usize].clone()
        } else {
            let key = rng.key();
            keys.push(key.clone());
            key
        };
        assert_eq!(map.put(&key, offset), PutOutcome::Stored, "seed {seed:#x}");
        model.insert(key, offset);
        offset += 1 + rng.next() % 3;
    }
    assert_eq!(map.len(), model.len(), "seed {seed:#x}");
    for (key, &expected) in &model {
        assert_eq!(map.get(key), Some(expected), "seed {seed:#x} key {key:?}");
    }
    // Keys never put must miss: any hit here is a false positive.
    let mut probes = SplitMix64(seed ^ 0xffff);
    let mut checked = 0;
    while checked < 100_000 {
        let key = probes.key();
        if !model.contains_key(&key) {
            assert_eq!(map.get(&key), None, "seed {seed:#x} key {key:?}");
            checked += 1;
        }
    }
}

#[test]
fn distinct_short_keys_get_distinct_fingerprints() {
    // Every 1- and 2-byte key, and 3-byte keys by the thousand: a weak
    // hash shows collisions first on short, similar inputs.
    let mut seen = HashSet::new();
    let mut total = 0;
    for len in 1..=3usize {
        let limit = if len == 3 { 200_000 } else { 1 << (8 * len) };
        for n in 0..limit as u32 {
            let key = &n.to_le_bytes()[..len];
            assert!(
                seen.insert(fingerprint(&TEST_KEY, key)),
                "collision on {key:?}"
            );
            total += 1;
        }
    }
    assert_eq!(seen.len(), total);
}

#[test]
fn allocation_stays_within_budget() {
    for budget in [48, 49, 63, 64, 1000, 1015, 1 << 20, (1 << 20) + 7] {
        let map = OffsetMap::new(budget, DEFAULT_LOAD_FACTOR).unwrap();
        assert!(map.allocated_bytes() <= budget, "budget {budget}");
        assert!(
            budget - map.allocated_bytes() < BYTES_PER_ENTRY,
            "budget {budget}: no more than one slot's worth left unused"
        );
        assert_eq!(map.slots(), budget / BYTES_PER_ENTRY);
        assert_eq!(map.bytes_per_entry(), BYTES_PER_ENTRY);
    }
    // Kafka's default 128 MiB: 8.39 M slots and 7.55 M keys, against
    // 5.59 M slots and 5.03 M keys at Kafka's 24 bytes per entry.
    let map = OffsetMap::new(128 << 20, DEFAULT_LOAD_FACTOR).unwrap();
    assert_eq!(map.slots(), 8_388_608);
    assert_eq!(map.max_entries(), 7_549_747);
    assert!(map.allocated_bytes() <= 128 << 20);
}

#[test]
fn rejects_unusable_settings() {
    for load_factor in [0.0, 1.0, 1.5, -0.1, f64::NAN, f64::INFINITY] {
        let err = OffsetMap::new(1 << 20, load_factor).unwrap_err();
        assert!(
            matches!(
                err,
                CleanerError::InvalidConfig {
                    setting: "load_factor",
                    ..
                }
            ),
            "{load_factor}: {err}"
        );
    }
    // Too small to hold a single key: no slot, or one slot (which must
    // stay empty so probes end).
    for budget in [0, 15, 16, 31] {
        let err = OffsetMap::new(budget, DEFAULT_LOAD_FACTOR).unwrap_err();
        assert!(
            matches!(
                err,
                CleanerError::InvalidConfig {
                    setting: "dedupe_buffer_bytes",
                    ..
                }
            ),
            "{budget}: {err}"
        );
    }
    let two_slots = OffsetMap::new(32, DEFAULT_LOAD_FACTOR).unwrap();
    assert_eq!(two_slots.max_entries(), 1);
    // The largest load factor below 1 still leaves one slot empty.
    let tight = OffsetMap::new(10 * BYTES_PER_ENTRY, 1.0 - f64::EPSILON / 2.0).unwrap();
    assert_eq!(tight.max_entries(), 9);
}

#[test]
fn impossible_allocation_is_an_error() {
    let err = OffsetMap::new(usize::MAX, DEFAULT_LOAD_FACTOR).unwrap_err();
    assert!(matches!(err, CleanerError::OutOfMemory { .. }), "{err}");
}

#[test]
fn production_maps_use_unpredictable_keys() {
    let a = OffsetMap::new(1000, DEFAULT_LOAD_FACTOR).unwrap();
    let mut b = OffsetMap::new(1000, DEFAULT_LOAD_FACTOR).unwrap();
    assert_ne!(a.hash_key, b.hash_key);
    let before = b.hash_key;
    b.clear();
    assert_ne!(b.hash_key, before, "clear draws a new key");
    let mut fixed = map_with_slots(10);
    fixed.clear();
    assert_eq!(fixed.hash_key, TEST_KEY);
}

#[test]
fn debug_output_hides_the_hash_key() {
    let map = map_with_slots(10);
    let text = format!("{map:?}");
    assert!(text.contains("max_entries: 9"), "{text}");
    assert!(!text.contains(&TEST_KEY[0].to_string()), "{text}");
}
