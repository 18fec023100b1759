//! Kafka's LogCleaner behaviour, one test per property, driven one pass at
//! a time (`clean_once`) with a clock the test sets.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tidelog_cleaner::compacted::format::{decode, encode, Decoded, Fields};
use tidelog_cleaner::fault::{FaultPoint, Faults};
use tidelog_cleaner::{
    CleanerConfig, CompactTopicConfig, CompactedLog, CompactedLogs, CompactedRecord, LogCleaner,
    OffsetMap,
};
use tidelog_storage::{PhysicalOffset, QueueOffset};

const T0: i64 = 1_700_000_000_000;

struct Harness {
    dir: tempfile::TempDir,
    clock: Arc<AtomicI64>,
    logs: Arc<CompactedLogs>,
    cleaner: LogCleaner,
}

fn topic_config() -> CompactTopicConfig {
    CompactTopicConfig {
        segment_bytes: 2048,
        min_cleanable_dirty_ratio: 0.5,
        delete_retention_ms: 60_000,
        ..CompactTopicConfig::default()
    }
}

fn harness_in(
    dir: tempfile::TempDir,
    clock: Arc<AtomicI64>,
    faults: Option<Arc<Faults>>,
) -> Harness {
    harness_with_faults(dir, clock, CleanerConfig::default(), faults)
}

/// The compacted logs here are filled directly: there is no CommitLog for
/// a pass to make durable.
fn no_commit_log() -> Arc<impl tidelog_cleaner::CopySource> {
    Arc::new(|| Ok::<(), tidelog_storage::StoreError>(()))
}

fn harness_with_faults(
    dir: tempfile::TempDir,
    clock: Arc<AtomicI64>,
    config: CleanerConfig,
    faults: Option<Arc<Faults>>,
) -> Harness {
    let c = Arc::clone(&clock);
    let logs =
        CompactedLogs::open_with_clock(dir.path(), Arc::new(move || c.load(Ordering::SeqCst)))
            .unwrap();
    logs.set_topic("t", topic_config());
    let data_dir = dir.path().to_path_buf();
    let cleaner = match faults {
        None => LogCleaner::new(Arc::clone(&logs), data_dir, config, no_commit_log()),
        Some(faults) => LogCleaner::new_with_faults(
            Arc::clone(&logs),
            data_dir,
            config,
            no_commit_log(),
            faults,
        ),
    }
    .unwrap();
    Harness {
        dir,
        clock,
        logs,
        cleaner,
    }
}

fn harness() -> Harness {
    harness_in(
        tempfile::tempdir().unwrap(),
        Arc::new(AtomicI64::new(T0)),
        None,
    )
}

fn record(offset: u64, key: &str, value: Option<&str>, store_ts: i64) -> CompactedRecord {
    let b = Bytes::from(encode(&Fields {
        offset: QueueOffset::new(offset),
        timestamp_ms: store_ts,
        store_timestamp_ms: store_ts,
        delete_horizon_ms: 0,
        physical_offset: PhysicalOffset::new(offset * 1000),
        key: Some(key.as_bytes()),
        value: value.map(str::as_bytes),
        headers_block: &[],
        header_count: 0,
        producer: None,
    }));
    match decode(&b).unwrap() {
        Decoded::Record(r) => r,
        Decoded::End => panic!(),
    }
}

impl Harness {
    fn now(&self) -> i64 {
        self.clock.load(Ordering::SeqCst)
    }

    fn log(&self, p: u32) -> Arc<CompactedLog> {
        self.logs.log_or_create("t", p).unwrap()
    }

    /// Append `versions` versions of `keys` keys to partition `p`,
    /// round-robin, values `k{key}-v{version}`.
    fn fill(&self, p: u32, keys: u64, versions: u64) {
        let log = self.log(p);
        let mut offset = log.next_offset();
        for v in 0..versions {
            for k in 0..keys {
                let r = record(
                    offset,
                    &format!("k{k}"),
                    Some(&format!("k{k}-v{v}")),
                    self.now(),
                );
                log.append(&r, topic_config().roll_policy(), self.now())
                    .unwrap();
                offset += 1;
            }
        }
        log.end_batch().unwrap();
    }

    fn put(&self, p: u32, key: &str, value: Option<&str>) -> u64 {
        let log = self.log(p);
        let offset = log.next_offset();
        log.append(
            &record(offset, key, value, self.now()),
            topic_config().roll_policy(),
            self.now(),
        )
        .unwrap();
        log.end_batch().unwrap();
        offset
    }

    fn all(&self, p: u32) -> Vec<CompactedRecord> {
        self.log(p).read(0, usize::MAX, usize::MAX).unwrap()
    }

    /// key → (offset, value) of the newest record per key.
    fn latest(&self, p: u32) -> BTreeMap<String, (u64, Option<String>)> {
        let mut m = BTreeMap::new();
        for r in self.all(p) {
            let k = String::from_utf8(r.key().unwrap().to_vec()).unwrap();
            let v = r.value().map(|v| String::from_utf8(v.to_vec()).unwrap());
            m.insert(k, (r.offset.get(), v));
        }
        m
    }

    fn clean(&self) -> Option<(String, u32, tidelog_cleaner::RunStats)> {
        let mut map = OffsetMap::new(1 << 20, 0.9).unwrap();
        self.cleaner.clean_once(&mut map).unwrap()
    }

    fn clean_with(&self, map: &mut OffsetMap) -> Option<(String, u32, tidelog_cleaner::RunStats)> {
        self.cleaner.clean_once(map).unwrap()
    }

    /// "Restart": drop the cleaner and the logs, reopen everything from
    /// disk, declare the topic with `config`.
    fn restart(self, config: CompactTopicConfig) -> Harness {
        let Harness {
            dir,
            clock,
            cleaner,
            logs,
        } = self;
        drop(cleaner);
        drop(logs);
        let h = harness_in(dir, clock, None);
        h.logs.set_topic("t", config);
        h
    }
}

fn assert_strictly_increasing(recs: &[CompactedRecord]) {
    for w in recs.windows(2) {
        assert!(
            w[0].offset < w[1].offset,
            "{} then {}",
            w[0].offset,
            w[1].offset
        );
    }
}

#[test]
fn latest_value_per_key_survives_at_its_original_offset() {
    let h = harness();
    h.fill(0, 10, 20);
    let before = h.latest(0);
    let end = h.log(0).next_offset();
    let size_before = h.log(0).size_bytes();
    h.log(0).roll(h.now()).unwrap();
    let (_, _, stats) = h.clean().expect("dirty enough to clean");
    assert!(stats.records_removed > 0);
    let after = h.all(0);
    assert_eq!(after.len(), 10, "one record per key");
    assert_strictly_increasing(&after);
    assert_eq!(h.latest(0), before, "same latest value at the same offset");
    assert_eq!(h.log(0).next_offset(), end, "end offset unchanged");
    assert!(h.log(0).size_bytes() < size_before / 5);
    // Gaps: offsets are the originals, not renumbered.
    assert_eq!(after.last().unwrap().offset.get(), end - 1);
    assert!(after[0].offset.get() >= 190 - 10);
}

#[test]
fn tombstones_are_kept_for_delete_retention_then_removed() {
    let h = harness();
    h.fill(0, 5, 4);
    h.put(0, "k1", None);
    h.put(0, "k3", None);
    h.log(0).roll(h.now()).unwrap();
    h.clean().unwrap();
    let latest = h.latest(0);
    assert_eq!(latest["k1"].1, None, "tombstone kept as the latest for k1");
    assert_eq!(latest.len(), 5);
    // Stamped with a horizon on that first pass.
    let tomb = h.all(0).into_iter().find(|r| r.is_tombstone()).unwrap();
    assert_eq!(tomb.delete_horizon_ms, h.now() + 60_000);
    // Within delete.retention.ms: a forced pass keeps them.
    h.clock.fetch_add(30_000, Ordering::SeqCst);
    h.cleaner.request("t", true).unwrap();
    h.clean().unwrap();
    assert_eq!(h.all(0).iter().filter(|r| r.is_tombstone()).count(), 2);
    // After it: a pass is scheduled by itself (no new dirt) and drops them.
    h.clock.fetch_add(31_000, Ordering::SeqCst);
    let ran = h.clean();
    assert!(
        ran.is_some(),
        "an expired tombstone schedules a pass on its own"
    );
    let latest = h.latest(0);
    assert!(!latest.contains_key("k1") && !latest.contains_key("k3"));
    assert_eq!(latest.len(), 3);
}

#[test]
fn partial_passes_with_a_two_key_map_converge() {
    let h = harness();
    h.fill(0, 6, 5);
    let want = h.latest(0);
    h.log(0).roll(h.now()).unwrap();
    // Room for two keys (load factor 0.9 of three slots of 20 bytes).
    let mut map = OffsetMap::new(60, 0.9).unwrap();
    assert!(map.max_entries() <= 2);
    let mut passes = 0;
    while h.all(0).len() > 6 {
        h.cleaner.request("t", false).unwrap();
        let (_, _, stats) = h.clean_with(&mut map).expect("a pass");
        assert!(stats.partial || h.all(0).len() == 6);
        passes += 1;
        assert!(passes < 100, "did not converge");
    }
    assert!(passes > 1, "needed partial passes");
    assert_eq!(h.latest(0), want);
    assert_strictly_increasing(&h.all(0));
}

#[test]
fn an_expired_tombstone_past_a_partial_map_stays_until_its_key_is_mapped() {
    // Found by the compaction model (tests/model.rs): a pass whose map
    // filled before a tombstone still rewrites the tombstone's segment. If
    // it dropped the expired tombstone there, the older value of its key,
    // which that map does not know, would stay: the deleted key would come
    // back.
    let h = harness();
    h.put(0, "a", Some("old"));
    for k in ["b", "c", "d"] {
        h.put(0, k, Some("v"));
    }
    let tombstone = h.put(0, "a", None);
    h.log(0).roll(h.now()).unwrap();
    // Room for two keys: each pass maps two and stops at the third.
    let mut map = OffsetMap::new(60, 0.9).unwrap();
    assert_eq!(map.max_entries(), 2);
    h.cleaner.request("t", false).unwrap();
    let (_, _, first) = h.clean_with(&mut map).unwrap();
    assert!(first.partial && first.end_offset < tombstone);
    // The tombstone was kept and stamped; its horizon passes.
    h.clock.fetch_add(61_000, Ordering::SeqCst);
    let mut passes = 0;
    loop {
        let latest = h.latest(0);
        assert!(
            latest.get("a").is_none_or(|(o, _)| *o == tombstone),
            "key a came back: {latest:?}"
        );
        if !latest.contains_key("a") {
            break;
        }
        h.cleaner.request("t", false).unwrap();
        h.clean_with(&mut map).unwrap();
        passes += 1;
        assert!(passes < 10, "the tombstone never went: {latest:?}");
    }
    assert_eq!(h.latest(0).keys().collect::<Vec<_>>(), ["b", "c", "d"]);
}

/// A map whose fingerprints collide for every key
/// (`OffsetMap::with_colliding_fingerprints`, 0 bits): its one slot points
/// at the newest record of all, whatever the key.
fn all_colliding_map() -> OffsetMap {
    OffsetMap::with_colliding_fingerprints(1 << 12, 0.9, 0).unwrap()
}

#[test]
fn a_fingerprint_collision_keeps_extra_records_and_never_the_wrong_one_goes() {
    let h = harness();
    h.fill(0, 6, 4);
    h.put(0, "k2", None);
    h.put(0, "k4", Some("last"));
    let want = h.latest(0);
    let end = h.log(0).next_offset();
    h.log(0).roll(h.now()).unwrap();
    let (_, _, stats) = h.clean_with(&mut all_colliding_map()).unwrap();
    // Only the newest record's own key could be deduplicated: every other
    // key's records were kept, the newest of each among them.
    assert_eq!(
        h.latest(0),
        want,
        "every key's newest record, at its offset"
    );
    assert!(stats.collisions > 0, "{stats:?}");
    assert!(stats.records_removed > 0, "k4's older records went");
    assert!(h
        .all(0)
        .iter()
        .all(|r| r.key().as_deref() != Some(b"k4".as_slice()) || r.offset.get() == end - 1));
    // The checkpoint stayed below the kept records: a pass with a real map
    // maps them again and compacts them.
    assert_eq!(stats.collisions, 21, "all but k4's five records");
    assert_eq!(h.cleaner.status("t")[0].checkpoint_offset, Some(0));
    h.cleaner.request("t", false).unwrap();
    let (_, _, stats) = h.clean().unwrap();
    assert_eq!(stats.collisions, 0);
    assert_eq!(h.latest(0), want);
    assert_eq!(h.all(0).len(), 6, "one record per key");
    assert_eq!(h.cleaner.status("t")[0].checkpoint_offset, Some(end));
}

#[test]
fn a_fingerprint_collision_keeps_an_expired_tombstone_with_the_values_it_deletes() {
    // A collision keeps a key's older value beside its tombstone. Were the
    // tombstone then dropped as expired, the older value would come back.
    let h = harness();
    h.put(0, "a", Some("old"));
    let tombstone = h.put(0, "a", None);
    h.put(0, "b", Some("v"));
    h.log(0).roll(h.now()).unwrap();
    let (_, _, first) = h.clean_with(&mut all_colliding_map()).unwrap();
    assert_eq!(first.collisions, 2, "{first:?}");
    assert_eq!(h.all(0).len(), 3);
    // The tombstone was stamped; its horizon passes.
    h.clock.fetch_add(61_000, Ordering::SeqCst);
    h.cleaner.request("t", false).unwrap();
    h.clean_with(&mut all_colliding_map()).unwrap();
    let latest = h.latest(0);
    assert_eq!(
        latest["a"],
        (tombstone, None),
        "key a came back: {latest:?}"
    );
    // A pass with a real map drops the tombstone and the value together.
    h.cleaner.request("t", false).unwrap();
    h.clean().unwrap();
    assert_eq!(h.latest(0).keys().collect::<Vec<_>>(), ["b"]);
    assert_eq!(h.all(0).len(), 1);
}

#[test]
fn the_active_segment_and_young_segments_are_untouched() {
    let h = harness();
    let mut cfg = topic_config();
    cfg.min_compaction_lag_ms = 10_000;
    h.logs.set_topic("t", cfg);
    // Old records, then (20 s later, in their own segments) fresh ones.
    h.fill(0, 4, 30);
    let log = h.log(0);
    log.roll(h.now()).unwrap();
    h.clock.fetch_add(20_000, Ordering::SeqCst);
    let fresh_from = log.next_offset();
    h.fill(0, 4, 30);
    let untouchable: Vec<_> = log
        .segments()
        .into_iter()
        .filter(|s| s.base_offset() >= fresh_from)
        .map(|s| (s.base_offset(), std::fs::read(s.path()).unwrap()))
        .collect();
    assert!(
        untouchable.len() >= 2,
        "young sealed segments and the active one"
    );
    h.cleaner.request("t", false).unwrap();
    h.clean().unwrap();
    // Segments past firstUncleanable (young ones, the active one) are
    // byte-for-byte untouched (the pass's flush may have renamed a
    // rolled segment from `.new`, nothing more).
    for (base, bytes) in &untouchable {
        let s = log
            .segments()
            .into_iter()
            .find(|s| s.base_offset() == *base)
            .unwrap();
        assert_eq!(
            &std::fs::read(s.path()).unwrap(),
            bytes,
            "{}",
            s.path().display()
        );
    }
    // The old part was cleaned down to one record per key.
    let old: Vec<_> = h
        .all(0)
        .into_iter()
        .filter(|r| r.offset.get() < fresh_from)
        .collect();
    assert_eq!(old.len(), 4);
}

#[test]
fn min_compaction_lag_holds_fresh_records_back() {
    let h = harness();
    let mut cfg = topic_config();
    cfg.min_compaction_lag_ms = 60_000;
    h.logs.set_topic("t", cfg);
    h.fill(0, 3, 20);
    h.log(0).roll(h.now()).unwrap();
    h.cleaner.request("t", false).unwrap();
    let before = h.all(0).len();
    let ran = h.clean();
    // Everything is younger than the lag: nothing cleaned.
    assert_eq!(h.all(0).len(), before);
    assert!(ran.is_none_or(|(_, _, s)| s.records_removed == 0));
    h.clock.fetch_add(61_000, Ordering::SeqCst);
    h.cleaner.request("t", false).unwrap();
    h.clean().unwrap();
    assert_eq!(h.all(0).len(), 3);
}

#[test]
fn max_compaction_lag_forces_a_clean_even_at_dirty_ratio_one() {
    let h = harness();
    let mut cfg = topic_config();
    cfg.min_cleanable_dirty_ratio = 1.0; // the ratio alone never qualifies
    cfg.max_compaction_lag_ms = 60_000;
    h.logs.set_topic("t", cfg);
    h.fill(0, 3, 20);
    h.log(0).roll(h.now()).unwrap();
    assert!(h.clean().is_none(), "not eligible yet");
    h.clock.fetch_add(61_000, Ordering::SeqCst);
    h.clean().expect("max lag forces it");
    assert_eq!(h.all(0).len(), 3);
}

#[test]
fn the_filthiest_log_is_picked_first() {
    let h = harness();
    // Partition 0: few duplicates; partition 1: mostly duplicates.
    h.fill(0, 40, 2);
    h.fill(1, 2, 40);
    for p in [0, 1] {
        h.log(p).roll(h.now()).unwrap();
    }
    // Make both eligible by ratio; 1 is dirtier only by bytes-to-remove,
    // so first clean 0 once to give it a clean part, then compare.
    let (_, p, _) = h.clean().unwrap();
    let (_, q, _) = h.clean().unwrap();
    assert_ne!(p, q, "both get cleaned");
    // Now add dirt: much more to partition 1 than 0.
    h.fill(0, 40, 1);
    h.fill(1, 2, 200);
    for p in [0, 1] {
        h.log(p).roll(h.now()).unwrap();
    }
    let status: BTreeMap<u32, f64> = h
        .cleaner
        .status("t")
        .iter()
        .map(|s| (s.partition, s.dirty_ratio))
        .collect();
    assert!(status[&1] > status[&0], "{status:?}");
    let (_, first, _) = h.clean().unwrap();
    assert_eq!(first, 1, "{status:?}");
}

/// A harness started with `text` as its cleaner-offset-checkpoint file,
/// 3 keys × 10 versions in partition 0, rolled, and its first pass.
fn first_pass_after_checkpoint_file(text: &str) -> (Harness, tidelog_cleaner::RunStats) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cleaner-offset-checkpoint"), text).unwrap();
    let h = harness_in(dir, Arc::new(AtomicI64::new(T0)), None);
    h.fill(0, 3, 10);
    h.log(0).roll(h.now()).unwrap();
    let (_, _, stats) = h.clean().expect("everything is dirty");
    (h, stats)
}

#[test]
fn out_of_range_checkpoints_are_reset() {
    // A checkpoint far past the log's end (e.g. a log recreated).
    let (h, stats) = first_pass_after_checkpoint_file("0\n1\nt 0 999999\n");
    assert_eq!(stats.first_dirty, 0, "reset to the log start");
    assert_eq!(h.all(0).len(), 3);
    assert_eq!(h.cleaner.status("t")[0].checkpoint_offset, Some(30));
}

#[test]
fn a_corrupt_checkpoint_is_read_as_empty_and_the_logs_cleaned_from_the_start() {
    // Damaged from outside: the count says two entries, there is one.
    let (h, stats) = first_pass_after_checkpoint_file("0\n2\nt 0 25\n");
    assert_eq!(stats.first_dirty, 0, "not the 25 of the damaged file");
    assert_eq!(h.all(0).len(), 3);
    // The next store replaces the damaged file with a good one.
    let stored = tidelog_cleaner::CleanerCheckpoint::load(h.dir.path()).unwrap();
    assert_eq!(stored.get("t", 0), Some(30));
}

/// Stop a swap at `point` after `successes` operations there succeeded,
/// as a crash would (nothing after it runs), then reopen from disk.
fn check_after_crash(point: FaultPoint, successes: u64) {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(AtomicI64::new(T0));
    let faults = Arc::new(Faults::default());
    let h = harness_in(dir, clock, Some(Arc::clone(&faults)));
    h.fill(0, 7, 30);
    let want = h.latest(0);
    h.log(0).roll(h.now()).unwrap();
    // Small segments were written; cleaning may merge them (so a group has
    // several old segments to delete at the crash points between deletes).
    let mut cfg = topic_config();
    cfg.segment_bytes = 1 << 20;
    h.logs.set_topic("t", cfg.clone());
    faults.fail_after(point, successes);
    let mut map = OffsetMap::new(1 << 20, 0.9).unwrap();
    assert!(
        h.cleaner.clean_once(&mut map).is_err(),
        "crash at {point:?}"
    );
    let h = h.restart(cfg);
    let recs = h.all(0);
    assert_strictly_increasing(&recs); // no duplicate offsets or keys twice in a row
    assert_eq!(h.latest(0), want, "after crash at {point:?}");
    // No leftovers, and a later pass finishes the job.
    assert_only_segment_files(&h);
    h.cleaner.request("t", false).unwrap();
    h.clean();
    assert_eq!(h.all(0).len(), 7);
    assert_eq!(h.latest(0), want);
}

fn file_names(h: &Harness) -> Vec<String> {
    let mut names: Vec<_> = std::fs::read_dir(h.dir.path().join("compacted/t/0"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// Only `<base>.log` files: no `.cleaned`, `.swap` or `.deleted` one.
fn assert_only_segment_files(h: &Harness) {
    let names = file_names(h);
    assert!(names.iter().all(|n| n.ends_with(".log")), "{names:?}");
}

/// A pass renames the segments its swaps replaced aside instead of
/// unlinking them (the unlink, which frees their page cache, was a
/// quarter of a warm pass's thread); the next housekeeping unlinks them,
/// and startup deletes any a crash or a shutdown left.
#[test]
fn old_segments_are_deleted_after_the_pass_and_at_startup_if_left() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(AtomicI64::new(T0));
    let h = harness_in(dir, clock, None);
    h.fill(0, 5, 40);
    h.log(0).roll(h.now()).unwrap();
    // As the checkpoint does: the rolled segments get their `.log` names.
    h.log(0).flush().unwrap();
    let old: Vec<String> = file_names(&h)
        .into_iter()
        .filter(|n| n.ends_with(".log"))
        .collect();
    assert!(old.len() > 2, "{old:?}");
    let want = h.latest(0);
    h.clean().unwrap();
    assert_eq!(h.latest(0), want);
    // Every old segment but the active one is aside, none unlinked yet.
    let aside: Vec<String> = file_names(&h)
        .into_iter()
        .filter(|n| n.ends_with(".log.deleted"))
        .collect();
    let replaced: Vec<String> = old[..old.len() - 1]
        .iter()
        .map(|n| format!("{n}.deleted"))
        .collect();
    assert_eq!(aside, replaced);
    assert_eq!(h.cleaner.delete_retired().unwrap(), replaced.len());
    assert_only_segment_files(&h);
    assert_eq!(h.cleaner.delete_retired().unwrap(), 0);
    // Housekeeping (the start of every pass) unlinks them too.
    h.fill(0, 5, 4);
    h.log(0).roll(h.now()).unwrap();
    h.cleaner.request("t", false).unwrap();
    h.clean().unwrap();
    assert!(file_names(&h).iter().any(|n| n.ends_with(".deleted")));
    let want = h.latest(0);
    h.clean();
    assert!(
        !file_names(&h).iter().any(|n| n.ends_with(".deleted")),
        "{:?}",
        file_names(&h)
    );
    // Left behind by a pass whose process then stopped: deleted at start.
    h.fill(0, 5, 4);
    h.log(0).roll(h.now()).unwrap();
    h.cleaner.request("t", false).unwrap();
    let want_after = {
        h.clean().unwrap();
        h.latest(0)
    };
    assert_ne!(want_after, want);
    assert!(file_names(&h).iter().any(|n| n.ends_with(".deleted")));
    let h = h.restart(topic_config());
    assert_only_segment_files(&h);
    assert_eq!(h.latest(0), want_after);
    assert_strictly_increasing(&h.all(0));
}

/// Every swap operation, and the second delete of old segments (the first
/// is gone, the others are not).
fn swap_faults() -> Vec<(FaultPoint, u64)> {
    let mut v: Vec<_> = FaultPoint::ALL.iter().map(|&p| (p, 0)).collect();
    v.push((FaultPoint::DeleteOld, 1));
    v
}

#[test]
fn a_crash_at_any_swap_step_leaves_the_old_segments_or_the_new_one() {
    for (point, successes) in swap_faults() {
        check_after_crash(point, successes);
    }
}

/// Key → (offset, value) as `Harness::latest` gives it, from the raw
/// records produced; and every produced record by offset.
type Produced = BTreeMap<u64, CompactedRecord>;

fn produced(h: &Harness, into: &mut Produced) {
    for r in h.all(0) {
        into.entry(r.offset.get()).or_insert(r);
    }
}

/// Every record the log serves is one that was produced, byte for byte
/// (a tombstone may have gained its delete horizon).
fn assert_served_as_produced(h: &Harness, produced: &Produced, context: &str) {
    for r in h.all(0) {
        let p = produced
            .get(&r.offset.get())
            .unwrap_or_else(|| panic!("{context}: offset {} was never produced", r.offset));
        if r.is_tombstone() {
            assert_eq!(r.key(), p.key(), "{context}: offset {}", r.offset);
            assert_eq!(
                r.with_delete_horizon(0).raw(),
                p.with_delete_horizon(0).raw(),
                "{context}: offset {}",
                r.offset
            );
        } else {
            assert_eq!(r.raw(), p.raw(), "{context}: offset {}", r.offset);
        }
    }
}

/// A pass fails at `point` (an I/O error); new records may arrive before
/// the retry; the retry runs after the backoff; then a restart. The log
/// must still serve every key's latest record, once, as produced, and leave
/// no `.cleaned` or `.swap` file behind.
fn check_retry_after_failure(point: FaultPoint, successes: u64, newer_records: bool) {
    let context = format!("{point:?} after {successes}, newer records: {newer_records}");
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(AtomicI64::new(T0));
    let faults = Arc::new(Faults::default());
    let h = harness_in(dir, clock, Some(Arc::clone(&faults)));
    let mut cfg = topic_config();
    cfg.segment_bytes = 1 << 20; // groups merge several small segments
    h.logs.set_topic("t", cfg.clone());
    let mut all = Produced::new();
    h.fill(0, 7, 30);
    h.log(0).roll(h.now()).unwrap();
    produced(&h, &mut all);
    faults.fail_after(point, successes);
    let mut map = OffsetMap::new(1 << 20, 0.9).unwrap();
    assert!(h.cleaner.clean_once(&mut map).is_err(), "{context}");
    faults.heal();
    if newer_records {
        // Newer values of old keys, two new keys and a tombstone, in new
        // sealed segments: the retry's group reaches further than the
        // failed one did.
        h.fill(0, 9, 3);
        h.put(0, "k2", None);
        h.log(0).roll(h.now()).unwrap();
        produced(&h, &mut all);
    }
    let want = h.latest(0);
    // The retry, after the backoff.
    h.clock.fetch_add(16_000, Ordering::SeqCst);
    h.clean_with(&mut map)
        .unwrap_or_else(|| panic!("{context}: the retry did not run"));
    assert_eq!(h.latest(0), want, "{context}: before the restart");
    assert_eq!(h.all(0).len(), want.len(), "{context}: one record per key");
    // What the retry's swap renamed aside is unlinked by the next
    // housekeeping.
    h.cleaner.delete_retired().unwrap();
    assert_only_segment_files(&h);
    let h = h.restart(cfg);
    assert_only_segment_files(&h);
    assert_strictly_increasing(&h.all(0));
    assert_eq!(h.latest(0), want, "{context}: after the restart");
    assert_served_as_produced(&h, &all, &context);
    assert_eq!(h.all(0).len(), want.len(), "{context}: one record per key");
}

#[test]
fn a_retry_after_an_io_error_at_any_swap_step_reconciles_first() {
    for (point, successes) in swap_faults() {
        for newer_records in [false, true] {
            check_retry_after_failure(point, successes, newer_records);
        }
    }
}

#[test]
fn a_fetch_running_during_a_swap_reads_correct_records() {
    let h = harness();
    h.fill(0, 5, 40);
    let log = h.log(0);
    log.roll(h.now()).unwrap();
    // A reader holds the pre-clean segments (as a fetch in progress does).
    let held = log.segments();
    let expected: Vec<u64> = h.all(0).iter().map(|r| r.offset.get()).collect();
    h.clean().unwrap();
    // The old segment files are gone, but reads through the held handles
    // still return every original record, whole.
    let mut offsets = Vec::new();
    for s in &held {
        let mut r = s.reader(0);
        while let Some(rec) = r.next_record().unwrap() {
            offsets.push(rec.offset.get());
        }
    }
    assert_eq!(offsets, expected);
    // And a fetch after the swap sees the cleaned log.
    assert_eq!(h.all(0).len(), 5);
}

#[test]
fn records_near_the_size_limit_are_cleaned_whole() {
    let h = harness();
    let mut cfg = topic_config();
    cfg.segment_bytes = 3 << 20;
    h.logs.set_topic("t", cfg);
    let big = "B".repeat(1 << 20);
    for i in 0..6 {
        let key = if i % 2 == 0 { "a" } else { "b" };
        h.put(0, key, Some(&format!("{i}{big}")));
    }
    h.log(0).roll(h.now()).unwrap();
    h.cleaner.request("t", false).unwrap();
    h.clean().unwrap();
    let recs = h.all(0);
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0].value().unwrap().len(), (1 << 20) + 1);
    assert!(recs[1].value().unwrap().starts_with(b"5"));
}

#[test]
fn restart_resumes_from_the_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(AtomicI64::new(T0));
    let h = harness_in(dir, Arc::clone(&clock), None);
    h.fill(0, 5, 20);
    h.log(0).roll(h.now()).unwrap();
    let (_, _, first) = h.clean().unwrap();
    assert_eq!(first.first_dirty, 0);
    let end = first.end_offset;
    let Harness {
        dir, cleaner, logs, ..
    } = h;
    drop(cleaner);
    drop(logs);
    let h = harness_in(dir, clock, None);
    assert_eq!(h.cleaner.status("t")[0].checkpoint_offset, Some(end));
    // Nothing new: nothing to do.
    assert!(h.clean().is_none());
    // New dirt: the next pass starts at the checkpoint, not at 0.
    h.fill(0, 5, 20);
    h.log(0).roll(h.now()).unwrap();
    let (_, _, second) = h.clean().unwrap();
    assert_eq!(second.first_dirty, end);
    assert_eq!(h.all(0).len(), 5);
}

#[test]
fn compact_delete_applies_retention_to_old_segments() {
    let h = harness();
    let mut cfg = topic_config();
    cfg.delete_too = true;
    cfg.retention_ms = 60_000;
    h.logs.set_topic("t", cfg);
    h.fill(0, 50, 2); // distinct keys: cleaning alone would keep them all
    h.clock.fetch_add(120_000, Ordering::SeqCst);
    h.put(0, "fresh", Some("v"));
    h.log(0).roll(h.now()).unwrap();
    let segs_before = h.log(0).segments().len();
    h.clean();
    let recs = h.all(0);
    assert!(h.log(0).segments().len() < segs_before);
    assert!(recs
        .iter()
        .any(|r| r.key().as_deref() == Some(b"fresh".as_slice())));
    assert!(
        recs.len() < 50,
        "old keys deleted by retention.ms: {}",
        recs.len()
    );
}

#[test]
fn threads_clean_on_request_and_report_status() {
    let h = harness();
    h.fill(0, 4, 25);
    h.fill(1, 4, 25);
    h.cleaner.start().unwrap();
    let requested = h.cleaner.request("t", true).unwrap();
    assert_eq!(requested.len(), 2);
    let runs = h.cleaner.wait("t", &requested, Duration::from_secs(30));
    for (p, last) in runs {
        // A pass may already have run on its own before the request (the
        // log was dirty enough); the requested one finishes the job.
        last.unwrap_or_else(|| panic!("partition {p} did not run"));
        assert_eq!(h.all(p).len(), 4);
    }
    let status = h.cleaner.status("t");
    assert!(status
        .iter()
        .all(|s| s.state == tidelog_cleaner::CleanState::Idle && s.last_run.is_some()));
    let m = h.cleaner.metrics();
    assert!(m.runs >= 2);
    h.cleaner.stop();
}

#[test]
fn a_failing_partition_is_marked_uncleanable_and_retried_after_the_backoff() {
    let h = harness();
    h.fill(0, 4, 30);
    h.log(0).roll(h.now()).unwrap();
    // Damage a sealed segment: the next pass over it fails.
    let seg = h.log(0).segments()[0].path();
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[100] ^= 0xff;
    std::fs::write(&seg, &bytes).unwrap();
    h.cleaner.request("t", false).unwrap();
    let mut map = OffsetMap::new(1 << 20, 0.9).unwrap();
    assert!(h.cleaner.clean_once(&mut map).is_err());
    let status = h.cleaner.status("t");
    assert!(
        matches!(
            status[0].state,
            tidelog_cleaner::CleanState::Uncleanable { .. }
        ) && status[0].state.to_string().starts_with("uncleanable: "),
        "{status:?}"
    );
    let m = h.cleaner.metrics();
    assert_eq!((m.uncleanable_partitions, m.failures), (1, 1));
    assert!(m.uncleanable_bytes > 0);
    // Within the backoff it is skipped...
    assert!(h.cleaner.clean_once(&mut map).unwrap().is_none());
    // ...after it, retried (and fails again, still uncleanable).
    h.clock.fetch_add(16_000, Ordering::SeqCst);
    assert!(h.cleaner.clean_once(&mut map).is_err());
    assert_eq!(h.cleaner.metrics().failures, 2);
}

#[test]
fn a_panicking_cleaner_thread_is_restarted_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(AtomicI64::new(T0));
    let faults = Arc::new(Faults::default());
    faults.panic_after(FaultPoint::RenameToSwap, 0);
    let h = harness_with_faults(
        dir,
        clock,
        CleanerConfig {
            backoff_ms: 10,
            ..CleanerConfig::default()
        },
        Some(Arc::clone(&faults)),
    );
    h.fill(0, 4, 30);
    let want = h.latest(0);
    h.cleaner.start().unwrap();
    h.cleaner.request("t", true).unwrap();
    // Bounded wait for the supervisor to restart the thread twice.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while h.cleaner.metrics().thread_restarts < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        h.cleaner.request("t", false).unwrap();
    }
    assert!(
        h.cleaner.metrics().thread_restarts >= 2,
        "restarted after each panic"
    );
    h.cleaner.stop();
    // Nothing was swapped in: the data is whole.
    assert_eq!(h.latest(0), want);
}

#[test]
fn a_checkpoint_past_the_log_end_is_lowered_at_start() {
    // Recovery can cut a compacted log below its cleaner checkpoint (copies
    // of records the CommitLog lost). The records that reuse those offsets
    // must count as dirty, so the checkpoint comes down to the end.
    let h = harness();
    h.fill(0, 4, 2); // offsets 0..8
    let end = h.log(0).next_offset();
    assert_eq!(end, 8);
    let mut cp = tidelog_cleaner::CleanerCheckpoint::new();
    cp.set("t", 0, 50).unwrap();
    cp.set("t", 1, 3).unwrap(); // no such log: left alone
    cp.store(h.dir.path()).unwrap();
    let cleaner = LogCleaner::new(
        Arc::clone(&h.logs),
        h.dir.path().to_path_buf(),
        CleanerConfig::default(),
        no_commit_log(),
    )
    .unwrap();
    let status = cleaner.status("t");
    let p0 = status.iter().find(|s| s.partition == 0).unwrap();
    assert_eq!(p0.checkpoint_offset, Some(end));
    // Stored, so a restart after new records pass 50 does not bring it back.
    let stored = tidelog_cleaner::CleanerCheckpoint::load(h.dir.path()).unwrap();
    assert_eq!(stored.get("t", 0), Some(end));
    assert_eq!(stored.get("t", 1), Some(3));
}

/// A record of key `key` whose producer timestamp is `timestamp_ms`.
fn timed_record(offset: u64, key: &str, timestamp_ms: i64, store_ts: i64) -> CompactedRecord {
    let value = format!("{key}@{offset}");
    let b = Bytes::from(encode(&Fields {
        offset: QueueOffset::new(offset),
        timestamp_ms,
        store_timestamp_ms: store_ts,
        delete_horizon_ms: 0,
        physical_offset: PhysicalOffset::new(offset * 1000),
        key: Some(key.as_bytes()),
        value: Some(value.as_bytes()),
        headers_block: &[],
        header_count: 0,
        producer: None,
    }));
    match decode(&b).unwrap() {
        Decoded::Record(r) => r,
        Decoded::End => panic!(),
    }
}

/// Lookups of a compacted log against a scan of the records it holds.
fn check_time_lookups(h: &Harness, rng: &mut tidelog_storage::test_rng::SplitMix64, what: &str) {
    let held = h.all(0);
    let end = h.log(0).next_offset();
    // The first record with the largest timestamp (ListOffsets -3).
    let largest = held
        .iter()
        .map(|r| r.timestamp_ms)
        .max()
        .and_then(|max| held.iter().find(|r| r.timestamp_ms == max))
        .map(|r| (r.offset.get(), r.timestamp_ms));
    assert_eq!(
        h.log(0).max_timestamp_record().unwrap(),
        largest,
        "{what}: the largest timestamp"
    );
    let mut asked = vec![i64::MIN, i64::MAX, 0];
    for _ in 0..80 {
        let ts = held[rng.below(held.len() as u64) as usize].timestamp_ms;
        asked.push(ts + rng.below(3) as i64 - 1);
    }
    for t in asked {
        let want = held
            .iter()
            .find(|r| r.timestamp_ms >= t)
            .map_or(end, |r| r.offset.get());
        assert_eq!(
            h.log(0).offset_for_timestamp(t).unwrap(),
            want,
            "{what}: timestamp {t}"
        );
    }
}

/// The timestamp lookup of a compact topic answers over the records its
/// compacted log holds, with non-monotonic timestamps: before cleaning,
/// after a pass removed most records (the cleaned segments' sparse
/// indexes are built as they are written), and after a restart (built by
/// the open's scan).
#[test]
fn time_lookups_answer_over_the_records_compaction_kept() {
    let mut rng = tidelog_storage::test_rng::SplitMix64(0x7135_c0de);
    let h = harness();
    // Segments of several sparse-index entries each.
    let config = CompactTopicConfig {
        segment_bytes: 24_000,
        ..topic_config()
    };
    h.logs.set_topic("t", config.clone());
    let log = h.log(0);
    let mut clock = T0;
    for offset in 0..2000 {
        clock += rng.below(10) as i64;
        // A saw-tooth (runs of records whose timestamps fall back by a
        // million), jitter, and rare outliers far ahead.
        let tooth = 1_000_000 * ((offset / 70) % 3) as i64;
        let ts = if rng.one_in(400) {
            clock + 10_000_000
        } else {
            clock + tooth - rng.below(2000) as i64
        };
        let key = format!("k{}", rng.below(700));
        log.append(
            &timed_record(offset, &key, ts, h.now()),
            config.roll_policy(),
            h.now(),
        )
        .unwrap();
    }
    log.end_batch().unwrap();
    assert!(log.segments().len() > 3, "several segments");
    check_time_lookups(&h, &mut rng, "before cleaning");
    log.roll(h.now()).unwrap();
    let (_, _, stats) = h.clean().expect("dirty enough to clean");
    assert!(stats.records_removed > 500, "{stats:?}");
    check_time_lookups(&h, &mut rng, "after cleaning");
    let h = h.restart(config);
    check_time_lookups(&h, &mut rng, "after a restart");
}

/// Counted, not timed: a pass writes its kept records to the cleaned file
/// in a few large writes, not one write a record. The fault seam counts
/// the writes: the pass must finish with only one allowed.
#[test]
fn a_pass_writes_its_kept_records_in_large_writes() {
    let faults = Arc::new(Faults::default());
    let h = harness_in(
        tempfile::tempdir().unwrap(),
        Arc::new(AtomicI64::new(T0)),
        Some(Arc::clone(&faults)),
    );
    // 300 keys, 2 versions: 300 records kept in one group.
    h.fill(0, 300, 2);
    h.log(0).roll(h.now()).unwrap();
    let mut cfg = topic_config();
    cfg.segment_bytes = 1 << 20;
    h.logs.set_topic("t", cfg);
    let want = h.latest(0);
    faults.fail_after(FaultPoint::WriteCleaned, 1);
    let (_, _, stats) = h.clean().expect("the log is eligible");
    assert_eq!(stats.records_kept, 300);
    assert!(stats.segments_cleaned > 1, "one group of several segments");
    assert_eq!(h.all(0).len(), 300);
    assert_eq!(h.latest(0), want);
}

/// Counted, not timed: a pass over a small dirty range uses a table sized
/// for its records, not the whole dedupe buffer (whose random slots would
/// each be a cache and TLB miss), and still maps every key.
#[test]
fn a_pass_uses_only_the_map_its_dirty_range_needs() {
    let h = harness();
    h.fill(0, 50, 4);
    h.log(0).roll(h.now()).unwrap();
    let want = h.latest(0);
    let mut map = OffsetMap::new(128 << 20, 0.9).unwrap();
    assert_eq!(map.slots_in_use(), map.slots());
    let (_, _, stats) = h.clean_with(&mut map).expect("the log is eligible");
    assert!(!stats.partial);
    assert_eq!(stats.keys, 50);
    // 200 records: a table of a few thousand slots of the 6.7 million.
    assert!(map.slots_in_use() <= 2048, "{} slots", map.slots_in_use());
    assert_eq!(h.latest(0), want);
    assert_eq!(h.all(0).len(), 50);
}

/// The nice value in a /proc `stat` file: field 19, the 17th after the
/// parenthesised command name (which may hold spaces).
#[cfg(target_os = "linux")]
fn nice_in_stat(stat: &str) -> i32 {
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    after_name.split(' ').nth(16).unwrap().parse().unwrap()
}

/// Cleaner threads run below the process's CPU priority, so a pass takes
/// cores that producers leave idle, not theirs.
#[cfg(target_os = "linux")]
#[test]
fn cleaner_threads_run_at_a_lower_cpu_priority() {
    let h = harness();
    h.fill(0, 4, 25);
    h.cleaner.start().unwrap();
    // A pass has run on the thread, so it is past its start.
    let requested = h.cleaner.request("t", true).unwrap();
    let runs = h.cleaner.wait("t", &requested, Duration::from_secs(30));
    assert!(runs.iter().all(|(_, last)| last.is_some()));
    let own = nice_in_stat(&std::fs::read_to_string("/proc/thread-self/stat").unwrap());
    let mut cleaner_threads = 0;
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let path = task.unwrap().path();
        let Ok(comm) = std::fs::read_to_string(path.join("comm")) else {
            continue; // the thread just ended
        };
        // The kernel keeps 15 bytes of a thread's name: "tidelog-cleaner".
        if !comm.starts_with("tidelog-cleaner") {
            continue;
        }
        let nice = nice_in_stat(&std::fs::read_to_string(path.join("stat")).unwrap());
        assert_eq!(
            nice,
            (own + tidelog_cleaner::cleaner::CLEANER_NICE_INCREMENT).min(19)
        );
        cleaner_threads += 1;
    }
    assert_eq!(cleaner_threads, 1);
    h.cleaner.stop();
}
