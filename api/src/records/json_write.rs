//! Hand-written JSON output shared by the renderer, the canonical form and
//! the produce answer: strings in serde_json's escaping, base64 strings,
//! integers. A leaf: it uses nothing else of `records/`.

use base64_simd::STANDARD as BASE64;

/// Appends `text` as a JSON string, escaped like serde_json does.
pub(crate) fn push_json_str(out: &mut Vec<u8>, text: &str) {
    if text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    } else {
        // Writing into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, text);
    }
}

/// Appends `bytes` base64-encoded (standard, padded) between quotes: base64
/// never needs JSON escaping.
pub(crate) fn push_base64_str(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    out.reserve(BASE64.encoded_length(bytes.len()) + 1);
    BASE64.encode_append(bytes, out);
    out.push(b'"');
}

/// The answer to a produce request whose records landed at these
/// `(partition, offset)`s, written straight into one buffer. Byte for byte
/// what serde_json makes of the same `records::ProduceResponse` (a test in
/// records/mod.rs checks that), without serde's per-field escaping checks.
pub(crate) fn produce_answer(offsets: impl ExactSizeIterator<Item = (u32, u64)>) -> Vec<u8> {
    const HEAD: &[u8] = b"{\"offsets\":[";
    const TAIL: &[u8] = b"],\"key_schema_id\":null,\"value_schema_id\":null}";
    const ENTRY_MAX: usize =
        r#"{"partition":4294967295,"offset":18446744073709551615,"error_code":null,"error":null},"#
            .len();
    let mut out = Vec::with_capacity(HEAD.len() + offsets.len() * ENTRY_MAX + TAIL.len());
    out.extend_from_slice(HEAD);
    for (i, (partition, offset)) in offsets.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"partition\":");
        push_u64(&mut out, u64::from(partition));
        out.extend_from_slice(b",\"offset\":");
        push_u64(&mut out, offset);
        out.extend_from_slice(b",\"error_code\":null,\"error\":null}");
    }
    out.extend_from_slice(TAIL);
    out
}

/// Decimal digits, as serde_json writes them (it uses itoa too).
pub(crate) fn push_u64(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

pub(crate) fn push_i64(out: &mut Vec<u8>, n: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}
