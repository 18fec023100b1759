use super::*;
use serde_json::{json, Map};

const JSON: EmbeddedFormat = EmbeddedFormat::Json;
const BINARY: EmbeddedFormat = EmbeddedFormat::Binary;

fn decode(format: EmbeddedFormat, body: Value) -> Result<Vec<ProduceRecord>, ApiError> {
    decode_produce(format, body.to_string().as_bytes())
}

fn code_and_message(result: Result<Vec<ProduceRecord>, ApiError>) -> (u32, String) {
    let err = result.unwrap_err();
    (err.error_code(), err.to_string())
}

#[test]
fn direct_integers_match_serde() {
    for n in [0u64, 9, 10, 99, 12_345, u64::from(u32::MAX), u64::MAX] {
        let mut out = Vec::new();
        json_write::push_u64(&mut out, n);
        assert_eq!(out, serde_json::to_vec(&n).unwrap());
    }
    for n in [0i64, -1, 1_700_000_000_000, i64::MIN, i64::MAX] {
        let mut out = Vec::new();
        json_write::push_i64(&mut out, n);
        assert_eq!(out, serde_json::to_vec(&n).unwrap());
    }
}

#[test]
fn direct_produce_answer_matches_serde() {
    let cases: [&[(u32, u64)]; 4] = [
        &[],
        &[(0, 0)],
        &[(3, 17), (0, 18), (7, 9_999_999)],
        &[(u32::MAX, u64::MAX), (0, 1 << 40)],
    ];
    for offsets in cases {
        let direct = json_write::produce_answer(offsets.iter().copied());
        let serde = serde_json::to_vec(&ProduceResponse::new(
            offsets
                .iter()
                .map(|&(p, o)| PartitionOffset::new(p, o))
                .collect(),
        ))
        .unwrap();
        assert_eq!(
            String::from_utf8(direct).unwrap(),
            String::from_utf8(serde).unwrap()
        );
    }
}

#[test]
fn content_types_pick_the_format() {
    let cases = [
        (JSON_V2, JSON),
        ("application/json", JSON),
        (BINARY_V2, BINARY),
        ("application/vnd.kafka.json.v2+json; charset=utf-8", JSON),
        ("application/json;charset=UTF-8", JSON),
        (
            "Application/Vnd.Kafka.Binary.V2+Json ; charset=utf-8",
            BINARY,
        ),
        (" application/json ", JSON),
    ];
    for (ct, format) in cases {
        assert_eq!(
            EmbeddedFormat::from_content_type(Some(ct)).unwrap(),
            format,
            "{ct}"
        );
    }
}

#[test]
fn other_content_types_are_41501() {
    for ct in [
        "text/plain",
        "application/vnd.kafka.avro.v2+json",
        "application/vnd.kafka.v2+json",
        "application/x-www-form-urlencoded",
        "",
        "application/jsonx",
    ] {
        let err = EmbeddedFormat::from_content_type(Some(ct)).unwrap_err();
        assert_eq!(err.error_code(), 41501, "{ct}");
        assert!(err.to_string().contains(&format!("{ct:?}")), "{err}");
    }
    let err = EmbeddedFormat::from_content_type(None).unwrap_err();
    assert_eq!(err.error_code(), 41501);
    assert!(err.to_string().contains("missing Content-Type"));
}

#[test]
fn accept_picks_the_fetch_format() {
    assert_eq!(EmbeddedFormat::from_accept(None), JSON);
    assert_eq!(EmbeddedFormat::from_accept(Some("*/*")), JSON);
    assert_eq!(EmbeddedFormat::from_accept(Some("application/json")), JSON);
    assert_eq!(EmbeddedFormat::from_accept(Some(JSON_V2)), JSON);
    assert_eq!(EmbeddedFormat::from_accept(Some(BINARY_V2)), BINARY);
    assert_eq!(
        EmbeddedFormat::from_accept(Some("application/vnd.kafka.binary.v2+json; q=0.9")),
        BINARY
    );
    assert_eq!(
        EmbeddedFormat::from_accept(Some("text/html, application/vnd.kafka.binary.v2+json, */*")),
        BINARY
    );
    assert_eq!(
        EmbeddedFormat::from_accept(Some("*/*, application/vnd.kafka.binary.v2+json")),
        JSON,
        "first named format wins"
    );
    assert_eq!(EmbeddedFormat::from_accept(Some("text/html")), JSON);
}

#[test]
fn format_query_parameter() {
    assert_eq!(EmbeddedFormat::from_query(None).unwrap(), JSON);
    assert_eq!(EmbeddedFormat::from_query(Some("json")).unwrap(), JSON);
    assert_eq!(EmbeddedFormat::from_query(Some("binary")).unwrap(), BINARY);
    assert_eq!(
        EmbeddedFormat::from_query(Some("avro"))
            .unwrap_err()
            .error_code(),
        40002
    );
}

#[test]
fn json_format_stores_compact_sorted_json() {
    let records = decode(
        JSON,
        json!({"records": [
            {"key": {"b": 1, "a": [true, null, {"z": 0, "y": "s"}]}, "value": "hello"},
            {"value": 12.5},
            {"key": "k", "value": {"nested": {"d": 1, "c": 2}}, "partition": 3, "timestamp": 1700000000000u64},
        ]}),
    )
    .unwrap();
    assert_eq!(records.len(), 3);
    assert_eq!(
        records[0].key.as_deref(),
        Some(&br#"{"a":[true,null,{"y":"s","z":0}],"b":1}"#[..])
    );
    assert_eq!(records[0].value.as_deref(), Some(&br#""hello""#[..]));
    assert_eq!(records[0].partition, None);
    assert_eq!(records[1].key, None);
    assert_eq!(records[1].value.as_deref(), Some(&b"12.5"[..]));
    assert_eq!(records[2].key.as_deref(), Some(&br#""k""#[..]));
    assert_eq!(
        records[2].value.as_deref(),
        Some(&br#"{"nested":{"c":2,"d":1}}"#[..])
    );
    assert_eq!(records[2].partition, Some(3));
    assert_eq!(records[2].timestamp_ms, Some(1_700_000_000_000));
}

#[test]
fn json_numbers_keep_their_text_in_both_decoders() {
    let cases = [
        ("18446744073709551616", "18446744073709551616"),
        ("18446744073709551617", "18446744073709551617"),
        ("-0", "-0"),
        ("1e2", "1e2"),
        ("100", "100"),
        ("1.50", "1.50"),
        (
            r#"{"z": 1E+2, "a": [-0.0, 18446744073709551617]}"#,
            r#"{"a":[-0.0,18446744073709551617],"z":1E+2}"#,
        ),
    ];
    for (key, stored) in cases {
        // The fast path, and the general one (a repeated `records`
        // member sends a body there; the last one wins).
        for body in [
            format!(r#"{{"records":[{{"key":{key},"value":{key}}}]}}"#),
            format!(r#"{{"records":[],"records":[{{"key":{key},"value":{key}}}]}}"#),
            format!(r#"{{"records":[{{"k\u0065y":{key},"value":{key}}}]}}"#),
        ] {
            let records = decode_produce(JSON, body.as_bytes()).unwrap();
            assert_eq!(records[0].key.as_deref(), Some(stored.as_bytes()), "{body}");
            assert_eq!(
                records[0].value.as_deref(),
                Some(stored.as_bytes()),
                "{body}"
            );
        }
        assert_eq!(decode_key_query(JSON, key).unwrap(), stored.as_bytes());
    }
    assert_ne!(
        decode_key_query(JSON, "18446744073709551616").unwrap(),
        decode_key_query(JSON, "18446744073709551617").unwrap()
    );
    assert_ne!(
        decode_key_query(JSON, "1e2").unwrap(),
        decode_key_query(JSON, "100").unwrap()
    );
    // Beyond an f64 is refused, as serde_json does.
    for key in ["1e400", "-1e309"] {
        let body = format!(r#"{{"records":[{{"key":{key},"value":1}}]}}"#);
        assert_eq!(
            decode_produce(JSON, body.as_bytes())
                .unwrap_err()
                .error_code(),
            42206
        );
        assert_eq!(decode_key_query(JSON, key).unwrap_err().error_code(), 40002);
    }
}

#[test]
fn equal_json_keys_are_equal_bytes_whatever_the_spelling() {
    // Raw bodies, so member order and whitespace really differ on the wire.
    let a = decode_produce(JSON, br#"{"records":[{"key":{"b":1,"a":2},"value":1}]}"#).unwrap();
    let b = decode_produce(
        JSON,
        br#"{"records":[{"key": { "a" : 2 ,
        "b": 1 }, "value": 1}]}"#,
    )
    .unwrap();
    assert_eq!(a[0].key, b[0].key);
    assert_eq!(a[0].key.as_deref(), Some(&br#"{"a":2,"b":1}"#[..]));
    // Guards the assumption that serde_json's Map is sorted (no
    // `preserve_order` feature unified in by another crate).
    let map: Map<String, Value> = serde_json::from_str(r#"{"z":1,"a":2}"#).unwrap();
    assert_eq!(map.keys().collect::<Vec<_>>(), ["a", "z"]);
}

#[test]
fn null_value_is_a_tombstone_and_null_key_is_keyless() {
    for format in [JSON, BINARY] {
        let records = decode(format, json!({"records": [{"key": null, "value": null}]})).unwrap();
        assert_eq!(records[0].key, None);
        assert_eq!(records[0].value, None);
    }
    let records = decode(BINARY, json!({"records": [{"key": "a2V5", "value": null}]})).unwrap();
    assert_eq!(records[0].key.as_deref(), Some(&b"key"[..]));
    assert_eq!(records[0].value, None);
}

#[test]
fn missing_value_is_42202_not_a_silent_tombstone() {
    let (code, message) = code_and_message(decode(
        JSON,
        json!({"records": [{"value": 1}, {"key": "k"}]}),
    ));
    assert_eq!(code, 42202);
    assert!(message.contains("records[1].value is missing"), "{message}");
}

#[test]
fn binary_format_decodes_base64() {
    let records = decode(
        BINARY,
        json!({"records": [{"key": "AAEC/w==", "value": "aGVsbG8=", "headers": [
            {"name": "trace", "value": "AQ=="}, {"name": "trace", "value": null},
            {"name": "trace", "value": ""}
        ]}]}),
    )
    .unwrap();
    assert_eq!(records[0].key.as_deref(), Some(&[0u8, 1, 2, 255][..]));
    assert_eq!(records[0].value.as_deref(), Some(&b"hello"[..]));
    // A null header value stays null, apart from an empty one.
    assert_eq!(
        records[0].headers,
        vec![
            ("trace".to_string(), Some(Bytes::from_static(&[1]))),
            ("trace".to_string(), None),
            ("trace".to_string(), Some(Bytes::new())),
        ]
    );
}

#[test]
fn bad_base64_is_42206_naming_the_field() {
    let cases = [
        (
            json!({"key": "not base64!", "value": "aGk="}),
            "records[0].key",
        ),
        (json!({"value": "aGk"}), "records[0].value"),
        (
            json!({"value": "aGk=", "headers": [{"name": "h", "value": "%%"}]}),
            "records[0].headers[0].value",
        ),
    ];
    for (record, field) in cases {
        let (code, message) = code_and_message(decode(BINARY, json!({"records": [record]})));
        assert_eq!(code, 42206, "{message}");
        assert!(
            message.starts_with(&format!("{field} is not valid base64")),
            "{message}"
        );
    }
}

#[test]
fn binary_key_or_value_of_wrong_type_is_42201_or_42202() {
    let (code, message) = code_and_message(decode(
        BINARY,
        json!({"records": [{"key": 5, "value": "aGk="}]}),
    ));
    assert_eq!(code, 42201);
    assert!(
        message.contains("records[0].key must be a base64 string"),
        "{message}"
    );
    let (code, message) =
        code_and_message(decode(BINARY, json!({"records": [{"value": {"a": 1}}]})));
    assert_eq!(code, 42202);
    assert!(
        message.contains("records[0].value must be a base64 string"),
        "{message}"
    );
}

#[test]
fn headers_are_decoded_in_order_in_the_json_format_too() {
    let records = decode(
        JSON,
        json!({"records": [{"value": 1, "headers": [{"name": "b", "value": "Yg=="}, {"name": "a", "value": "YQ=="}]}]}),
    )
    .unwrap();
    let names: Vec<&str> = records[0].headers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["b", "a"]);
    assert_eq!(records[0].headers[1].1, Some(Bytes::from_static(b"a")));
}

#[test]
fn malformed_bodies_are_42206() {
    let cases: [(&[u8], &str); 9] = [
        (b"", "not JSON"),
        (b"{\"records\": [", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[]", "must be a JSON object"),
        (b"{}", "no \"records\""),
        (b"{\"records\": {}}", "must be an array, not an object"),
        (b"{\"records\": null}", "must be an array, not null"),
        (b"{\"records\": [1]}", "records[0] must be an object"),
        (
            b"{\"records\": [{\"value\": 1, \"valeu\": 2}]}",
            "unknown field \"valeu\"",
        ),
    ];
    for (body, expected) in cases {
        for format in [JSON, BINARY] {
            let err = decode_produce(format, body).unwrap_err();
            assert_eq!(err.error_code(), 42206, "{body:?}");
            assert!(err.to_string().contains(expected), "{body:?}: {err}");
        }
    }
}

#[test]
fn deeply_nested_json_is_rejected_not_a_stack_overflow() {
    let body = format!(
        "{{\"records\":[{{\"value\":{}1{}}}]}}",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    assert_eq!(
        decode_produce(JSON, body.as_bytes())
            .unwrap_err()
            .error_code(),
        42206
    );
}

#[test]
fn bad_partition_timestamp_and_headers_are_42206() {
    let cases = [
        (json!({"value": 1, "partition": -1}), "records[0].partition"),
        (
            json!({"value": 1, "partition": "0"}),
            "records[0].partition",
        ),
        (
            json!({"value": 1, "partition": 1.5}),
            "records[0].partition",
        ),
        (
            json!({"value": 1, "partition": 4294967296u64}),
            "records[0].partition",
        ),
        (json!({"value": 1, "timestamp": -1}), "records[0].timestamp"),
        (
            json!({"value": 1, "timestamp": "now"}),
            "records[0].timestamp",
        ),
        (
            json!({"value": 1, "headers": {"a": "b"}}),
            "records[0].headers must be an array",
        ),
        (
            json!({"value": 1, "headers": ["h"]}),
            "records[0].headers[0] must be an object",
        ),
        (
            json!({"value": 1, "headers": [{"value": "YQ=="}]}),
            "records[0].headers[0].name",
        ),
        (
            json!({"value": 1, "headers": [{"name": "h"}]}),
            "records[0].headers[0].value",
        ),
        (
            json!({"value": 1, "headers": [{"name": "h", "value": 1}]}),
            "records[0].headers[0].value must be a base64 string or null",
        ),
        (
            json!({"value": 1, "headers": [{"name": "h", "value": "", "x": 1}]}),
            "unknown field \"x\"",
        ),
    ];
    for (record, expected) in cases {
        let (code, message) = code_and_message(decode(JSON, json!({"records": [record]})));
        assert_eq!(code, 42206, "{message}");
        assert!(message.contains(expected), "{expected}: {message}");
    }
}

#[test]
fn empty_records_and_extra_top_level_fields_are_accepted() {
    assert!(decode(JSON, json!({"records": []})).unwrap().is_empty());
    let records = decode(
        BINARY,
        json!({"key_schema_id": null, "records": [{"value": "eA=="}]}),
    )
    .unwrap();
    assert_eq!(records[0].value.as_deref(), Some(&b"x"[..]));
}

#[test]
fn render_json_and_binary() {
    let stored_key = br#"{"a":1}"#;
    assert_eq!(
        render_embedded(JSON, RecordField::Key, Some(stored_key)).unwrap(),
        json!({"a": 1})
    );
    assert_eq!(
        render_embedded(BINARY, RecordField::Key, Some(stored_key)).unwrap(),
        json!(BASE64.encode(stored_key))
    );
    for format in [JSON, BINARY] {
        assert_eq!(
            render_embedded(format, RecordField::Value, None).unwrap(),
            Value::Null
        );
    }
    let err = render_embedded(JSON, RecordField::Value, Some(&[0xff, 0x00])).unwrap_err();
    assert_eq!(err.error_code(), 42203);
    assert!(
        err.to_string().contains("stored value is not valid JSON"),
        "{err}"
    );
}

#[test]
fn produce_then_render_round_trips_in_both_formats() {
    let json_records = decode(
        JSON,
        json!({"records": [{"key": {"id": 7}, "value": [1, "two"], "headers": [{"name": "h", "value": "AAE="}]}]}),
    )
    .unwrap();
    let binary_records = decode(
        BINARY,
        json!({"records": [{"key": "AP8=", "value": "aGk="}]}),
    )
    .unwrap();
    for (format, record, key, value) in [
        (JSON, &json_records[0], json!({"id": 7}), json!([1, "two"])),
        (BINARY, &binary_records[0], json!("AP8="), json!("aGk=")),
    ] {
        let view = RecordView {
            topic: "t",
            partition: 2,
            offset: 41,
            timestamp_ms: 5,
            key: record.key.as_deref(),
            value: record.value.as_deref(),
            headers: &record.headers,
            physical_offset: None,
        };
        let rendered = serde_json::to_value(render_record(format, &view).unwrap()).unwrap();
        let headers: Vec<Value> = record
            .headers
            .iter()
            .map(|(n, v)| json!({"name": n, "value": v.as_ref().map(|v| BASE64.encode(v))}))
            .collect();
        assert_eq!(
            rendered,
            json!({"topic": "t", "key": key, "value": value, "partition": 2, "offset": 41, "timestamp": 5, "headers": headers})
        );
    }
}

#[test]
fn render_record_names_the_offset_on_42203_and_shows_physical_offset() {
    let view = RecordView {
        topic: "t",
        partition: 1,
        offset: 9,
        timestamp_ms: 0,
        key: Some(b"raw bytes"),
        value: None,
        headers: &[],
        physical_offset: Some(4096),
    };
    let err = render_record(JSON, &view).unwrap_err();
    assert_eq!(err.error_code(), 42203);
    assert!(
        err.to_string()
            .starts_with("record at offset 9 of t/1: stored key"),
        "{err}"
    );
    let rendered = serde_json::to_value(render_record(BINARY, &view).unwrap()).unwrap();
    assert_eq!(rendered["physical_offset"], 4096);
    assert_eq!(rendered["value"], Value::Null);
}

#[test]
fn key_query_matches_produced_key_bytes() {
    let produced = decode(
        JSON,
        json!({"records": [{"key": {"b": 1, "a": "x"}, "value": 1}]}),
    )
    .unwrap();
    let queried = decode_key_query(JSON, r#"{ "a": "x", "b": 1 }"#).unwrap();
    assert_eq!(produced[0].key.as_ref(), Some(&queried));
    assert_eq!(
        decode_key_query(BINARY, "AP8=").unwrap(),
        Bytes::from_static(&[0, 255])
    );
    assert_eq!(
        decode_key_query(JSON, "user-1").unwrap_err().error_code(),
        40002
    );
    assert_eq!(
        decode_key_query(JSON, "null").unwrap_err().error_code(),
        40002
    );
    assert_eq!(
        decode_key_query(BINARY, "@@").unwrap_err().error_code(),
        40002
    );
}

#[test]
fn response_shapes_match_api_md() {
    let response =
        ProduceResponse::new(vec![PartitionOffset::new(0, 7), PartitionOffset::new(3, 0)]);
    assert_eq!(
        serde_json::to_value(&response).unwrap(),
        json!({
            "offsets": [
                {"partition": 0, "offset": 7, "error_code": null, "error": null},
                {"partition": 3, "offset": 0, "error_code": null, "error": null},
            ],
            "key_schema_id": null,
            "value_schema_id": null,
        })
    );
    assert_eq!(
        serde_json::to_value(PartitionOffsets {
            beginning_offset: 3,
            end_offset: 10,
            offset: None,
        })
        .unwrap(),
        json!({"beginning_offset": 3, "end_offset": 10})
    );
    assert_eq!(
        serde_json::to_value(PartitionOffsets {
            beginning_offset: 3,
            end_offset: 10,
            offset: Some(7),
        })
        .unwrap(),
        json!({"beginning_offset": 3, "end_offset": 10, "offset": 7})
    );
}
// ---- fast paths against the general ones (json_fast.rs) ----

/// Stored key/value texts: canonical and not, valid and not.
fn json_samples() -> Vec<Vec<u8>> {
    let mut samples: Vec<Vec<u8>> = [
        "null",
        "true",
        "false",
        "0",
        "-0",
        "7",
        "-7",
        "123456789012345678",
        "1234567890123456789",
        "12345678901234567890",
        "-9223372036854775808",
        "184467440737095516150",
        "1.5",
        "1.0",
        "1e2",
        "1E+2",
        "-0.0",
        "1e400",
        "01",
        "\"\"",
        "\"s\"",
        "\"a\\\"b\\\\c\\n\\r\\t\\b\\f\"",
        "\"\\/\"",
        "\"\\u00e9\"",
        "\"\\u0001\"",
        "\"\\ud800\"",
        "\"é ü 日本\"",
        "\"\x7f\"",
        "[]",
        "{}",
        "[1,2,[3]]",
        "[1, 2]",
        " 1",
        "1 ",
        "{\"a\":1,\"b\":2}",
        "{\"b\":1,\"a\":2}",
        "{\"a\":1,\"a\":2}",
        "{\"a\" :1}",
        "{\"a\": 1}",
        "{\"\\u0061\":1}",
        "{\"a\\n\":1,\"a\":2}",
        "{\"a\":{\"z\":[true,null,{\"y\":\"s\"}],\"c\":1}}",
        "{\"ab\":1,\"b\":2}",
        "{\"b\":1,\"ab\":2}",
        "{\"é\":1,\"z\":2}",
        "{\"z\":1,\"é\":2}",
        "[1,]",
        "{\"a\":1,}",
        "[",
        "\"unterminated",
        "nul",
        "-",
        "1.",
        "1e",
        "tru",
        "[1 2]",
        "{1:2}",
        "\"tab\there\"",
        "",
        " ",
        "raw bytes",
        "\"\\x\"",
        "[-0,1]",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    samples.push(vec![0xff, 0x00]);
    samples.push(b"\"\xc3\x28\"".to_vec());
    samples.push(format!("{}1{}", "[".repeat(99), "]".repeat(99)).into_bytes());
    samples.push(format!("{}1{}", "[".repeat(101), "]".repeat(101)).into_bytes());
    samples.push(format!("{}1{}", "[".repeat(130), "]".repeat(130)).into_bytes());
    samples
}

#[test]
fn canonical_json_is_recognised_and_agrees_with_serde_json() {
    use canonical_json::canonicalize;
    for sample in json_samples() {
        let parsed = serde_json::from_slice::<Value>(&sample);
        let canonical = canonicalize(&sample);
        // Text recognised as canonical is its own canonical form.
        if json_fast::is_canonical_json(&sample) {
            assert_eq!(canonical.as_deref().ok(), Some(&sample[..]), "{sample:?}");
        }
        // The same texts are JSON to both (below serde_json's depth).
        let shallow = !sample.starts_with(b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[");
        if shallow {
            assert_eq!(canonical.is_ok(), parsed.is_ok(), "{sample:?}");
        }
        let Ok(text) = canonical else { continue };
        // Canonical text is a fixed point, recognised as such unless it
        // has a `\u` escape or a member name with an escape (the scanner
        // is conservative there) or nests deeper than the scanner goes,
        // and the same value as serde_json reads from the sample.
        assert_eq!(canonicalize(&text).unwrap(), text, "{sample:?}");
        let deep = text.starts_with(b"[[[[[[[[[[[[[[[[[[[[[");
        let unicode_escape = text.windows(2).any(|w| w == b"\\u");
        let escaped_name = text.windows(2).any(|w| w == b"\\n");
        if !deep && !escaped_name && !unicode_escape {
            assert!(json_fast::is_canonical_json(&text), "{text:?}");
        }
        if shallow {
            assert_eq!(
                serde_json::from_slice::<Value>(&text).unwrap(),
                parsed.unwrap(),
                "{sample:?}"
            );
        }
        // Without floats or integers beyond 64 bits, it is exactly
        // serde_json's rendering: what was stored before numbers were
        // kept as written keeps its bytes.
        let has_float = text.iter().any(|b| matches!(b, b'.' | b'e' | b'E'));
        let long_integer = text
            .split(|b| !b.is_ascii_digit())
            .any(|run| run.len() > 18);
        let negative_zero = text.windows(2).any(|w| w == b"-0");
        if shallow && !has_float && !long_integer && !negative_zero {
            let value: Value = serde_json::from_slice(&text).unwrap();
            assert_eq!(serde_json::to_vec(&value).unwrap(), text, "{sample:?}");
        }
    }
}

fn views<'a>(
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    headers: &'a [(String, Option<Bytes>)],
) -> Vec<RecordView<'a>> {
    let base = RecordView {
        topic: "orders.v1-x_y",
        partition: 3,
        offset: 12_345_678_901,
        timestamp_ms: 1_700_000_000_123,
        key,
        value,
        headers,
        physical_offset: None,
    };
    vec![
        base,
        RecordView {
            timestamp_ms: -1,
            offset: 0,
            partition: u32::MAX,
            physical_offset: Some(4096),
            ..base
        },
        RecordView {
            topic: "we\"ird\\top\nic",
            timestamp_ms: i64::MIN,
            offset: u64::MAX,
            physical_offset: Some(0),
            ..base
        },
    ]
}

/// `write_record` against serde_json's rendering of the same record:
/// the same JSON value (numbers compare as the f64s serde_json makes of
/// both), and the same bytes when the key and value have no number
/// that serde_json respells.
#[test]
fn write_record_matches_serde_of_render_record() {
    let header_sets: Vec<Vec<(String, Option<Bytes>)>> = vec![
        vec![],
        vec![("trace".into(), Some(Bytes::from_static(&[0, 1, 255])))],
        vec![
            ("a\"b\\c\u{1}é".into(), Some(Bytes::new())),
            ("a\"b\\c\u{1}é".into(), None),
            ("a\"b\\c\u{1}é".into(), Some(Bytes::from_static(b"xy"))),
            ("".into(), Some(Bytes::from_static(b"\xff"))),
        ],
    ];
    let mut samples: Vec<Option<Vec<u8>>> = json_samples().into_iter().map(Some).collect();
    samples.push(None);
    samples.push(Some((0..=255u8).collect()));
    let mut compared = 0;
    for headers in &header_sets {
        for key in &samples {
            for value in [&None, &Some(b"{\"v\":1}".to_vec()), key] {
                for view in views(key.as_deref(), value.as_deref(), headers) {
                    for format in [JSON, BINARY] {
                        let old =
                            render_record(format, &view).map(|r| serde_json::to_vec(&r).unwrap());
                        let mut new = b"prefix".to_vec();
                        let result = write_record(&mut new, format, &view);
                        match (old, result) {
                            (Ok(old), Ok(())) => {
                                let new = &new[6..];
                                assert_eq!(
                                    serde_json::from_slice::<Value>(new).unwrap(),
                                    serde_json::from_slice::<Value>(&old).unwrap(),
                                    "{view:?}"
                                );
                                let respelled = |b: Option<&[u8]>| {
                                    b.is_some_and(|b| {
                                        b.iter().any(|c| matches!(c, b'.' | b'e' | b'E'))
                                            || b.windows(2).any(|w| w == b"-0")
                                            || b.len() > 18
                                    })
                                };
                                if !respelled(view.key) && !respelled(view.value) {
                                    assert_eq!(
                                        String::from_utf8_lossy(new),
                                        String::from_utf8_lossy(&old),
                                        "{view:?}"
                                    );
                                }
                            }
                            (Err(old), Err(new)) => {
                                assert_eq!(old.error_code(), new.error_code());
                                let prefix = |e: &ApiError| {
                                    let m = e.to_string();
                                    m[..m.find('(').unwrap_or(m.len())].to_string()
                                };
                                assert_eq!(prefix(&old), prefix(&new));
                            }
                            (old, new) => panic!("{view:?}: {old:?} vs {new:?}"),
                        }
                        compared += 1;
                    }
                }
            }
        }
    }
    assert!(compared > 1000, "{compared}");
}

#[test]
fn write_record_pins_the_fetch_answer_shape() {
    let headers = vec![
        ("h".to_string(), Some(Bytes::from_static(b"ab"))),
        ("h".to_string(), None),
        ("h".to_string(), Some(Bytes::new())),
    ];
    let render = |format, key: Option<&[u8]>, value: Option<&[u8]>, headers| {
        let mut out = Vec::new();
        write_record(
            &mut out,
            format,
            &RecordView {
                topic: "t",
                partition: 2,
                offset: 41,
                timestamp_ms: 5,
                key,
                value,
                headers,
                physical_offset: None,
            },
        )
        .unwrap();
        String::from_utf8(out).unwrap()
    };
    assert_eq!(
        render(JSON, Some(br#"{"id":7}"#), Some(br#"[1,"two"]"#), &headers),
        r#"{"topic":"t","key":{"id":7},"value":[1,"two"],"partition":2,"offset":41,"timestamp":5,"headers":[{"name":"h","value":"YWI="},{"name":"h","value":null},{"name":"h","value":""}]}"#
    );
    // Not canonical as stored: rendered through serde_json.
    assert_eq!(
        render(JSON, None, Some(br#" {"b": 1.0, "a": "\/"} "#), &[]),
        r#"{"topic":"t","key":null,"value":{"a":"/","b":1.0},"partition":2,"offset":41,"timestamp":5,"headers":[]}"#
    );
    // Keyless tombstone.
    assert_eq!(
        render(BINARY, None, None, &[]),
        r#"{"topic":"t","key":null,"value":null,"partition":2,"offset":41,"timestamp":5,"headers":[]}"#
    );
    assert_eq!(
        render(BINARY, Some(&[0, 255]), Some(b"hi"), &headers[..1]),
        r#"{"topic":"t","key":"AP8=","value":"aGk=","partition":2,"offset":41,"timestamp":5,"headers":[{"name":"h","value":"YWI="}]}"#
    );
    let mut out = Vec::new();
    let err = write_record(
        &mut out,
        JSON,
        &RecordView {
            topic: "t",
            partition: 1,
            offset: 9,
            timestamp_ms: 0,
            key: Some(b"{\"a\":1}"),
            value: Some(b"raw bytes"),
            headers: &[],
            physical_offset: None,
        },
    )
    .unwrap_err();
    assert_eq!(err.error_code(), 42203);
    assert!(
        err.to_string()
            .starts_with("record at offset 9 of t/1: stored value is not valid JSON"),
        "{err}"
    );
}

/// Produce bodies covering every shape the decoders handle.
fn produce_bodies() -> Vec<Vec<u8>> {
    let mut bodies: Vec<Vec<u8>> = [
        r#"{"records":[]}"#,
        r#"{"records":[{"value":"aGk="}]}"#,
        // Numbers as written, and `\u` escapes, in json keys and values.
        r#"{"records":[{"key":18446744073709551617,"value":{"b":-0,"a":1E+2,"c":1.50}}]}"#,
        r#"{"records":[{"key":"\u00e9\ud83d\ude00","value":["\u0041\/",{"\u0062":1,"a":2}]}]}"#,
        r#"{"records":[{"key":"\ud800","value":1}]}"#,
        r#"{"records":[{"key":"\udc00","value":1}]}"#,
        r#"{"records":[{"key":"\ud800\u0041","value":1}]}"#,
        r#"{"records":[{"key":"\u12","value":1}]}"#,
        r#"{"records":[{"key":1e400,"value":1}]}"#,
        r#"{"records":[{"key":1,"value":-1e-400}]}"#,
        r#"{"records":[{"key":1,"value":1}],"x":"\ud800"}"#,
        r#"{"records":[{"key":"AAEC/w==","value":"aGVsbG8=","headers":[{"name":"trace","value":"AQ=="},{"value":"","name":"trace"}]}]}"#,
        r#"{"records":[{"value":"eA==","headers":[{"name":"h","value":null},{"value":null,"name":"h"},{"name":"h","value":"eA=="}]}]}"#,
        r#"{"records":[{"value":"eA==","headers":[{"name":"h","value":nul}]}]}"#,
        r#"{"records":[{"value":"eA==","headers":[{"name":"h"}]}]}"#,
        r#" { "records" : [ { "key" : null , "value" : null , "partition" : 0 , "timestamp" : 0 , "headers" : null } ] } "#,
        r#"{"records":[{"value":"eA==","partition":4294967295,"timestamp":9223372036854775807}]}"#,
        r#"{"records":[{"value":"eA==","partition":4294967296}]}"#,
        r#"{"records":[{"value":"eA==","timestamp":9223372036854775808}]}"#,
        r#"{"records":[{"value":"eA==","partition":-1}]}"#,
        r#"{"records":[{"value":"eA==","partition":-0}]}"#,
        r#"{"records":[{"value":"eA==","partition":1.0}]}"#,
        r#"{"records":[{"value":"eA==","partition":1e1}]}"#,
        r#"{"records":[{"value":"eA==","partition":"0"}]}"#,
        r#"{"records":[{"value":"eA==","timestamp":-1}]}"#,
        r#"{"records":[{"value":"eA==","timestamp":"now"}]}"#,
        r#"{"records":[{"value":"eA==","partition":01}]}"#,
        r#"{"key_schema_id":null,"records":[{"value":"eA=="}],"value_schema":{"x":[1,2.5,"\u00e9"]}}"#,
        r#"{"records":[{"value":"eA=="}],"records":[{"value":"eQ=="}]}"#,
        r#"{"records":[{"value":"eA==","value":"eQ=="}]}"#,
        r#"{"records":[{"key":"eA==","key":null,"value":"eQ=="}]}"#,
        r#"{"records":[{"value":"eA==","valeu":1}]}"#,
        r#"{"records":[{"key":"eA=="}]}"#,
        r#"{"records":[{"value":"not base64!"}]}"#,
        r#"{"records":[{"value":"aGk"}]}"#,
        r#"{"records":[{"value":"aGk=\n"}]}"#,
        r#"{"records":[{"value":"aG\u0073="}]}"#,
        r#"{"records":[{"value":"aGk\/"}]}"#,
        r#"{"records":[{"key":5,"value":"aGk="}]}"#,
        r#"{"records":[{"value":{"a":1}}]}"#,
        r#"{"records":[{"value":1,"headers":{"a":"b"}}]}"#,
        r#"{"records":[{"value":1,"headers":["h"]}]}"#,
        r#"{"records":[{"value":1,"headers":[{"value":"YQ=="}]}]}"#,
        r#"{"records":[{"value":1,"headers":[{"name":"h"}]}]}"#,
        r#"{"records":[{"value":1,"headers":[{"name":"h","value":null}]}]}"#,
        r#"{"records":[{"value":1,"headers":[{"name":"h","value":"","x":1}]}]}"#,
        r#"{"records":[{"value":1,"headers":[{"name":"h","name":"i","value":""}]}]}"#,
        r#"{"records":[{"value":1,"headers":[{"name":"a\"b\\c\né","value":"YQ=="}]}]}"#,
        r#"{"records":[{"value":1,"headers":[{"name":"\u0061","value":"YQ=="}]}]}"#,
        r#"{"records":[{"value":1,"headers":[{"name":"\ud800","value":"YQ=="}]}]}"#,
        r#"{"records":[{"key":{"b":1,"a":[true,null,{"z":0,"y":"s"}]},"value":"hello"},{"value":12.5},{"key":"k","value":{"nested":{"d":1,"c":2}},"partition":3,"timestamp":1700000000000}]}"#,
        r#"{"records":[{"key":{"a":2,"b":1},"value":{"a":[1,-2,"x\ty"],"b":{}}}]}"#,
        r#"{"records":[{"key":{ "a" : 2 , "b": 1 },"value":[1 ,2]}]}"#,
        r#"{"records":[{"key":{"a":1,"a":2},"value":-0}]}"#,
        r#"{"records":[{"key":"\/","value":1e400}]}"#,
        r#"{"records":[{"key":"é日本","value":"\u00e9"}]}"#,
        r#"{"records":[{"key":"\ud800","value":1}]}"#,
        r#"{"records":[{"value":12345678901234567890}]}"#,
        r#"{"records":[{"value":123456789012345678901234}]}"#,
        r#"{"records":[{"value":[1,]}]}"#,
        r#"{"records":[1]}"#,
        r#"{"records":[null]}"#,
        r#"{"records":{}}"#,
        r#"{"records":null}"#,
        r#"{}"#,
        r#"[]"#,
        r#""#,
        r#"{"records":["#,
        r#"{"records":[]} x"#,
        r#"{"records":[]},"#,
        r#"{"records":[],}"#,
        r#"{"rec\u006frds":[]}"#,
        r#"{"rec\u006frds":[{"value":"eA=="}]}"#,
        "{\"records\":[{\"value\":\"a\tb\"}]}",
        "{\"records\":[{\"value\":\"\x7f\"}]}",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    bodies.push(b"\xff\xfe".to_vec());
    bodies.push(b"{\"records\":[{\"value\":\"\xc3\x28\"}]}".to_vec());
    bodies.push(b"{\"x\":\"\xc3\x28\",\"records\":[]}".to_vec());
    // Escapes, quotes and control characters at every position of a
    // string longer than the scanner's 8-byte steps.
    for at in 0..20 {
        for special in [
            "\\\"", "\\n", "\\\\", "\\/", "\\u0041", "\t", "\u{1}", "é", "\u{7f}",
        ] {
            let text = format!("{}{special}{}", "a".repeat(at), "b".repeat(20 - at));
            bodies.push(
                format!("{{\"records\":[{{\"key\":\"{text}\",\"value\":{{\"{text}\":1}},\"headers\":[{{\"name\":\"{text}\",\"value\":\"\"}}]}}]}}")
                    .into_bytes(),
            );
            bodies.push(
                format!(
                    "{{\"records\":[{{\"key\":[\"{text}\"],\"value\":{{\"k\":\"{text}\"}}}}]}}"
                )
                .into_bytes(),
            );
        }
    }
    // Base64 the fast path decodes with base64-simd and the general path
    // with the base64 crate: every length around the SIMD block sizes,
    // and each of those with one character spoilt (padding, trailing
    // bits, characters outside the alphabet, whitespace).
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for len in 0..=100usize {
        let bytes: Vec<u8> = (0..len).map(|i| (i as u64 * 131 + seed) as u8).collect();
        let text = BASE64.encode(&bytes);
        bodies.push(format!("{{\"records\":[{{\"value\":\"{text}\"}}]}}").into_bytes());
        if text.is_empty() {
            continue;
        }
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut spoilt = text.into_bytes();
        let at = seed as usize % spoilt.len();
        spoilt[at] = b"=A/+-_ .\x7f"[(seed >> 32) as usize % 9];
        let spoilt = String::from_utf8(spoilt).unwrap();
        bodies.push(
            format!("{{\"records\":[{{\"key\":\"{spoilt}\",\"value\":\"eA==\"}}]}}").into_bytes(),
        );
    }
    for text in [
        "QR==", "QUJ=", "QUJDRB==", "Q===", "====", "QQ==QQ==", "QQ=", "=QUJ",
    ] {
        bodies.push(format!("{{\"records\":[{{\"value\":\"{text}\"}}]}}").into_bytes());
    }
    for depth in [90, 97, 98, 120, 124, 125, 126, 127, 130, 10_000] {
        let nested = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
        bodies.push(format!("{{\"records\":[{{\"value\":{nested}}}]}}").into_bytes());
        bodies.push(format!("{{\"x\":{nested},\"records\":[]}}").into_bytes());
    }
    bodies
}

fn same_outcome(
    body: &[u8],
    format: EmbeddedFormat,
    new: Result<Vec<ProduceRecord>, ApiError>,
    old: Result<Vec<ProduceRecord>, ApiError>,
) {
    let body = String::from_utf8_lossy(body);
    match (new, old) {
        (Ok(new), Ok(old)) => assert_eq!(new, old, "{format:?} {body}"),
        (Err(new), Err(old)) => {
            assert_eq!(new.error_code(), old.error_code(), "{format:?} {body}");
            assert_eq!(new.to_string(), old.to_string(), "{format:?} {body}");
        }
        (new, old) => panic!("{format:?} {body}: {new:?} vs {old:?}"),
    }
}

#[test]
fn fast_produce_decoding_matches_the_general_decoder() {
    let mut fast = 0;
    for body in produce_bodies() {
        for format in [JSON, BINARY] {
            let old = decode_produce_general(format, &body);
            if let Some(records) = json_fast::decode_produce_fast(format, &body) {
                fast += 1;
                same_outcome(
                    &body,
                    format,
                    Ok(records),
                    decode_produce_general(format, &body),
                );
            }
            same_outcome(&body, format, decode_produce(format, &body), old);
        }
    }
    assert!(fast >= 100, "{fast}");
}

#[test]
fn fast_base64_encoding_matches_the_base64_crate() {
    for len in 0..=200usize {
        let bytes: Vec<u8> = (0..len).map(|i| (i * 251 + len) as u8).collect();
        let mut out = b"x".to_vec();
        json_write::push_base64_str(&mut out, &bytes);
        assert_eq!(
            out,
            format!("x\"{}\"", BASE64.encode(&bytes)).into_bytes(),
            "{len}"
        );
    }
}

#[test]
fn plain_requests_take_the_fast_path() {
    let binary = br#"{"records":[{"value":"aGk="},{"key":"eA==","value":null,"headers":[{"name":"h","value":"YQ=="},{"name":"h","value":null}]}]}"#;
    let records = json_fast::decode_produce_fast(BINARY, binary).unwrap();
    assert_eq!(records[0].value.as_deref(), Some(&b"hi"[..]));
    assert_eq!(records[1].key.as_deref(), Some(&b"x"[..]));
    assert_eq!(records[1].value, None);
    assert_eq!(
        records[1].headers,
        vec![
            ("h".into(), Some(Bytes::from_static(b"a"))),
            ("h".into(), None)
        ]
    );
    let json = br#"{"records":[{"key":{"a":1},"value":{"b":2,"a":1.5}}]}"#;
    let records = json_fast::decode_produce_fast(JSON, json).unwrap();
    assert_eq!(records[0].key.as_deref(), Some(&br#"{"a":1}"#[..]));
    assert_eq!(
        records[0].value.as_deref(),
        Some(&br#"{"a":1.5,"b":2}"#[..])
    );
}
