//! The cleaner's key map: key fingerprint → where the key's newest record
//! is, in a fixed memory budget. Kafka's `SkimpyOffsetMap`, 16 bytes per
//! slot instead of 24, and a hash collision can never drop a live record.
//!
//! One cleaning pass scans the dirty range of a partition in log order and
//! `put`s every record's key with the record's place in the log (a `u64`
//! the caller chooses, growing in log order; see `cleaner/pass.rs`).
//! Afterwards the cleaner drops a record only if `get(key)` points at a
//! later record and that record's key is the same bytes. When the map
//! reaches its load limit, `put` reports [`PutOutcome::Full`] and the caller
//! ends the pass there (a partial pass: clean up to that record, `clear`,
//! continue from it next time).
//!
//! # Slot layout (16 bytes)
//!
//! ```text
//! 0..8    fingerprint   SipHash-2-4 (64-bit output) of the key
//! 8..16   stored        0 = empty slot, else 1 + the value put
//! ```
//!
//! The value is stored whole (no delta from a base), so any place the
//! caller encodes fits, and a pass never ends early because its offsets
//! span too much. Keeping 0 as the empty marker lets the table start as
//! zeroed memory. Four slots per 64-byte cache line, none straddling two.
//! At the default 128 MiB and load factor 0.9 that is 8,388,608 slots and
//! 7,549,747 keys a pass: 17.8 bytes of buffer a key, against Kafka's 26.7.
//!
//! # Collisions
//!
//! Two keys with one fingerprint share a slot, which then holds the later
//! of their newest records. The map alone cannot tell them apart, so it is
//! never the judge: the pass drops a record only after comparing its key
//! with the key of the record the slot points at, read from the segment
//! (`cleaner/pass.rs`, "Collisions"). The cost of a collision is the
//! other key's records kept for one pass; its probability among n keys of
//! a pass is about n^2 / 2^65 (10^-6 at 6 M keys), and the fingerprint key
//! is redrawn every pass, so it does not repeat. This is what lets the slot
//! hold 64 bits of fingerprint where Kafka's holds 128 and still trusts them.
//!
//! # Table: ordered linear probing (Robin Hood)
//!
//! One flat array of slots, no per-entry allocation. A key's home slot is
//! the high half of `fingerprint × slots_in_use` (Lemire's multiply-shift:
//! uniform for any table size, and monotonic in the fingerprint). Probing
//! is linear, so a probe reads consecutive slots (four per cache line).
//! Each run of occupied slots is kept ordered by home slot (Amble and
//! Knuth's ordered hash table; the same order Robin Hood hashing keeps): a
//! new key goes in front of the first entry whose home comes after its own,
//! and the entries from there to the next empty slot shift one slot on. So
//! a lookup ends as soon as it meets an entry that is closer to its home
//! than the lookup is to its own: the key would have been placed before
//! that entry. A miss then costs what a hit costs, about 5.5 slots at load
//! 0.9, where plain linear probing reads about 50 (Knuth's estimates); the
//! rewrite looks up every key of the clean range, and those that the dirty
//! range does not hold are misses.
//!
//! # Table size per pass
//!
//! The whole budget is allocated once, but a pass uses only as much of it as
//! its dirty range can fill: [`OffsetMap::clear_for`] takes an upper bound on
//! the keys the pass can put (its record count) and uses
//! `min(slots, bound × 2 / load_factor)` slots, so the table is at most half
//! as full as the load factor allows. A pass over 50 k records touches 1.8 MB
//! of table, which stays in cache, instead of 50 k random cache lines and
//! pages of 128 MiB; `clear_for` zeroes only the part the previous pass used.
//! The load limit is that of the slots in use; it is never reached when the
//! bound holds, and a bound that was too low only ends the pass early (the
//! partial-pass case). A map at its full size is exactly the one `new`
//! builds.
//!
//! # Invariants
//! - The table is allocated once, `floor(budget_bytes / 16)` slots of
//!   anonymous memory with transparent huge pages asked for (`Table`), and
//!   never grows: allocated bytes ≤ budget.
//! - `len() ≤ max_entries() < slots_in_use() ≤ slots()`, so at least one slot
//!   in use is empty and every probe ends.
//! - Slots at or past `slots_in_use()` are empty.
//! - Along every run of occupied slots, home slots do not decrease
//!   (cyclically: a run may wrap from the last slot in use to the first),
//!   and every entry sits in the run that starts at its home slot.
//! - A fingerprint's stored value only grows (`put` keeps the maximum).
//! - A `put` that cannot be stored changes nothing.

use std::mem::size_of;

use crate::error::{CleanerError, Result};
use crate::fingerprint::{fingerprint, random_key, Fingerprint};

/// Bytes of memory per slot; the budget divided by this is the slot count.
pub const BYTES_PER_ENTRY: usize = 16;

/// Kafka's `log.cleaner.io.buffer.load.factor` default.
pub const DEFAULT_LOAD_FACTOR: f64 = 0.9;

/// The largest value `put` stores: one value of the u64 is taken by the
/// empty marker.
pub const MAX_VALUE: u64 = u64::MAX - 1;

/// [`OffsetMap::clear_for`] sizes the table in use so that the expected keys
/// fill at most `1 / SIZE_HEADROOM` of the load limit.
const SIZE_HEADROOM: f64 = 2.0;

/// The smallest table `clear_for` uses (16 KiB), when the budget allows:
/// below that, a smaller table saves nothing.
const MIN_SLOTS_IN_USE: usize = 1024;

/// One slot of the open-addressing table. `repr(C)` with two u64 fields has
/// no padding, so the size is exactly the layout documented above.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot {
    fingerprint: u64,
    stored: u64,
}

const _: () = assert!(size_of::<Slot>() == BYTES_PER_ENTRY);

impl Slot {
    const EMPTY: Slot = Slot {
        fingerprint: 0,
        stored: 0,
    };

    fn is_empty(&self) -> bool {
        self.stored == 0
    }
}

/// The slot array: anonymous memory mapped once, all zeros (every slot
/// empty) until written, with transparent huge pages asked for. A pass's
/// table is tens of megabytes read at random; in 4 KiB pages nearly every
/// lookup also missed the TLB, and a page walk under virtualisation costs
/// more than the cache miss itself.
struct Table {
    map: memmap2::MmapMut,
    len: usize,
}

impl Table {
    fn new(len: usize) -> Result<Table> {
        let out_of_memory = || CleanerError::OutOfMemory {
            purpose: "the cleaner's offset map",
            bytes: len.saturating_mul(BYTES_PER_ENTRY),
        };
        let bytes = len.checked_mul(BYTES_PER_ENTRY).ok_or_else(out_of_memory)?;
        let map = memmap2::MmapMut::map_anon(bytes.max(1)).map_err(|_| out_of_memory())?;
        // Advice only: without huge pages the map works the same, slower.
        #[cfg(target_os = "linux")]
        let _ = map.advise(memmap2::Advice::HugePage);
        let mut table = Table { map, len };
        // Take the memory now, when the cleaner starts, as a zero-filled
        // allocation would: not in the middle of the first pass, while
        // producers run.
        table.fill(Slot::EMPTY);
        Ok(table)
    }
}

impl std::ops::Deref for Table {
    type Target = [Slot];

    fn deref(&self) -> &[Slot] {
        // SAFETY: the mapping is page-aligned (beyond `Slot`'s 8), holds
        // `len` slots' bytes, starts zeroed and every bit pattern is a
        // valid `Slot` (two u64); it lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().cast::<Slot>(), self.len) }
    }
}

impl std::ops::DerefMut for Table {
    fn deref_mut(&mut self) -> &mut [Slot] {
        // SAFETY: as in `deref`; `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.map.as_mut_ptr().cast::<Slot>(), self.len) }
    }
}

/// A key's fingerprint under one map's hash key ([`OffsetMap::hash`]), so a
/// caller can hash a batch of keys, [`OffsetMap::prefetch`] their slots, and
/// then put or get them without hashing again. Only meaningful for the map
/// that made it, until its next `clear` (which draws a new hash key).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyHash {
    fingerprint: Fingerprint,
}

/// What a [`OffsetMap::put`] did.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PutOutcome {
    /// The key's fingerprint now maps to the larger of its previous value
    /// and this one.
    Stored,
    /// Nothing was stored: the key is new and the map is at its load limit,
    /// or the value is above [`MAX_VALUE`]. End the pass before this
    /// record; the map still describes every record before it.
    Full,
}

/// Where a probe for a fingerprint ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Probe {
    /// The slot holding the key, or where it goes: an empty slot, or the
    /// first entry whose home comes after the key's.
    index: usize,
    found: bool,
    /// Slots read, for the probe-length tests.
    #[cfg_attr(not(test), allow(dead_code))]
    slots_read: usize,
}

/// Key fingerprint → the largest value put for it, in a fixed memory budget.
/// Not thread-safe by design: each cleaner thread owns one and reuses it for
/// every pass with [`OffsetMap::clear`] or [`OffsetMap::clear_for`].
pub struct OffsetMap {
    /// Allocated once, never grown.
    slots: Table,
    /// The table in use: `slots[..in_use]` (module doc, "Table size per
    /// pass"); everything past it is empty.
    in_use: usize,
    /// Load limit of the table in use: `floor(in_use × load_factor)`, and
    /// always `< in_use`.
    max_entries: usize,
    entries: usize,
    load_factor: f64,
    /// Secret SipHash key. Redrawn on `clear` so that a collision (about
    /// n^2 / 2^65) could not repeat pass after pass on the same keys.
    hash_key: [u64; 2],
    /// When set, `clear` keeps the key: reproducible tests and benchmarks.
    fixed_hash_key: bool,
    /// Fingerprint bits kept: all of them, except in the collision tests
    /// ([`OffsetMap::with_colliding_fingerprints`]).
    fingerprint_mask: u64,
}

impl std::fmt::Debug for OffsetMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Deliberately leaves out the table and the secret hash key.
        f.debug_struct("OffsetMap")
            .field("slots", &self.slots.len())
            .field("in_use", &self.in_use)
            .field("max_entries", &self.max_entries)
            .field("entries", &self.entries)
            .field("load_factor", &self.load_factor)
            .finish_non_exhaustive()
    }
}

/// Whether a map can work at `load_factor`: in (0, 1), since at 1 the last
/// insert would probe forever. Written so that NaN fails too. One rule for
/// [`OffsetMap::new`] and `CleanerConfig::validate`.
pub(crate) fn load_factor_is_usable(load_factor: f64) -> bool {
    load_factor > 0.0 && load_factor < 1.0
}

/// Ask the processor to start loading the cache line at `at` and go on.
/// A prefetch instruction, not a load: a load whose value is kept
/// (`black_box`, the first version) made the processor wait for the miss,
/// which took the most time of a pass's map build and lookups.
#[inline(always)]
pub(crate) fn prefetch_line<T>(at: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch only hints the cache: it reads nothing the program
    // sees and never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// How many keys a map of `budget_bytes` holds at `load_factor` (0: none,
/// the budget is unusable). One rule for [`OffsetMap::new`] and
/// `CleanerConfig::validate`, so a buffer the config check accepts is one
/// every cleaner thread can build its map from.
pub(crate) fn max_entries(budget_bytes: usize, load_factor: f64) -> usize {
    limit_for_slots(budget_bytes / BYTES_PER_ENTRY, load_factor)
}

/// The load limit of a table of `slot_count` slots.
fn limit_for_slots(slot_count: usize, load_factor: f64) -> usize {
    // f64 has 53 bits of mantissa, exact for any slot count a machine can
    // allocate; the `min` guards the one-empty-slot invariant against
    // rounding up at load factors just below 1.
    ((slot_count as f64 * load_factor).floor() as usize).min(slot_count.saturating_sub(1))
}

impl OffsetMap {
    /// A map using at most `budget_bytes` of memory (Kafka's per-thread
    /// share of `dedupe_buffer_bytes`) that holds up to
    /// `floor(budget_bytes / 16 × load_factor)` keys. `load_factor` must be
    /// in (0, 1): at 1 the last insert would probe forever. The memory is
    /// mapped here, once (zero pages, each taken when a pass first writes
    /// it); a mapping that fails is an error, not an abort.
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

    /// A map whose fingerprints keep only their low `bits` bits, so that
    /// distinct keys collide at will (0 bits: every key has one fingerprint).
    /// The collision tests' seam: a pass with such a map must still keep
    /// every key's newest record.
    #[cfg(any(test, feature = "failpoints"))]
    pub fn with_colliding_fingerprints(
        budget_bytes: usize,
        load_factor: f64,
        bits: u32,
    ) -> Result<Self> {
        let mut map = Self::build(budget_bytes, load_factor, random_key(), false)?;
        map.fingerprint_mask = 1u64.checked_shl(bits).map_or(u64::MAX, |b| b - 1);
        Ok(map)
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
        Ok(OffsetMap {
            slots: Table::new(slot_count)?,
            in_use: slot_count,
            max_entries,
            entries: 0,
            load_factor,
            hash_key,
            fixed_hash_key,
            fingerprint_mask: u64::MAX,
        })
    }

    /// Home slot of a fingerprint in the table in use: the high half of
    /// `fingerprint × in_use` (Lemire's multiply-shift), uniform for any
    /// size and monotonic in the fingerprint.
    fn home_slot(&self, fingerprint: u64) -> usize {
        ((u128::from(fingerprint) * self.in_use as u128) >> 64) as usize
    }

    /// How far the entry at `index` sits past its home slot.
    fn displacement(&self, index: usize, slot: &Slot) -> usize {
        let home = self.home_slot(slot.fingerprint);
        if index >= home {
            index - home
        } else {
            index + self.in_use - home
        }
    }

    fn next(&self, index: usize) -> usize {
        if index + 1 == self.in_use {
            0
        } else {
            index + 1
        }
    }

    /// Find `hash`'s slot, or where it would go. Ends because at least one
    /// slot in use is always empty.
    fn probe(&self, hash: &KeyHash) -> Probe {
        let mut index = self.home_slot(hash.fingerprint);
        let mut distance = 0;
        loop {
            let slot = &self.slots[index];
            let slots_read = distance + 1;
            if slot.is_empty() {
                return Probe {
                    index,
                    found: false,
                    slots_read,
                };
            }
            if slot.fingerprint == hash.fingerprint {
                return Probe {
                    index,
                    found: true,
                    slots_read,
                };
            }
            // An entry nearer its home than we are to ours has a later home:
            // the run is ordered, so the key would be before it.
            if self.displacement(index, slot) < distance {
                return Probe {
                    index,
                    found: false,
                    slots_read,
                };
            }
            index = self.next(index);
            distance += 1;
        }
    }

    /// `key`'s fingerprint under this map's current hash key.
    pub fn hash(&self, key: &[u8]) -> KeyHash {
        KeyHash {
            fingerprint: fingerprint(&self.hash_key, key) & self.fingerprint_mask,
        }
    }

    /// Start loading `hash`'s home slot into the cache, so that a batch of
    /// puts or gets waits for its memory once rather than once per key.
    pub fn prefetch(&self, hash: &KeyHash) {
        prefetch_line(&self.slots[self.home_slot(hash.fingerprint)]);
    }

    /// Record that `key` occurs at `value` (the record's place in the log).
    /// The map keeps the largest value seen for each fingerprint. Updating
    /// a key already in the map succeeds even at the load limit (Kafka stops
    /// the pass there); only new keys need room.
    pub fn put(&mut self, key: &[u8], value: u64) -> PutOutcome {
        let hash = self.hash(key);
        self.put_hashed(&hash, value)
    }

    /// [`OffsetMap::put`] of a key hashed by [`OffsetMap::hash`].
    pub fn put_hashed(&mut self, hash: &KeyHash, value: u64) -> PutOutcome {
        if value > MAX_VALUE {
            return PutOutcome::Full;
        }
        // value ≤ u64::MAX - 1: neither overflows nor hits 0.
        let stored = value + 1;
        let probe = self.probe(hash);
        if probe.found {
            let slot = &mut self.slots[probe.index];
            // A newer or equal value already recorded needs no change.
            slot.stored = slot.stored.max(stored);
            return PutOutcome::Stored;
        }
        if self.entries >= self.max_entries {
            return PutOutcome::Full;
        }
        // Insert in front of the entry found (if any), shifting the rest of
        // the run one slot on to the next empty slot: the run stays ordered
        // by home slot and every entry stays at or past its home.
        let mut carried = Slot {
            fingerprint: hash.fingerprint,
            stored,
        };
        let mut index = probe.index;
        loop {
            let displaced = std::mem::replace(&mut self.slots[index], carried);
            if displaced.is_empty() {
                break;
            }
            carried = displaced;
            index = self.next(index);
        }
        self.entries += 1;
        PutOutcome::Stored
    }

    /// The largest value recorded for `key`'s fingerprint, if any. The key
    /// or another one with its fingerprint: the caller compares keys.
    pub fn get(&self, key: &[u8]) -> Option<u64> {
        self.get_hashed(&self.hash(key))
    }

    /// [`OffsetMap::get`] of a key hashed by [`OffsetMap::hash`].
    pub fn get_hashed(&self, hash: &KeyHash) -> Option<u64> {
        let probe = self.probe(hash);
        probe.found.then(|| self.slots[probe.index].stored - 1)
    }

    /// Forget every key, keeping the allocation, ready for the next pass,
    /// with the whole table in use.
    pub fn clear(&mut self) {
        self.clear_for(u64::MAX);
    }

    /// Forget every key, ready for a pass that puts at most `keys_bound`
    /// distinct keys: the table in use shrinks to what they need (module
    /// doc, "Table size per pass"). A bound that is too low is safe: the
    /// pass ends early, at `Full`.
    pub fn clear_for(&mut self, keys_bound: u64) {
        // Only the previous table in use can hold entries.
        self.slots[..self.in_use].fill(Slot::EMPTY);
        let wanted = (keys_bound as f64 * SIZE_HEADROOM / self.load_factor).ceil();
        let capacity = self.slots.len();
        self.in_use = if wanted >= capacity as f64 {
            capacity
        } else {
            (wanted as usize).max(MIN_SLOTS_IN_USE).min(capacity)
        };
        self.max_entries = limit_for_slots(self.in_use, self.load_factor);
        self.entries = 0;
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

    /// Number of slots in the table (the budget divided by 16).
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// Number of slots this pass uses ([`OffsetMap::clear_for`]); all of
    /// them after `new` and `clear`.
    pub fn slots_in_use(&self) -> usize {
        self.in_use
    }

    /// The load limit of the table in use: how many keys fit before `put`
    /// reports `Full`.
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// The load limit of the whole table: the most keys one pass can map.
    pub fn capacity(&self) -> usize {
        limit_for_slots(self.slots.len(), self.load_factor)
    }

    /// The load factor the map was built with.
    pub fn load_factor(&self) -> f64 {
        self.load_factor
    }

    /// Fraction of the whole table's slots in use, as Kafka's `utilization`
    /// (entries / slots): how much of the dedupe buffer a pass needed.
    pub fn utilization(&self) -> f64 {
        self.entries as f64 / self.slots.len() as f64
    }

    /// Bytes of memory per slot ([`BYTES_PER_ENTRY`]).
    pub fn bytes_per_entry(&self) -> usize {
        BYTES_PER_ENTRY
    }

    /// Bytes actually allocated for the table; never more than the budget.
    pub fn allocated_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.slots)
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
}
