//! Request bodies: deterministic record values and the produce body.

use anyhow::Context as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;

/// `len` bytes of deterministic noise (xorshift), different per `seed`.
pub(crate) fn record_value(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

/// Milliseconds since the Unix epoch, as records' timestamps.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A binary-embedded produce body of `batch` keyless records.
pub(crate) fn produce_body(batch: usize, record_bytes: usize) -> anyhow::Result<Vec<u8>> {
    let records: Vec<serde_json::Value> = (0..batch as u64)
        .map(|i| serde_json::json!({"value": BASE64.encode(record_value(record_bytes, i))}))
        .collect();
    serde_json::to_vec(&serde_json::json!({ "records": records }))
        .context("encoding the produce body")
}

/// `bodies` binary-embedded produce bodies of `batch` records each, keyed
/// `k<n>` with n running on from body to body through `keys` distinct
/// keys (a compact topic refuses keyless records).
pub(crate) fn keyed_produce_bodies(
    bodies: usize,
    batch: usize,
    record_bytes: usize,
    keys: u64,
) -> anyhow::Result<Vec<Vec<u8>>> {
    let mut n = 0u64;
    (0..bodies)
        .map(|_| {
            let records: Vec<serde_json::Value> = (0..batch)
                .map(|_| {
                    let key = format!("k{}", n % keys.max(1));
                    n += 1;
                    serde_json::json!({
                        "key": BASE64.encode(key),
                        "value": BASE64.encode(record_value(record_bytes, n)),
                    })
                })
                .collect();
            serde_json::to_vec(&serde_json::json!({ "records": records }))
                .context("encoding a keyed produce body")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn produce_body_decodes_like_the_server_does() {
        let body = produce_body(3, 100).unwrap();
        let records = tidelog_api::records::decode_produce(
            tidelog_api::records::EmbeddedFormat::Binary,
            &body,
        )
        .unwrap();
        assert_eq!(records.len(), 3);
        for r in &records {
            assert_eq!(r.value.as_ref().map(|v| v.len()), Some(100));
            assert!(r.key.is_none());
        }
        assert_ne!(records[0].value, records[1].value);
    }

    #[test]
    fn keyed_bodies_cycle_through_the_keys() {
        let bodies = keyed_produce_bodies(3, 2, 10, 5).unwrap();
        let keys: Vec<_> = bodies
            .iter()
            .flat_map(|b| {
                tidelog_api::records::decode_produce(
                    tidelog_api::records::EmbeddedFormat::Binary,
                    b,
                )
                .unwrap()
            })
            .map(|r| r.key.unwrap())
            .collect();
        let want: Vec<&[u8]> = vec![b"k0", b"k1", b"k2", b"k3", b"k4", b"k0"];
        assert_eq!(keys, want);
    }
}
