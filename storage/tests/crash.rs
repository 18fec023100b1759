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

use common::*;
use tidelog_storage::{QueueOffset, Store, StoreConfig};

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
