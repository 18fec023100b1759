//! Seeded model test: random appends across topics and partitions, random
//! clean and unclean reopens, reads by queue offset and by key, all checked
//! against a plain in-memory model. The seed is printed; rerun a failure
//! with TIDELOG_TEST_SEED.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::*;
use tidelog_storage::{QueueOffset, Store, StoreConfig};

const TOPICS: [&str; 3] = ["alpha", "beta", "gamma.v2"];
const PARTITIONS: u32 = 3;
const KEYS: u64 = 12;

#[derive(Clone, Debug, PartialEq)]
struct ModelRecord {
    key: Option<String>,
    value: Option<String>,
    /// Global append order, also sent as the record's `seq` header.
    seq: u64,
}

fn from_stored(r: &tidelog_storage::StoredRecord) -> ModelRecord {
    let h = r.headers();
    assert_eq!(h.len(), 1);
    assert_eq!(h[0].name, "seq");
    ModelRecord {
        key: r.key().map(|k| String::from_utf8(k.to_vec()).unwrap()),
        value: r.value().map(|v| String::from_utf8(v.to_vec()).unwrap()),
        seq: std::str::from_utf8(h[0].value.as_deref().unwrap_or_default())
            .unwrap()
            .parse()
            .unwrap(),
    }
}

fn config(dir: &std::path::Path, rng: &mut Rng) -> StoreConfig {
    let mut c = small_config(dir);
    // Small segments and queue files so rolls happen all the time; sizes
    // vary by seed but stay fixed per directory (they are format choices).
    c.commitlog_segment_bytes = 4096 * (1 + rng.below(3));
    c.consume_queue_units_per_file = 16;
    c.index_entries = 64;
    c.index_slots = 8;
    c.preallocate_next_segment = rng.chance(50);
    c
}

fn check_partition(
    store: &Store,
    model: &HashMap<(usize, u32), Vec<ModelRecord>>,
    t: usize,
    p: u32,
    rng: &mut Rng,
) {
    let expected = model.get(&(t, p)).map(Vec::as_slice).unwrap_or(&[]);
    assert_eq!(
        store.offsets(TOPICS[t], p),
        (0, expected.len() as u64),
        "{}-{p}",
        TOPICS[t]
    );
    if expected.is_empty() {
        return;
    }
    let from = rng.below(expected.len() as u64);
    let max = 1 + rng.below(20) as usize;
    let got = store
        .read(TOPICS[t], p, QueueOffset::new(from), max, usize::MAX)
        .unwrap();
    let want = &expected[from as usize..(from as usize + max).min(expected.len())];
    assert_eq!(got.records.len(), want.len());
    for (i, (r, m)) in got.records.iter().zip(want).enumerate() {
        assert_eq!(r.queue_offset().get(), from + i as u64);
        assert_eq!(
            &from_stored(r),
            m,
            "{}-{p} offset {}",
            TOPICS[t],
            from + i as u64
        );
    }
}

/// `appends[seq]`: which append call wrote record `seq`, and to which
/// partition.
fn check_key(
    store: &Store,
    model: &HashMap<(usize, u32), Vec<ModelRecord>>,
    appends: &[(u64, u32)],
    t: usize,
    k: u64,
) {
    let key = format!("key-{k}");
    let mut want: Vec<u64> = model
        .iter()
        .filter(|((mt, _), _)| *mt == t)
        .flat_map(|(_, recs)| recs.iter())
        .filter(|r| r.key.as_deref() == Some(key.as_str()))
        .map(|r| r.seq)
        .collect();
    want.sort_unstable();
    let got: Vec<u64> = store
        .query_by_key(TOPICS[t], key.as_bytes(), 0, i64::MAX, 1000)
        .unwrap()
        .iter()
        .map(|r| from_stored(r).seq)
        .collect();
    let mut got_sorted = got.clone();
    got_sorted.sort_unstable();
    assert_eq!(got_sorted, want, "key query {}/{key}", TOPICS[t]);
    // Newest first: by append call, and within a call by record order in
    // each partition. The order of one call's partitions among themselves
    // is the store's (it writes each partition's records together).
    for pair in got.windows(2) {
        let (newer, older) = (appends[pair[0] as usize], appends[pair[1] as usize]);
        assert!(
            newer.0 > older.0
                || newer == older && pair[0] > pair[1]
                || newer.0 == older.0 && newer.1 != older.1,
            "key query {}/{key}: {got:?} is not newest first",
            TOPICS[t]
        );
    }
}

#[test]
fn random_appends_reads_and_reopens_match_the_model() {
    let seed = seed("model");
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &mut rng);
    let mut store = Some(Store::open(cfg.clone()).unwrap());
    let mut model: HashMap<(usize, u32), Vec<ModelRecord>> = HashMap::new();
    let mut seq = 0u64;
    let mut appends = vec![(0, 0)];
    for step in 0..400 {
        let s = store.as_ref().unwrap();
        match rng.below(100) {
            0..=59 => {
                let n = 1 + rng.below(8) as usize;
                let mut batch = Vec::new();
                let mut pending = Vec::new();
                for _ in 0..n {
                    seq += 1;
                    let t = rng.below(TOPICS.len() as u64) as usize;
                    let p = rng.below(PARTITIONS as u64) as u32;
                    appends.push((step, p));
                    let keyed = rng.chance(80);
                    let key = keyed.then(|| format!("key-{}", rng.below(KEYS)));
                    // Tombstones (no value) only for keyed records.
                    let value =
                        (!keyed || rng.chance(90)).then(|| "v".repeat(rng.below(300) as usize));
                    let r = record(TOPICS[t], p, key.as_deref(), value.as_deref());
                    batch.push(with_headers(r, &[("seq", seq.to_string().as_bytes())]));
                    pending.push(((t, p), ModelRecord { key, value, seq }));
                }
                let out = s.append(&batch).unwrap();
                for (a, (tp, m)) in out.iter().zip(pending) {
                    let list = model.entry(tp).or_default();
                    assert_eq!(a.queue_offset.get(), list.len() as u64, "step {step}");
                    list.push(m);
                }
            }
            60..=79 => {
                assert!(s.wait_dispatched(Duration::from_secs(10)));
                let t = rng.below(TOPICS.len() as u64) as usize;
                let p = rng.below(PARTITIONS as u64) as u32;
                check_partition(s, &model, t, p, &mut rng);
            }
            80..=89 => {
                assert!(s.wait_dispatched(Duration::from_secs(10)));
                let t = rng.below(TOPICS.len() as u64) as usize;
                check_key(s, &model, &appends, t, rng.below(KEYS));
            }
            _ => {
                let s = store.take().unwrap();
                if rng.chance(50) {
                    s.shutdown().unwrap();
                } else {
                    s.close_uncleanly();
                }
                store = Some(Store::open(cfg.clone()).unwrap());
            }
        }
    }
    let s = store.as_ref().unwrap();
    assert!(s.wait_dispatched(Duration::from_secs(10)));
    for t in 0..TOPICS.len() {
        for p in 0..PARTITIONS {
            check_partition(s, &model, t, p, &mut rng);
        }
        for k in 0..KEYS {
            check_key(s, &model, &appends, t, k);
        }
    }
}

/// The producer state a model keeps: epoch and the last five batches
/// (first sequence, last sequence, first offset, last offset).
#[derive(Default, Clone, Debug)]
struct ModelProducer {
    epoch: i16,
    batches: std::collections::VecDeque<(i32, i32, u64, u64)>,
}

/// Seeded model test of idempotent producers: several producers on a few
/// partitions send new batches (some large enough to be split across
/// entries and segments), retries of retained and of older batches, gaps,
/// new epochs and stale ones, with clean and unclean reopens in between;
/// every outcome (written at the model's offsets, duplicate with the
/// model's offsets, or the model's refusal) and every partition's records
/// are checked against the model.
#[test]
fn random_idempotent_producers_match_the_model() {
    use tidelog_storage::{ProducerAppend, ProducerBatch, SequenceProblem, StoreError};

    let seed = seed("producer-model");
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &mut rng);
    let mut store = Some(Store::open(cfg.clone()).unwrap());
    // (producer, partition) → state; partition → values in offset order.
    let mut producers: HashMap<(i64, u32), ModelProducer> = HashMap::new();
    let mut partitions: HashMap<u32, Vec<String>> = HashMap::new();
    // (producer, partition, epoch, first seq) → the batch's values, to retry.
    let mut sent: HashMap<(i64, u32, i16, i32), Vec<String>> = HashMap::new();
    let mut written = 0;
    let mut duplicates = 0;
    for step in 0..500 {
        let s = store.as_ref().unwrap();
        let id = rng.below(3) as i64;
        let p = rng.below(2) as u32;
        let state = producers.get(&(id, p)).cloned().unwrap_or_default();
        let next_seq = state.batches.back().map_or(0, |b| b.1 + 1);
        let (epoch, first_seq, values) = match rng.below(100) {
            // A retry of a batch the model retains (or any sent one).
            0..=24 if !state.batches.is_empty() => {
                let pick = rng.below(state.batches.len() as u64) as usize;
                let b = state.batches[pick];
                let values = sent[&(id, p, state.epoch, b.0)].clone();
                (state.epoch, b.0, values)
            }
            // A gap.
            25..=29 => (
                state.epoch,
                next_seq + 1 + rng.below(3) as i32,
                vec!["gap".into()],
            ),
            // A new epoch (at 0), or a stale one.
            30..=34 => (state.epoch + 1, 0, vec![format!("e{step}")]),
            35..=37 if state.epoch > 0 => (state.epoch - 1, 0, vec!["stale".into()]),
            _ => {
                let n = if rng.chance(20) {
                    20 + rng.below(20)
                } else {
                    1 + rng.below(4)
                };
                let values = (0..n)
                    .map(|i| format!("{step}-{i}-{}", "v".repeat(rng.below(300) as usize)))
                    .collect();
                (state.epoch, next_seq, values)
            }
        };
        let batch: Vec<_> = values
            .iter()
            .map(|v| record("idem", p, None, Some(v)))
            .collect();
        let got = s.append_as(
            &batch,
            u64::MAX,
            Some(&ProducerBatch {
                producer_id: id,
                epoch,
                base_sequence: first_seq,
                transactional: false,
            }),
        );
        let last_seq = first_seq + values.len() as i32 - 1;
        let known = producers.contains_key(&(id, p));
        let dup = (epoch == state.epoch)
            .then(|| {
                state
                    .batches
                    .iter()
                    .find(|b| b.0 == first_seq && b.1 == last_seq)
            })
            .flatten();
        match (got, dup) {
            (Ok(ProducerAppend::Duplicate(meta)), Some(b)) => {
                assert_eq!(
                    (meta.base_offset, meta.last_offset),
                    (b.2, b.3),
                    "step {step}"
                );
                duplicates += 1;
            }
            (Ok(ProducerAppend::Written(out)), None) => {
                let expected_first = if !known || epoch > state.epoch {
                    0
                } else {
                    next_seq
                };
                assert!(
                    epoch >= state.epoch && first_seq == expected_first,
                    "step {step}: written out of sequence"
                );
                let list = partitions.entry(p).or_default();
                assert_eq!(out[0].queue_offset.get(), list.len() as u64, "step {step}");
                let base = list.len() as u64;
                list.extend(values.iter().cloned());
                let entry = producers.entry((id, p)).or_default();
                if epoch > entry.epoch {
                    entry.epoch = epoch;
                    entry.batches.clear();
                }
                if entry.batches.len() == 5 {
                    entry.batches.pop_front();
                }
                entry.batches.push_back((
                    first_seq,
                    last_seq,
                    base,
                    base + values.len() as u64 - 1,
                ));
                sent.insert((id, p, epoch, first_seq), values);
                written += 1;
            }
            (Err(StoreError::ProducerRefused { problem, .. }), None) => match problem {
                SequenceProblem::StaleEpoch { .. } => assert!(epoch < state.epoch, "step {step}"),
                SequenceProblem::UnknownProducer { .. } => {
                    assert!(!known && first_seq != 0, "step {step}")
                }
                SequenceProblem::OutOfOrder { expected, .. } => {
                    let want = if epoch > state.epoch { 0 } else { next_seq };
                    assert!(
                        known && expected == want && first_seq != want,
                        "step {step}"
                    );
                }
                other => panic!("step {step}: {other:?}"),
            },
            (other, dup) => panic!("step {step}: {other:?}, the model's duplicate {dup:?}"),
        }
        if rng.chance(8) {
            let s = store.take().unwrap();
            if rng.chance(50) {
                s.shutdown().unwrap();
            } else {
                s.close_uncleanly();
            }
            store = Some(Store::open(cfg.clone()).unwrap());
        }
    }
    assert!(
        written > 100 && duplicates > 20,
        "{written} written, {duplicates} duplicates"
    );
    let s = store.as_ref().unwrap();
    assert!(s.wait_dispatched(Duration::from_secs(10)));
    for (p, values) in &partitions {
        let got = s
            .read("idem", *p, QueueOffset::new(0), usize::MAX, usize::MAX)
            .unwrap()
            .records;
        let got: Vec<String> = got
            .iter()
            .map(|r| String::from_utf8(r.value().unwrap().to_vec()).unwrap())
            .collect();
        assert_eq!(&got, values, "idem-{p}");
    }
}
