//! Base64 decoding and encoding of produce-sized values, with the two
//! crates the API has used: `base64` (scalar, the general path and the
//! bench's bare endpoint) and `base64-simd` (the hot paths in
//! `api/src/records/json_fast.rs`). 1000 values of 100 bytes per iteration, the
//! values of ten produce requests of `tidelog bench`; each is decoded onto
//! the end of one shared buffer (or encoded into one), as the hot paths do.
//!
//! Results: docs/BENCHMARKS.md, HTTP part, "Third session".

// A benchmark is not a library: a failed setup step should stop it loudly.
#![allow(clippy::unwrap_used)]

use std::hint::black_box;

use base64::Engine as _;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

const VALUES: usize = 1000;
const VALUE_BYTES: usize = 100;

fn values() -> Vec<Vec<u8>> {
    (0..VALUES)
        .map(|i| (0..VALUE_BYTES).map(|j| (i * 31 + j * 7) as u8).collect())
        .collect()
}

fn bench(c: &mut Criterion) {
    let raw = values();
    let texts: Vec<String> = raw
        .iter()
        .map(|v| base64::engine::general_purpose::STANDARD.encode(v))
        .collect();
    let mut g = c.benchmark_group("base64_100B_values");
    g.throughput(Throughput::Elements(VALUES as u64));
    let mut out = Vec::with_capacity(VALUES * VALUE_BYTES * 2);
    g.bench_function("decode/base64", |b| {
        b.iter(|| {
            out.clear();
            for t in &texts {
                base64::engine::general_purpose::STANDARD
                    .decode_vec(t.as_bytes(), &mut out)
                    .unwrap();
            }
            black_box(out.len())
        })
    });
    g.bench_function("decode/base64-simd", |b| {
        b.iter(|| {
            out.clear();
            for t in &texts {
                base64_simd::STANDARD
                    .decode_append(t.as_bytes(), &mut out)
                    .unwrap();
            }
            black_box(out.len())
        })
    });
    g.bench_function("encode/base64", |b| {
        b.iter(|| {
            out.clear();
            for v in &raw {
                let at = out.len();
                out.resize(at + base64::encoded_len(v.len(), true).unwrap(), 0);
                base64::engine::general_purpose::STANDARD
                    .encode_slice(v, &mut out[at..])
                    .unwrap();
            }
            black_box(out.len())
        })
    });
    g.bench_function("encode/base64-simd", |b| {
        b.iter(|| {
            out.clear();
            for v in &raw {
                base64_simd::STANDARD.encode_append(v, &mut out);
            }
            black_box(out.len())
        })
    });
    // Both decoders agree here (the strictness tests are in records/mod.rs).
    let mut a = Vec::new();
    let mut b = Vec::new();
    for t in &texts {
        base64::engine::general_purpose::STANDARD
            .decode_vec(t.as_bytes(), &mut a)
            .unwrap();
        base64_simd::STANDARD
            .decode_append(t.as_bytes(), &mut b)
            .unwrap();
    }
    assert_eq!(a, b);
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
