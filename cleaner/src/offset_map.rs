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
#[path = "offset_map_tests.rs"]
mod tests;
