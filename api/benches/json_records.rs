//! The json embedded format's hot paths: decoding a produce body of 1000
//! records (`records::decode_produce`) and rendering 1000 stored records
//! (`records::write_record`), for keys and values that are already in
//! canonical form (copied as they are) and for spaced, unsorted ones (put
//! in canonical form by `canonical_json`).
//!
//! Results: docs/BENCHMARKS.md, HTTP part, "Numbers kept as written".

// A benchmark is not a library: a failed setup step should stop it loudly.
#![allow(clippy::unwrap_used)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tidelog_api::records::{decode_produce, write_record, EmbeddedFormat, RecordView};

const RECORDS: usize = 1000;

/// A produce body of `RECORDS` records whose key and value come from
/// `record(i)`.
fn body(record: impl Fn(usize) -> String) -> Vec<u8> {
    let records: Vec<String> = (0..RECORDS).map(record).collect();
    format!(r#"{{"records":[{}]}}"#, records.join(",")).into_bytes()
}

fn bench(c: &mut Criterion) {
    let canonical = body(|i| {
        format!(r#"{{"key":"user-{i}","value":{{"amount":{i}.25,"id":{i},"tags":["a","b"]}}}}"#)
    });
    let spaced = body(|i| {
        format!(
            r#"{{"key":"user-{i}","value":{{ "tags": ["a", "b"], "id": {i}, "amount": {i}.25 }}}}"#
        )
    });
    let mut g = c.benchmark_group("json_1000_records");
    g.throughput(Throughput::Elements(RECORDS as u64));
    for (name, body) in [("decode/canonical", &canonical), ("decode/spaced", &spaced)] {
        g.bench_function(name, |b| {
            b.iter(|| decode_produce(EmbeddedFormat::Json, black_box(body)).unwrap())
        });
    }
    let stored = decode_produce(EmbeddedFormat::Json, &canonical).unwrap();
    let spaced_values: Vec<Vec<u8>> = (0..RECORDS)
        .map(|i| format!(r#"{{ "tags": ["a", "b"], "id": {i}, "amount": {i}.25 }}"#).into_bytes())
        .collect();
    let mut out = Vec::with_capacity(RECORDS * 160);
    for (name, spaced) in [("render/canonical", false), ("render/spaced", true)] {
        g.bench_function(name, |b| {
            b.iter(|| {
                out.clear();
                for (i, r) in stored.iter().enumerate() {
                    let value = if spaced {
                        &spaced_values[i][..]
                    } else {
                        r.value.as_deref().unwrap()
                    };
                    let view = RecordView {
                        topic: "events",
                        partition: 0,
                        offset: i as u64,
                        timestamp_ms: 1_700_000_000_000,
                        key: r.key.as_deref(),
                        value: Some(value),
                        headers: &[],
                        physical_offset: None,
                    };
                    write_record(&mut out, EmbeddedFormat::Json, &view).unwrap();
                }
                black_box(out.len())
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
