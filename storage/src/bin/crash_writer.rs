//! Test helper for `tests/crash.rs`: appends under `flush: sync` until it is
//! killed, printing one line per acknowledged record:
//!
//! ```text
//! ack <topic> <partition> <queue offset> <seq>
//! ```
//!
//! Usage: `tidelog-crash-writer <data dir> <first seq> <max records>`.
//! The value of record `seq` is [`expected_value`]`(seq)`, so the test can
//! check every acknowledged record, and every other record it finds, byte
//! for byte.

use std::io::Write;
use std::sync::Arc;

use bytes::Bytes;
use tidelog_storage::{AppendRecord, FlushMode, Store, StoreConfig};

/// Value of record `seq`: its number, then a length that varies with it so
/// records straddle segment ends in many ways.
fn expected_value(seq: u64) -> Vec<u8> {
    let mut v = format!("v{seq}-").into_bytes();
    v.extend(std::iter::repeat_n(
        b'a' + (seq % 26) as u8,
        (seq % 700) as usize,
    ));
    v
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        return Err("usage: tidelog-crash-writer <data dir> <first seq> <max records>".into());
    }
    let mut config = StoreConfig::new(&args[1]);
    config.flush = FlushMode::Sync;
    config.commitlog_segment_bytes = 64 * 1024;
    config.consume_queue_units_per_file = 256;
    config.index_slots = 64;
    config.index_entries = 1024;
    config.flush_interval_ms = 20;
    // Independent of how full this machine's disk is.
    config.retention.disk = Arc::new(tidelog_storage::retention::FixedDiskUsage::new(0.0));
    let first: u64 = args[2].parse()?;
    let max: u64 = args[3].parse()?;
    let store = Store::open(config)?;
    let stdout = std::io::stdout();
    let mut seq = first;
    while seq < first + max {
        let n = 1 + seq % 4;
        let batch: Vec<AppendRecord> = (seq..seq + n)
            .map(|s| AppendRecord {
                topic: Arc::from(if s % 3 == 0 { "crash.a" } else { "crash.b" }),
                partition: (s % 2) as u32,
                key: Some(Bytes::from(format!("key-{}", s % 17))),
                value: Some(Bytes::from(expected_value(s))),
                headers: Vec::new(),
                timestamp_ms: None,
            })
            .collect();
        let out = store.append(&batch)?;
        let mut lock = stdout.lock();
        for (r, a) in batch.iter().zip(&out) {
            writeln!(
                lock,
                "ack {} {} {} {}",
                r.topic,
                r.partition,
                a.queue_offset.get(),
                seq
            )?;
            seq += 1;
        }
        lock.flush()?;
    }
    store.shutdown()?;
    Ok(())
}
