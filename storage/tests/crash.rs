//! Process crash test: a writer process appends under `flush: sync` and
//! prints every acknowledged record; we SIGKILL it at random moments, reopen
//! the store, and check that every acknowledged record is there intact, and
//! that everything readable is a whole record the writer produced.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use tidelog_storage::{
    AppendRecord, ProducerAppend, ProducerBatch, QueueOffset, SequenceProblem, Store, StoreConfig,
    StoreError,
};

const ROUNDS: u64 = 6;

fn expected_value(seq: u64) -> Vec<u8> {
    // Must match src/bin/crash_writer.rs.
    let mut v = format!("v{seq}-").into_bytes();
    v.extend(std::iter::repeat_n(
        b'a' + (seq % 26) as u8,
        (seq % 700) as usize,
    ));
    v
}

fn seq_of_value(v: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(v).ok()?;
    let rest = s.strip_prefix('v')?;
    rest.split('-').next()?.parse().ok()
}

fn open(dir: &std::path::Path) -> Store {
    let mut c = StoreConfig::new(dir);
    c.commitlog_segment_bytes = 64 * 1024;
    c.consume_queue_units_per_file = 256;
    c.index_slots = 64;
    c.index_entries = 1024;
    // Independent of how full this machine's disk is.
    c.retention.disk = Arc::new(tidelog_storage::retention::FixedDiskUsage::new(0.0));
    Store::open(c).unwrap()
}

#[test]
fn sigkill_during_sync_produce_loses_no_acknowledged_record() {
    let seed = seed("crash");
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_tidelog-crash-writer");
    // (topic, partition, offset) → seq, for every acknowledged record.
    let mut acked: HashMap<(String, u32, u64), u64> = HashMap::new();
    for round in 0..ROUNDS {
        let mut child = Command::new(bin)
            .arg(dir.path())
            .arg((round * 1_000_000).to_string())
            .arg("200000")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        // Read acks on a thread; kill after a random number of them (or a
        // time limit), so the kill lands mid-produce.
        let kill_after = 50 + rng.below(1500);
        let reader = std::thread::spawn(move || {
            let mut lines = Vec::new();
            let mut r = BufReader::new(stdout);
            let mut line = String::new();
            loop {
                line.clear();
                match r.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    // A line cut by the kill has no newline: not an ack.
                    Ok(_) if line.ends_with('\n') => lines.push(line.trim_end().to_string()),
                    Ok(_) => break,
                }
            }
            lines
        });
        let started = Instant::now();
        let deadline = Duration::from_secs(20);
        // Wait until enough acks have arrived: count them via the data dir's
        // growth would be racy, so poll the thread's progress by time.
        let wait = Duration::from_millis(kill_after / 5 + 20);
        while started.elapsed() < wait && started.elapsed() < deadline {
            std::thread::sleep(Duration::from_millis(5));
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let lines = reader.join().unwrap();
        for l in &lines {
            let parts: Vec<&str> = l.split(' ').collect();
            assert_eq!(parts.len(), 5, "{l}");
            assert_eq!(parts[0], "ack");
            acked.insert(
                (
                    parts[1].to_string(),
                    parts[2].parse().unwrap(),
                    parts[3].parse().unwrap(),
                ),
                parts[4].parse().unwrap(),
            );
        }
        eprintln!(
            "round {round}: {} acks this round, {} in all",
            lines.len(),
            acked.len()
        );

        // Reopen and check.
        let store = open(dir.path());
        assert!(store.wait_dispatched(Duration::from_secs(10)));
        for ((topic, partition, offset), seq) in &acked {
            let got = store
                .read(topic, *partition, QueueOffset::new(*offset), 1, usize::MAX)
                .unwrap();
            let rec = got
                .records
                .first()
                .unwrap_or_else(|| panic!("acknowledged {topic}-{partition}@{offset} is missing"));
            assert_eq!(rec.queue_offset().get(), *offset);
            assert_eq!(
                rec.value().as_deref(),
                Some(expected_value(*seq).as_slice()),
                "{topic}-{partition}@{offset}"
            );
        }
        // Everything readable is whole and came from the writer, and
        // offsets have no holes.
        for tp in store.partitions() {
            let (begin, end) = store.offsets(tp.topic(), tp.partition());
            let recs = store
                .read(
                    tp.topic(),
                    tp.partition(),
                    QueueOffset::new(begin),
                    usize::MAX,
                    usize::MAX,
                )
                .unwrap()
                .records;
            assert_eq!(recs.len() as u64, end - begin, "{tp}");
            for r in recs {
                let v = r.value().unwrap();
                let seq = seq_of_value(&v)
                    .unwrap_or_else(|| panic!("{tp}@{}: not a writer's value", r.queue_offset()));
                assert_eq!(
                    &v[..],
                    expected_value(seq).as_slice(),
                    "{tp}@{}",
                    r.queue_offset()
                );
            }
        }
        if rng.chance(50) {
            store.shutdown().unwrap();
        } else {
            drop(store);
        }
    }
    assert!(
        acked.len() > 100,
        "the writer barely ran: {} acks",
        acked.len()
    );
}

/// Must match `idempotent_batch` in src/bin/crash_writer.rs.
fn idempotent_batch(seq: u64) -> (u32, u64) {
    ((seq / 3 % 2) as u32, 1 + seq % 4)
}

fn idempotent_records(partition: u32, seq: u64, n: u64) -> Vec<AppendRecord> {
    (seq..seq + n)
        .map(|s| AppendRecord {
            topic: Arc::from("crash.idem"),
            partition,
            key: Some(Bytes::from(format!("key-{}", s % 17))),
            value: Some(Bytes::from(expected_value(s))),
            headers: Vec::new(),
            timestamp_ms: None,
        })
        .collect()
}

/// An acknowledged idempotent batch: partition, base offset, first record
/// seq, record count, base sequence.
type AckedBatch = (u32, u64, u64, u64, i32);

/// kill -9 an idempotent producer mid-produce under `flush: sync`, reopen
/// (the producer state comes back from the snapshot and the log tail), and
/// retry every batch it had acknowledged, then the one it may have had in
/// flight: the last five per partition are answered with their original
/// offsets, older ones are refused as out of order, none is written again,
/// and every record is in its partition exactly once. Against a model: the
/// state's last batch per partition is the last one written.
#[test]
fn sigkill_then_retrying_every_acknowledged_idempotent_batch_writes_no_duplicate() {
    let seed = seed("idempotent-crash");
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_tidelog-crash-writer");
    let mut retried = 0;
    for round in 0..4u64 {
        let producer_id = 100 + round as i64;
        let first = round * 1_000_000;
        let mut child = Command::new(bin)
            .arg(dir.path())
            .arg(first.to_string())
            .arg("200000")
            .arg(producer_id.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut lines = Vec::new();
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                lines.push(line);
            }
            lines
        });
        let wait = Duration::from_millis(50 + rng.below(400));
        let started = Instant::now();
        while started.elapsed() < wait {
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let acked: Vec<AckedBatch> = reader
            .join()
            .unwrap()
            .iter()
            .filter_map(|l| {
                let p: Vec<&str> = l.split(' ').collect();
                (p.len() == 6 && p[0] == "batch").then(|| {
                    (
                        p[1].parse().unwrap(),
                        p[2].parse().unwrap(),
                        p[3].parse().unwrap(),
                        p[4].parse().unwrap(),
                        p[5].parse().unwrap(),
                    )
                })
            })
            .collect();
        eprintln!("round {round}: {} batches acknowledged", acked.len());

        let store = open(dir.path());
        let producer = |base_sequence| ProducerBatch {
            producer_id,
            epoch: 0,
            base_sequence,
            transactional: false,
        };
        for partition in 0..2u32 {
            let mine: Vec<&AckedBatch> = acked.iter().filter(|b| b.0 == partition).collect();
            for (i, &&(p, base_offset, seq, n, base_sequence)) in mine.iter().enumerate() {
                let again = store.append_as(
                    &idempotent_records(p, seq, n),
                    u64::MAX,
                    Some(&producer(base_sequence)),
                );
                retried += 1;
                // The fifth from last may have been pushed out by a batch
                // written after it whose ack the kill cut off.
                let out_of_order = matches!(
                    again,
                    Err(StoreError::ProducerRefused {
                        problem: SequenceProblem::OutOfOrder { .. },
                        ..
                    })
                );
                if i + 5 == mine.len() && out_of_order {
                    continue;
                }
                if i + 5 >= mine.len() {
                    match again {
                        Ok(ProducerAppend::Duplicate(meta)) => {
                            assert_eq!(
                                (meta.base_offset, meta.last_offset),
                                (base_offset, base_offset + n - 1),
                                "round {round} batch at {seq}"
                            );
                        }
                        other => panic!("round {round}: retry of batch at {seq}: {other:?}"),
                    }
                } else {
                    assert!(
                        out_of_order,
                        "round {round}: retry of old batch at {seq}: {again:?}"
                    );
                }
            }
        }
        // The batch after the last acknowledged one of each partition may
        // have been written without its ack: a retry of it is a duplicate
        // or a first write, never both.
        let mut seq = first;
        let mut next_sequence = [0i32; 2];
        let mut unacked = [None; 2];
        loop {
            let (p, n) = idempotent_batch(seq);
            if !acked.iter().any(|b| b.2 == seq) && unacked[p as usize].is_none() {
                unacked[p as usize] = Some((seq, n, next_sequence[p as usize]));
            }
            if unacked.iter().all(Option::is_some) {
                break;
            }
            next_sequence[p as usize] += n as i32;
            seq += n;
        }
        for (p, (seq, n, base_sequence)) in unacked.iter().flatten().enumerate() {
            let got = store.append_as(
                &idempotent_records(p as u32, *seq, *n),
                u64::MAX,
                Some(&producer(*base_sequence)),
            );
            assert!(
                matches!(
                    got,
                    Ok(ProducerAppend::Duplicate(_) | ProducerAppend::Written(_))
                ),
                "round {round}: the batch at {seq}: {got:?}"
            );
        }
        // Every record exactly once, at most one batch past the acks.
        assert!(store.wait_dispatched(Duration::from_secs(10)));
        for partition in 0..2u32 {
            let (begin, end) = store.offsets("crash.idem", partition);
            let recs = store
                .read(
                    "crash.idem",
                    partition,
                    QueueOffset::new(begin),
                    usize::MAX,
                    usize::MAX,
                )
                .unwrap()
                .records;
            assert_eq!(recs.len() as u64, end - begin);
            let mut seen = std::collections::HashSet::new();
            for r in &recs {
                let seq = seq_of_value(&r.value().unwrap()).unwrap();
                assert!(
                    seen.insert(seq),
                    "record {seq} is in crash.idem-{partition} twice"
                );
            }
            for b in acked.iter().filter(|b| b.0 == partition) {
                for s in b.2..b.2 + b.3 {
                    assert!(seen.contains(&s), "acknowledged record {s} is missing");
                }
            }
        }
        if rng.chance(50) {
            store.shutdown().unwrap();
        } else {
            drop(store);
        }
    }
    assert!(retried > 20, "the writer barely ran: {retried} retries");
}
