//! The model's reads: a whole partition read in one call and checked
//! against the model (offsets, every record served field for field, each
//! key's latest record on a compact topic, Kafka's tombstone contract),
//! and fetches from random offsets with random limits.

use std::collections::HashMap;

use super::{now_ms, World, ALL_RECORDS};
use crate::common::driver::{FetchPath, Record};

impl World {
    /// Whether the model requires `offset` of `t`-`p` (its key's latest
    /// record) to be served now: at or above the log start, and not a
    /// tombstone past `delete.retention.ms`.
    fn required(&self, t: usize, p: u32, offset: u64, now: i64) -> bool {
        let topic = &self.topics[t];
        let m = &topic.parts[p as usize];
        let acked = &m.records[&offset];
        offset >= m.log_start
            && (acked.record.value.is_some()
                || now < acked.before_ms.saturating_add(topic.delete_retention_ms))
    }

    /// One served record: the one acknowledged at its offset, field for
    /// field (an append-time timestamp between the produce's call and
    /// answer).
    fn check_record(&self, t: usize, p: u32, offset: u64, got: &Record) {
        let name = self.topics[t].name;
        let m = &self.topics[t].parts[p as usize];
        let Some(want) = m.records.get(&offset) else {
            panic!(
                "{name}-{p}: offset {offset} was never acknowledged: {}",
                self.context()
            );
        };
        let what = format!("{name}-{p} offset {offset}: {}", self.context());
        assert_eq!(got.key, want.record.key, "key of {what}");
        assert_eq!(got.value, want.record.value, "value of {what}");
        assert_eq!(got.headers, want.record.headers, "headers of {what}");
        let ts = got.timestamp_ms.unwrap();
        match want.record.timestamp_ms {
            Some(given) => assert_eq!(ts, given, "timestamp of {what}"),
            None => assert!(
                (want.before_ms..=want.after_ms).contains(&ts),
                "append time {ts} outside [{}, {}] of {what}",
                want.before_ms,
                want.after_ms
            ),
        }
    }

    /// The whole partition against the model: its offsets, every record
    /// served, and (compact topics) every key's latest record.
    pub(super) fn check_partition(&mut self, t: usize, p: u32) {
        let name = self.topics[t].name;
        let policy = self.topics[t].policy;
        let offsets = self.driver.offsets(name, p).unwrap();
        let (next, log_start) = {
            let m = &self.topics[t].parts[p as usize];
            (m.next, m.log_start)
        };
        assert_eq!(
            offsets.end,
            next,
            "{name}-{p}: the end offset is what was acknowledged: {}",
            self.context()
        );
        assert_eq!(
            offsets.log_start,
            log_start,
            "{name}-{p}: the log start is what DeleteRecords moved it to: {}",
            self.context()
        );
        // Read in one call: a background pass between two reads could
        // otherwise remove a key's newest record after an older one was read.
        let path = self.fetch_path();
        let began = now_ms();
        let all = self
            .driver
            .fetch(name, p, 0, ALL_RECORDS, usize::MAX, path)
            .unwrap();
        let now = now_ms();
        // Kafka's contract for tombstones: a scan that takes less than
        // `delete.retention.ms` sees each key's final state. One that takes
        // longer (always, at 0 ms) may have read a key's older record
        // before the pass that removed it and then missed the tombstone a
        // later pass collected; then only its latest record, if served, has
        // to be the newest.
        let scan_outlived_tombstones = now - began >= self.topics[t].delete_retention_ms;
        let served: Vec<u64> = all.records.iter().map(|(o, _)| *o).collect();
        for w in served.windows(2) {
            assert!(
                w[0] < w[1],
                "{name}-{p}: {} then {}: {}",
                w[0],
                w[1],
                self.context()
            );
        }
        assert!(
            served.first().is_none_or(|&o| o >= log_start),
            "{name}-{p}: offset {:?} below the log start {log_start} served: {}",
            served.first(),
            self.context()
        );
        for (offset, r) in &all.records {
            self.check_record(t, p, *offset, r);
        }
        if !policy.compacts() {
            let m = &self.topics[t].parts[p as usize];
            let want: Vec<u64> = m.records.range(log_start..).map(|(o, _)| *o).collect();
            assert_eq!(
                served,
                want,
                "{name}-{p}: every acknowledged record from the log start: {}",
                self.context()
            );
            assert_eq!(
                offsets.beginning,
                log_start,
                "{name}-{p}: the beginning: {}",
                self.context()
            );
            return;
        }
        // Compacted: per key, the newest record served is its latest (a key
        // never comes back to an older value), unless the latest is not
        // required (below the log start, or an expired tombstone), and then
        // nothing of the key is served at all.
        let mut newest: HashMap<Vec<u8>, u64> = HashMap::new();
        for (offset, r) in &all.records {
            newest.insert(r.key.clone().unwrap(), *offset);
        }
        let latest: Vec<(Vec<u8>, u64)> = self.topics[t].parts[p as usize]
            .latest
            .iter()
            .map(|(k, o)| (k.clone(), *o))
            .collect();
        for (key, offset) in latest {
            let shown = String::from_utf8_lossy(&key).into_owned();
            let tombstone = self.topics[t].parts[p as usize].records[&offset]
                .record
                .value
                .is_none();
            match newest.get(&key) {
                Some(&o) if o != offset && tombstone && scan_outlived_tombstones => {
                    assert!(
                        !self.required(t, p, offset, now),
                        "{name}-{p} key {shown}: its latest record {offset}, a tombstone, is missing: {}",
                        self.context()
                    );
                    self.coverage.scans_outlived_tombstones += 1;
                }
                Some(&o) => assert_eq!(
                    o,
                    offset,
                    "{name}-{p} key {shown}: the newest record served is not its latest ({}, delete.retention.ms {}, read in {} ms): {}",
                    if tombstone { "a tombstone" } else { "a value" },
                    self.topics[t].delete_retention_ms,
                    now - began,
                    self.context()
                ),
                None => {
                    assert!(
                        !self.required(t, p, offset, now),
                        "{name}-{p} key {shown}: its latest record {offset} is missing: {}",
                        self.context()
                    );
                    if offset >= log_start {
                        self.coverage.tombstones_gone += 1;
                    }
                }
            }
        }
        let m = &self.topics[t].parts[p as usize];
        let above = m.records.range(log_start..).count();
        self.coverage.records_compacted_away += (above - served.len()) as u64;
    }

    /// A fetch from a random offset with random limits: the first records
    /// served at or after it (every acknowledged one on a topic that does
    /// not compact, every required one on a compact topic), at least one
    /// if there is one.
    pub(super) fn fetch(&mut self) {
        let Some((t, p)) = self.existing_partition() else {
            return;
        };
        let name = self.topics[t].name;
        let (next, log_start) = {
            let m = &self.topics[t].parts[p as usize];
            (m.next, m.log_start)
        };
        let from = self.rng.below(next + 2);
        let max_records = 1 + self.rng.below(20) as usize;
        let max_bytes = self.rng.pick(&[1, 200, 4096, usize::MAX]);
        let path = self.fetch_path();
        let got = self
            .driver
            .fetch(name, p, from, max_records, max_bytes, path)
            .unwrap();
        let now = now_ms();
        self.coverage.fetches += 1;
        let context = format!(
            "{name}-{p} {path:?} fetch from {from} ({max_records} records, {max_bytes} bytes): {}",
            self.context()
        );
        let offsets: Vec<u64> = got.records.iter().map(|(o, _)| *o).collect();
        assert!(offsets.len() <= max_records, "{context}");
        for w in offsets.windows(2) {
            assert!(w[0] < w[1], "{context}");
        }
        let start = from.max(log_start);
        assert!(
            offsets.first().is_none_or(|&o| o >= start),
            "{offsets:?}: {context}"
        );
        for (offset, r) in &got.records {
            self.check_record(t, p, *offset, r);
        }
        if let Some(&last) = offsets.last() {
            assert_eq!(got.next_offset, last + 1, "the next offset: {context}");
        }
        let m = &self.topics[t].parts[p as usize];
        let policy = self.topics[t].policy;
        // What must be served from `start` on.
        let must: Vec<u64> = m
            .records
            .range(start..)
            .map(|(o, _)| *o)
            .filter(|&o| {
                !policy.compacts()
                    || self.topics[t].parts[p as usize].records[&o]
                        .record
                        .key
                        .as_ref()
                        .is_some_and(|k| m.latest.get(k) == Some(&o))
                        && self.required(t, p, o, now)
            })
            .collect();
        match offsets.last() {
            None => assert!(
                must.is_empty(),
                "nothing served, but {must:?} must be: {context}"
            ),
            Some(&last) => {
                for o in must.iter().filter(|&&o| o <= last) {
                    assert!(offsets.contains(o), "{o} skipped ({offsets:?}): {context}");
                }
                if !policy.compacts() {
                    let want: Vec<u64> = must.iter().take(offsets.len()).copied().collect();
                    assert_eq!(offsets, want, "{context}");
                }
            }
        }
    }

    fn fetch_path(&mut self) -> FetchPath {
        self.rng.pick(&[FetchPath::Http, FetchPath::Kafka])
    }

    /// ListOffsets by timestamp on a topic that does not compact (where
    /// every record from the log start is known): the first offset from
    /// the log start whose timestamp is at least T, or the end. An
    /// append-time record whose window (the produce's call to its answer)
    /// straddles T may or may not count, so any of those before the first
    /// record that surely counts is an answer too.
    pub(super) fn list_offsets(&mut self) {
        let Some((t, p)) = self.existing_partition() else {
            return;
        };
        if self.topics[t].policy.compacts() {
            return;
        }
        let name = self.topics[t].name;
        let m = &self.topics[t].parts[p as usize];
        let offsets: Vec<u64> = m.records.range(m.log_start..).map(|(o, _)| *o).collect();
        let target = match (offsets.is_empty(), self.rng.below(4)) {
            (false, 0 | 1) => {
                let o = offsets[self.rng.below(offsets.len() as u64) as usize];
                let a = &self.topics[t].parts[p as usize].records[&o];
                a.record.timestamp_ms.unwrap_or(a.before_ms)
            }
            (_, 2) => 1_600_000_000_000 + self.rng.below(1_000_000_000) as i64,
            _ => now_ms() - self.rng.below(5_000) as i64,
        };
        let m = &self.topics[t].parts[p as usize];
        let mut allowed = Vec::new();
        let mut sure = None;
        for o in &offsets {
            let a = &m.records[o];
            let (lo, hi) = match a.record.timestamp_ms {
                Some(ts) => (ts, ts),
                None => (a.before_ms, a.after_ms),
            };
            if lo >= target {
                sure = Some(*o);
                break;
            }
            if hi >= target {
                allowed.push(*o);
            }
        }
        allowed.push(sure.unwrap_or(m.next));
        let got = self.driver.offset_for_timestamp(name, p, target).unwrap();
        assert!(
            allowed.contains(&got),
            "{name}-{p}: ListOffsets for timestamp {target} answered {got}, not one of {allowed:?}: {}",
            self.context()
        );
        self.coverage.timestamp_lookups += 1;
    }

    pub(super) fn existing_partition(&mut self) -> Option<(usize, u32)> {
        let t = self.rng.below(self.topics.len() as u64) as usize;
        let count = self.topics[t].partitions?;
        Some((t, self.rng.below(u64::from(count)) as u32))
    }
}
