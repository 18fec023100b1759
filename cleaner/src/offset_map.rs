//! The cleaner's key map: key fingerprint → newest queue offset, in a fixed
//! memory budget. Kafka's `SkimpyOffsetMap`, 20 bytes per entry instead of 24.
//!
//! One cleaning pass scans the dirty range of a partition in offset order and
//! `put`s every record's key. Afterwards the cleaner keeps a record only if
//! `get(key)` says no newer record of that key exists in the mapped range.
//! When the map reaches its load limit, `put` reports [`PutOutcome::Full`] and
//! the caller ends the pass there (a partial pass: clean up to that offset,
//! `clear`, continue from it next time).
//!
//! # Entry layout (20 bytes)
//!
//! ```text
//! 0..16   fingerprint   SipHash-2-4-128 of the key, all 128 bits
//! 16..20  stored_delta  0 = empty slot, else 1 + (offset - base_offset)
//! ```
//!
//! The full fingerprint is stored, so a hit is a 128-bit equality whatever
//! slot probing put the entry in; no bits are implied by the position. The
//! offset is stored as a 32-bit delta from `base_offset`, the first offset
//! `put` after creation or `clear` (the start of the pass's dirty range).
//! That is safe because a pass's offsets are ascending from the base: an
//! offset that would not fit in 32 bits makes the map report `Full`, which
//! is exactly the partial-pass case the caller already handles, after
//! 2^32 - 1 offsets instead of after the load limit. Keeping 0 as the empty
//! marker lets the table start as zeroed memory. Against Kafka's 24 bytes
//! (16 B MD5 + 8 B offset) the same budget holds 20 % more keys; dropping
//! bucket bits from the fingerprint would save about 2 more bytes but needs a
//! stored probe distance, and is not worth the complexity.
//!
//! # Invariants
//! - The table is allocated once, `floor(budget_bytes / 20)` slots, and
//!   never grows: allocated bytes ≤ budget.
//! - `len() ≤ max_entries() < slots()`, so at least one slot is empty and
//!   every linear probe ends.
//! - A key's stored offset only grows (`put` keeps the maximum).
//! - A `put` that cannot be stored changes nothing.
//!
//! Linear probing keeps a probe within a few cache lines (three slots per
//! line); at the default load factor of 0.9 a hit costs about 5.5 probes and
//! a miss about 50 on average (Knuth's estimates), all sequential reads.

use std::mem::size_of;

use crate::error::{CleanerError, Result};
use crate::fingerprint::{fingerprint, random_key, Fingerprint};

/// Bytes of memory per slot; the budget divided by this is the slot count.
pub const BYTES_PER_ENTRY: usize = 20;

/// Kafka's `log.cleaner.io.buffer.load.factor` default.
pub const DEFAULT_LOAD_FACTOR: f64 = 0.9;

/// Largest `offset - base_offset` a slot can hold: one value of the u32 is
/// taken by the empty marker.
pub const MAX_OFFSET_DELTA: u64 = u32::MAX as u64 - 1;

/// One slot of the open-addressing table. `repr(C)` with only u32 fields has
/// no padding, so the size is exactly the layout documented above.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot {
    fingerprint: [u32; 4],
    stored_delta: u32,
}

const _: () = assert!(size_of::<Slot>() == BYTES_PER_ENTRY);

impl Slot {
    const EMPTY: Slot = Slot {
        fingerprint: [0; 4],
        stored_delta: 0,
    };

    fn is_empty(&self) -> bool {
        self.stored_delta == 0
    }
}

fn pack(fp: Fingerprint) -> [u32; 4] {
    [
        fp[0] as u32,
        (fp[0] >> 32) as u32,
        fp[1] as u32,
        (fp[1] >> 32) as u32,
    ]
}

/// What a [`OffsetMap::put`] did.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PutOutcome {
    /// The key now maps to the larger of its previous offset and this one.
    Stored,
    /// Nothing was stored: the key is new and the map is at its load limit,
    /// or the offset is more than [`MAX_OFFSET_DELTA`] past the base offset.
    /// End the pass before this record; the map still describes every record
    /// before it.
    Full,
    /// Nothing was stored: the key is new and the offset is below the base
    /// offset (the first offset put since creation or `clear`). A pass puts
    /// offsets in ascending order, so this means the caller fed records out
    /// of order.
    BelowBase,
}

/// Key fingerprint → newest queue offset, in a fixed memory budget.
/// Not thread-safe by design: each cleaner thread owns one and reuses it for
/// every pass with [`OffsetMap::clear`].
pub struct OffsetMap {
    /// Allocated once; `Box<[_]>` rather than `Vec` so nothing can grow it.
    slots: Box<[Slot]>,
    /// Load limit: `floor(slots × load_factor)`, and always `< slots`.
    max_entries: usize,
    entries: usize,
    load_factor: f64,
    /// Offset that stored deltas are relative to; set by the first put.
    base_offset: Option<u64>,
    /// Largest offset stored since creation or `clear`.
    latest_offset: Option<u64>,
    /// Secret SipHash key. Redrawn on `clear` so that a collision (about
    /// n^2 / 2^129) could not repeat pass after pass on the same keys.
    hash_key: [u64; 2],
    /// When set, `clear` keeps the key: reproducible tests and benchmarks.
    fixed_hash_key: bool,
}

impl std::fmt::Debug for OffsetMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Deliberately leaves out the table and the secret hash key.
        f.debug_struct("OffsetMap")
            .field("slots", &self.slots.len())
            .field("max_entries", &self.max_entries)
            .field("entries", &self.entries)
            .field("load_factor", &self.load_factor)
            .field("base_offset", &self.base_offset)
            .field("latest_offset", &self.latest_offset)
            .finish_non_exhaustive()
    }
}

/// Whether a map can work at `load_factor`: in (0, 1), since at 1 the last
/// insert would probe forever. Written so that NaN fails too. One rule for
/// [`OffsetMap::new`] and `CleanerConfig::validate`.
pub(crate) fn load_factor_is_usable(load_factor: f64) -> bool {
    load_factor > 0.0 && load_factor < 1.0
}

/// How many keys a map of `budget_bytes` holds at `load_factor` (0: none,
/// the budget is unusable). One rule for [`OffsetMap::new`] and
/// `CleanerConfig::validate`, so a buffer the config check accepts is one
/// every cleaner thread can build its map from.
pub(crate) fn max_entries(budget_bytes: usize, load_factor: f64) -> usize {
    let slot_count = budget_bytes / BYTES_PER_ENTRY;
    // f64 has 53 bits of mantissa, exact for any slot count a machine can
    // allocate; the `min` guards the one-empty-slot invariant against
    // rounding up at load factors just below 1.
    ((slot_count as f64 * load_factor).floor() as usize).min(slot_count.saturating_sub(1))
}

impl OffsetMap {
    /// A map using at most `budget_bytes` of memory (Kafka's per-thread
    /// share of `dedupe_buffer_bytes`) that holds up to
    /// `floor(budget_bytes / 20 × load_factor)` keys. `load_factor` must be
    /// in (0, 1): at 1 the last insert would probe forever. The memory is
    /// allocated and zeroed here, once; an allocation failure is an error,
    /// not an abort.
    pub fn new(budget_bytes: usize, load_factor: f64) -> Result<Self> {
        Self::build(budget_bytes, load_factor, random_key(), false)
    }

    /// Like [`OffsetMap::new`] but with a fixed fingerprint key, also kept
    /// across `clear`, so slot placement is reproducible. For tests and
    /// benchmarks; production maps use `new`, whose key nobody can predict.
    pub fn with_hash_key(
        budget_bytes: usize,
        load_factor: f64,
        hash_key: [u64; 2],
    ) -> Result<Self> {
        Self::build(budget_bytes, load_factor, hash_key, true)
    }

    fn build(
        budget_bytes: usize,
        load_factor: f64,
        hash_key: [u64; 2],
        fixed_hash_key: bool,
    ) -> Result<Self> {
        if !load_factor_is_usable(load_factor) {
            return Err(CleanerError::InvalidConfig {
                setting: "load_factor",
                reason: format!("must be greater than 0 and less than 1, got {load_factor}"),
            });
        }
        let slot_count = budget_bytes / BYTES_PER_ENTRY;
        let max_entries = max_entries(budget_bytes, load_factor);
        if max_entries == 0 {
            return Err(CleanerError::InvalidConfig {
                setting: "dedupe_buffer_bytes",
                reason: format!(
                    "{budget_bytes} bytes at load factor {load_factor} hold no key; \
                     each slot takes {BYTES_PER_ENTRY} bytes"
                ),
            });
        }
        let mut table = Vec::new();
        table
            .try_reserve_exact(slot_count)
            .map_err(|_| CleanerError::OutOfMemory {
                purpose: "the cleaner's offset map",
                bytes: slot_count.saturating_mul(BYTES_PER_ENTRY),
            })?;
        table.resize(slot_count, Slot::EMPTY);
        Ok(OffsetMap {
            slots: table.into_boxed_slice(),
            max_entries,
            entries: 0,
            load_factor,
            base_offset: None,
            latest_offset: None,
            hash_key,
            fixed_hash_key,
        })
    }

    /// Home slot of a fingerprint: the high half of `fp[0] × slots`
    /// (Lemire's multiply-shift), uniform for any slot count, so the whole
    /// budget is usable without rounding to a power of two.
    fn home_slot(&self, fp: &Fingerprint) -> usize {
        ((u128::from(fp[0]) * self.slots.len() as u128) >> 64) as usize
    }

    /// Index of the slot holding `fp`, or of the empty slot where it would
    /// go. Ends because at least one slot is always empty.
    fn probe(&self, fp: &Fingerprint) -> usize {
        let packed = pack(*fp);
        let mut index = self.home_slot(fp);
        loop {
            let slot = &self.slots[index];
            if slot.is_empty() || slot.fingerprint == packed {
                return index;
            }
            index += 1;
            if index == self.slots.len() {
                index = 0;
            }
        }
    }

    /// Record that `key` occurs at `offset`. The map keeps the largest offset
    /// seen for each key. Updating a key already in the map succeeds even at
    /// the load limit (Kafka stops the pass there); only new keys need room.
    pub fn put(&mut self, key: &[u8], offset: u64) -> PutOutcome {
        let fp = fingerprint(&self.hash_key, key);
        let base = self.base_offset.unwrap_or(offset);
        let index = self.probe(&fp);
        let slot = self.slots[index];
        if !slot.is_empty() && base + u64::from(slot.stored_delta - 1) >= offset {
            // A newer or equal offset is already recorded; nothing to store.
            self.note_offset(base, offset);
            return PutOutcome::Stored;
        }
        if slot.is_empty() && self.entries >= self.max_entries {
            return PutOutcome::Full;
        }
        let delta = match offset.checked_sub(base) {
            Some(delta) if delta <= MAX_OFFSET_DELTA => delta,
            Some(_) => return PutOutcome::Full,
            // Only reachable for a new key: an existing key's offset is
            // ≥ base, so a lower offset took the early return above.
            None => return PutOutcome::BelowBase,
        };
        if slot.is_empty() {
            self.entries += 1;
        }
        self.slots[index] = Slot {
            fingerprint: pack(fp),
            // delta ≤ u32::MAX - 1, so this neither truncates nor hits 0.
            stored_delta: delta as u32 + 1,
        };
        self.note_offset(base, offset);
        PutOutcome::Stored
    }

    fn note_offset(&mut self, base: u64, offset: u64) {
        self.base_offset = Some(base);
        self.latest_offset = Some(self.latest_offset.map_or(offset, |l| l.max(offset)));
    }

    /// The newest offset recorded for `key`, if any.
    pub fn get(&self, key: &[u8]) -> Option<u64> {
        let base = self.base_offset?;
        let fp = fingerprint(&self.hash_key, key);
        let slot = &self.slots[self.probe(&fp)];
        if slot.is_empty() {
            None
        } else {
            Some(base + u64::from(slot.stored_delta - 1))
        }
    }

    /// Forget every key, keeping the allocation, ready for the next pass.
    pub fn clear(&mut self) {
        self.slots.fill(Slot::EMPTY);
        self.entries = 0;
        self.base_offset = None;
        self.latest_offset = None;
        if !self.fixed_hash_key {
            self.hash_key = random_key();
        }
    }

    /// Number of keys in the map.
    pub fn len(&self) -> usize {
        self.entries
    }

    /// Whether the map holds no key.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Number of slots in the table (the budget divided by 20).
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// The load limit: how many keys fit before `put` reports `Full`.
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// The load factor the map was built with.
    pub fn load_factor(&self) -> f64 {
        self.load_factor
    }

    /// Fraction of slots in use, as Kafka's `utilization` (entries / slots).
    pub fn utilization(&self) -> f64 {
        self.entries as f64 / self.slots.len() as f64
    }

    /// The largest offset put since creation or `clear` (Kafka's
    /// `latestOffset`); `None` when nothing was put.
    pub fn latest_offset(&self) -> Option<u64> {
        self.latest_offset
    }

    /// The offset that stored deltas are relative to: the first offset put
    /// since creation or `clear`.
    pub fn base_offset(&self) -> Option<u64> {
        self.base_offset
    }

    /// Bytes of memory per slot ([`BYTES_PER_ENTRY`]).
    pub fn bytes_per_entry(&self) -> usize {
        BYTES_PER_ENTRY
    }

    /// Bytes actually allocated for the table; never more than the budget.
    pub fn allocated_bytes(&self) -> usize {
        self.slots.len() * size_of::<Slot>()
    }
}

#[cfg(test)]
mod tests {
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
        assert_eq!(map.base_offset(), Some(10));
        assert_eq!(map.latest_offset(), Some(11));
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
        // Even one below the base: the key is known with a newer offset.
        assert_eq!(map.put(b"k", 1), PutOutcome::Stored);
        assert_eq!(map.get(b"k"), Some(9));
        assert_eq!(map.len(), 1);
        assert_eq!(map.latest_offset(), Some(9));
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
        assert_eq!(map.latest_offset(), None);
        assert_eq!(map.base_offset(), None);
        assert_eq!(map.slots(), slots);
        assert_eq!(map.slots.as_ptr(), table, "clear must not reallocate");
        for i in 0..40u64 {
            assert_eq!(map.get(&i.to_le_bytes()), None);
        }
        // A new pass gets a new base, even one below the old one.
        assert_eq!(map.put(b"x", 3), PutOutcome::Stored);
        assert_eq!(map.get(b"x"), Some(3));
        assert_eq!(map.base_offset(), Some(3));
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
        assert_eq!(map.latest_offset(), Some(89));
        // Known keys still take newer offsets at the limit.
        assert_eq!(map.put(&5u64.to_be_bytes(), 91), PutOutcome::Stored);
        assert_eq!(map.get(&5u64.to_be_bytes()), Some(91));
        assert_eq!(map.latest_offset(), Some(91));
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
                PutOutcome::BelowBase => panic!("offsets are ascending"),
            }
        }
        assert_eq!(end, Some(3));
        assert_eq!(map.get(b"a"), Some(2));
        assert_eq!(map.get(b"b"), Some(1));
        assert_eq!(map.get(b"c"), None);
        assert_eq!(map.latest_offset(), Some(2));

        // Second pass resumes at the record that did not fit.
        map.clear();
        for &(key, offset) in dirty.iter().filter(|(_, o)| *o >= 3) {
            assert_eq!(map.put(key, offset), PutOutcome::Stored);
        }
        assert_eq!(map.get(b"c"), Some(3));
        assert_eq!(map.get(b"b"), Some(4));
        assert_eq!(map.get(b"a"), None);
        assert_eq!(map.latest_offset(), Some(4));
    }

    #[test]
    fn offsets_outside_the_delta_window() {
        let mut map = map_with_slots(10);
        let base = 1_000_000_000_000;
        assert_eq!(map.put(b"first", base), PutOutcome::Stored);
        // The last offset a 32-bit delta can hold.
        assert_eq!(map.put(b"far", base + MAX_OFFSET_DELTA), PutOutcome::Stored);
        assert_eq!(map.get(b"far"), Some(base + MAX_OFFSET_DELTA));
        // One past it ends the pass, for new and known keys alike.
        assert_eq!(
            map.put(b"beyond", base + MAX_OFFSET_DELTA + 1),
            PutOutcome::Full
        );
        assert_eq!(
            map.put(b"first", base + MAX_OFFSET_DELTA + 1),
            PutOutcome::Full
        );
        assert_eq!(map.get(b"first"), Some(base));
        assert_eq!(map.get(b"beyond"), None);
        // Out-of-order input is reported, not silently misfiled.
        assert_eq!(map.put(b"early", base - 1), PutOutcome::BelowBase);
        assert_eq!(map.get(b"early"), None);
        assert_eq!(map.len(), 2);
        assert_eq!(map.latest_offset(), Some(base + MAX_OFFSET_DELTA));
        // Offsets near u64::MAX do not overflow.
        map.clear();
        assert_eq!(map.put(b"top", u64::MAX), PutOutcome::Stored);
        assert_eq!(map.get(b"top"), Some(u64::MAX));
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
        for budget in [60, 61, 79, 80, 1000, 1019, 1 << 20, (1 << 20) + 7] {
            let map = OffsetMap::new(budget, DEFAULT_LOAD_FACTOR).unwrap();
            assert!(map.allocated_bytes() <= budget, "budget {budget}");
            assert!(
                budget - map.allocated_bytes() < BYTES_PER_ENTRY,
                "budget {budget}: no more than one slot's worth left unused"
            );
            assert_eq!(map.slots(), budget / BYTES_PER_ENTRY);
            assert_eq!(map.bytes_per_entry(), BYTES_PER_ENTRY);
        }
        // Kafka's default 128 MiB: 6.7 M slots and 6.04 M keys, against
        // 5.59 M slots and 5.03 M keys at Kafka's 24 bytes per entry.
        let map = OffsetMap::new(128 << 20, DEFAULT_LOAD_FACTOR).unwrap();
        assert_eq!(map.slots(), 6_710_886);
        assert_eq!(map.max_entries(), 6_039_797);
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
        for budget in [0, 19, 20, 39] {
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
        let two_slots = OffsetMap::new(40, DEFAULT_LOAD_FACTOR).unwrap();
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
}
