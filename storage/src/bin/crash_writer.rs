//! Test helper for `tests/crash.rs`: appends under `flush: sync` until it is
//! killed, printing one line per acknowledged record:
//!
//! ```text
//! ack <topic> <partition> <queue offset> <seq>
//! ```
//!
//! Usage: `tidelog-crash-writer <data dir> <first seq> <max records>
//! [producer id]`. The value of record `seq` is [`expected_value`]`(seq)`,
//! so the test can check every acknowledged record, and every other record
//! it finds, byte for byte.
//!
//! With a producer id, every batch is an idempotent producer's (epoch 0),
//! of one partition, its sequences counted per partition from 0, as
//! [`idempotent_batch`] plans them; each acknowledged batch is also
//! printed as `batch <partition> <base offset> <first seq>
//! <count> <base sequence>`.

use std::io::Write;
use std::sync::Arc;

use bytes::Bytes;
use tidelog_storage::{AppendRecord, FlushMode, ProducerAppend, ProducerBatch, Store, StoreConfig};

/// Topic of the idempotent batches.
const IDEMPOTENT_TOPIC: &str = "crash.idem";

/// The idempotent batch starting at record `seq`: its partition and record
/// count (`tests/crash.rs` plans the same).
fn idempotent_batch(seq: u64) -> (u32, u64) {
    ((seq / 3 % 2) as u32, 1 + seq % 4)
}

fn record(topic: &str, partition: u32, s: u64) -> AppendRecord {
    AppendRecord {
        topic: Arc::from(topic),
        partition,
        key: Some(Bytes::from(format!("key-{}", s % 17))),
        value: Some(Bytes::from(expected_value(s))),
        headers: Vec::new(),
        timestamp_ms: None,
    }
}

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
    if !(4..=5).contains(&args.len()) {
        return Err(
            "usage: tidelog-crash-writer <data dir> <first seq> <max records> [producer id]".into(),
        );
    }
    let mut config = StoreConfig::new(&args[1]);
    config.flush = FlushMode::Sync;
    config.commitlog_segment_bytes = 64 * 1024;
    config.consume_queue_units_per_file = 256;
    config.index_slots = 64;
    config.index_entries = 1024;
    config.flush_interval_ms = 20;
    // Checkpoints while the writer is killed, as before the key existed.
    config.sync_checkpoint_interval_ms = 20;
    // Independent of how full this machine's disk is.
    config.retention.disk = Arc::new(tidelog_storage::retention::FixedDiskUsage::new(0.0));
    let first: u64 = args[2].parse()?;
    let max: u64 = args[3].parse()?;
    let store = Store::open(config)?;
    let stdout = std::io::stdout();
    if let Some(id) = args.get(4) {
        return idempotent(&store, id.parse()?, first, max);
    }
    let mut seq = first;
    while seq < first + max {
        let n = 1 + seq % 4;
        let batch: Vec<AppendRecord> = (seq..seq + n)
            .map(|s| {
                record(
                    if s % 3 == 0 { "crash.a" } else { "crash.b" },
                    (s % 2) as u32,
                    s,
                )
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

/// Append idempotent batches as producer `producer_id` until killed.
fn idempotent(
    store: &Store,
    producer_id: i64,
    first: u64,
    max: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    let stdout = std::io::stdout();
    let mut next_sequence = [0i32; 2];
    let mut seq = first;
    while seq < first + max {
        let (partition, n) = idempotent_batch(seq);
        let batch: Vec<AppendRecord> = (seq..seq + n)
            .map(|s| record(IDEMPOTENT_TOPIC, partition, s))
            .collect();
        let base_sequence = next_sequence[partition as usize];
        let producer = ProducerBatch {
            producer_id,
            epoch: 0,
            base_sequence,
            transactional: false,
        };
        let ProducerAppend::Written(out) = store.append_as(&batch, u64::MAX, Some(&producer))?
        else {
            return Err(format!("batch at {seq} taken for a duplicate").into());
        };
        let mut lock = stdout.lock();
        writeln!(
            lock,
            "batch {partition} {} {seq} {n} {base_sequence}",
            out[0].queue_offset.get()
        )?;
        lock.flush()?;
        next_sequence[partition as usize] += n as i32;
        seq += n;
    }
    Ok(())
}
