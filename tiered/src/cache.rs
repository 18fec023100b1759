//! The read-ahead cache: an LRU of byte ranges of record objects, bounded
//! by `read_cache_bytes`. Two kinds of entry share the bound: an object's
//! parsed footer and index (`Meta`, charged at their in-memory size) and
//! fixed blocks of its records section (`Block`, BLOCK_BYTES each, the last
//! one shorter).
//!
//! Invariant: `bytes` is the sum of the charged sizes of the entries and
//! never exceeds `limit` after an insert returns; an entry larger than the
//! limit is not kept (the caller still uses what it fetched). Keys name the
//! object by its full path; an object's name fixes its bytes (an upload
//! retry writes the same bytes under the same name), so an entry is never
//! stale while its topic exists; deleting a topic drops its entries.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bytes::Bytes;

use crate::format::{Footer, IndexEntry};

/// Size of one cached block of records (and the unit of read-ahead).
pub const BLOCK_BYTES: u64 = 1024 * 1024;
/// Blocks one GET fetches at most past the one a read needs.
pub const READ_AHEAD_BLOCKS: u64 = 3;

/// An object's footer and index, as the reader uses them.
#[derive(Debug)]
pub struct ObjectMeta {
    pub footer: Footer,
    pub index: Vec<IndexEntry>,
}

impl ObjectMeta {
    /// What it is charged in the cache.
    pub fn charged_bytes(&self) -> u64 {
        (std::mem::size_of::<ObjectMeta>() + self.index.len() * std::mem::size_of::<IndexEntry>())
            as u64
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Key {
    Meta(Arc<str>),
    Block(Arc<str>, u64),
}

impl Key {
    fn object(&self) -> &str {
        match self {
            Key::Meta(o) | Key::Block(o, _) => o,
        }
    }
}

#[derive(Clone, Debug)]
pub enum Value {
    Meta(Arc<ObjectMeta>),
    Block(Bytes),
}

impl Value {
    fn charged_bytes(&self) -> u64 {
        match self {
            Value::Meta(m) => m.charged_bytes(),
            Value::Block(b) => b.len() as u64,
        }
    }
}

#[derive(Debug)]
pub struct Lru {
    limit: u64,
    bytes: u64,
    tick: u64,
    entries: HashMap<Key, (Value, u64)>,
    /// Last use → key; the first entry is the least recently used.
    order: BTreeMap<u64, Key>,
}

impl Lru {
    pub fn new(limit: u64) -> Self {
        Lru {
            limit,
            bytes: 0,
            tick: 0,
            entries: HashMap::new(),
            order: BTreeMap::new(),
        }
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn get(&mut self, key: &Key) -> Option<Value> {
        self.tick += 1;
        let tick = self.tick;
        let (value, used) = self.entries.get_mut(key)?;
        self.order.remove(used);
        *used = tick;
        self.order.insert(tick, key.clone());
        Some(value.clone())
    }

    /// Inserts (or replaces) an entry; returns how many were evicted.
    pub fn insert(&mut self, key: Key, value: Value) -> u64 {
        let size = value.charged_bytes();
        self.remove(&key);
        if size > self.limit {
            return 0;
        }
        let mut evicted = 0;
        while self.bytes + size > self.limit {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            if let Some((v, _)) = self.entries.remove(&oldest) {
                self.bytes -= v.charged_bytes();
                evicted += 1;
            }
        }
        self.tick += 1;
        self.order.insert(self.tick, key.clone());
        self.entries.insert(key, (value, self.tick));
        self.bytes += size;
        evicted
    }

    fn remove(&mut self, key: &Key) {
        if let Some((v, used)) = self.entries.remove(key) {
            self.order.remove(&used);
            self.bytes -= v.charged_bytes();
        }
    }

    /// Drops every entry of objects whose path starts with `prefix`.
    pub fn remove_prefix(&mut self, prefix: &str) {
        let doomed: Vec<Key> = self
            .entries
            .keys()
            .filter(|k| k.object().starts_with(prefix))
            .cloned()
            .collect();
        for k in doomed {
            self.remove(&k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(n: usize) -> Value {
        Value::Block(Bytes::from(vec![0u8; n]))
    }

    #[test]
    fn bound_is_kept_and_least_recent_goes_first() {
        let mut lru = Lru::new(100);
        let a: Arc<str> = Arc::from("t/0/data/a");
        assert_eq!(lru.insert(Key::Block(a.clone(), 0), block(40)), 0);
        assert_eq!(lru.insert(Key::Block(a.clone(), 1), block(40)), 0);
        assert!(lru.get(&Key::Block(a.clone(), 0)).is_some()); // 0 is now newer than 1
        assert_eq!(lru.insert(Key::Block(a.clone(), 2), block(40)), 1);
        assert!(lru.bytes() <= 100);
        assert!(
            lru.get(&Key::Block(a.clone(), 1)).is_none(),
            "1 was least recent"
        );
        assert!(lru.get(&Key::Block(a.clone(), 0)).is_some());
        // Too large to keep at all: not kept, nothing evicted for it.
        assert_eq!(lru.insert(Key::Block(a.clone(), 3), block(101)), 0);
        assert!(lru.get(&Key::Block(a.clone(), 3)).is_none());
        assert_eq!(lru.bytes(), 80);
        // Replacing an entry does not count it twice.
        lru.insert(Key::Block(a.clone(), 0), block(10));
        assert_eq!(lru.bytes(), 50);
        lru.remove_prefix("t/0/");
        assert_eq!(lru.bytes(), 0);
    }

    #[test]
    fn zero_limit_keeps_nothing() {
        let mut lru = Lru::new(0);
        lru.insert(Key::Block(Arc::from("x"), 0), block(1));
        assert_eq!(lru.bytes(), 0);
        assert!(lru.get(&Key::Block(Arc::from("x"), 0)).is_none());
    }
}
