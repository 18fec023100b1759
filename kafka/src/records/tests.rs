use super::compression::tests::compress;
use super::*;

/// Headers as the store holds them (what a fetch encodes) from the pairs
/// a produce decodes.
fn stored(pairs: &[(String, Option<Bytes>)]) -> Vec<Header> {
    pairs
        .iter()
        .map(|(name, value)| Header {
            name: name.clone(),
            value: value.clone(),
        })
        .collect()
}

fn rec<'a>(offset: u64, ts: i64, key: Option<&'a [u8]>, value: Option<&'a [u8]>) -> OutRecord<'a> {
    OutRecord {
        offset,
        timestamp_ms: ts,
        key,
        value,
        headers: Vec::new(),
    }
}

/// A batch of `count` claimed records around `body` (a record section, as
/// sent: compressed when `attributes` names a codec), with a correct CRC,
/// so each lie below gets past the checksum.
fn batch_with(body: &[u8], count: i32, attributes: i16) -> Bytes {
    let mut out = Vec::new();
    BatchHeader {
        base_offset: 0,
        attributes,
        last_offset_delta: count - 1,
        base_timestamp: 1000,
        max_timestamp: 1000,
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
        count,
    }
    .write(&mut out, body);
    Bytes::from(out)
}

/// The record section of an encoded batch (what follows its header).
fn body_of(batch: &[u8]) -> &[u8] {
    &batch[LOG_OVERHEAD + BATCH_HEADER_AFTER_LENGTH..]
}

fn decode(data: &Bytes) -> Result<Vec<BatchRecord>, RecordError> {
    let mut budget = 1 << 20;
    decode_batches(data, &mut budget)
}

#[test]
fn golden_bytes_of_one_record() {
    let mut r = rec(7, 1000, Some(b"k"), Some(b"v"));
    r.headers = stored(&[("h".into(), Some(Bytes::from_static(b"1")))]);
    let mut out = Vec::new();
    encode_batch(&mut out, [r]);
    // Laid out by hand from Kafka's record-batch v2 layout; the CRC32C
    // was computed independently (a bitwise Castagnoli in Python).
    let expected: &[u8] = &[
        0, 0, 0, 0, 0, 0, 0, 7, // baseOffset
        0, 0, 0, 62, // batchLength: 49 + 13
        0xff, 0xff, 0xff, 0xff, // partitionLeaderEpoch -1
        2,    // magic
        0xbc, 0x1d, 0x55, 0x1f, // crc
        0, 0, // attributes
        0, 0, 0, 0, // lastOffsetDelta
        0, 0, 0, 0, 0, 0, 0x03, 0xe8, // baseTimestamp 1000
        0, 0, 0, 0, 0, 0, 0x03, 0xe8, // maxTimestamp
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // producerId -1
        0xff, 0xff, // producerEpoch -1
        0xff, 0xff, 0xff, 0xff, // baseSequence -1
        0, 0, 0, 1,    // records count
        0x18, // record length 12
        0, 0, 0, // attributes, timestampDelta, offsetDelta
        0x02, b'k', 0x02, b'v', // key, value
        0x02, 0x02, b'h', 0x02, b'1', // one header
    ];
    assert_eq!(out, expected);
}

/// A null header value is length -1 on the wire both ways: decoded as null
/// (not refused, not an empty value) and encoded back as -1, between two
/// headers of the same name, in order.
#[test]
fn null_header_values_are_length_minus_one_both_ways() {
    // One record's section, laid out by hand: headers h=a, h=null, h="".
    #[rustfmt::skip]
    let body: &[u8] = &[
        0x22, // record length 17
        0, 0, 0, // attributes, timestampDelta, offsetDelta
        0x01, 0x02, b'v', // key null, value "v"
        0x06, // three headers
        0x02, b'h', 0x02, b'a', // h = "a"
        0x02, b'h', 0x01, // h = null (length -1)
        0x02, b'h', 0x00, // h = ""
    ];
    let decoded = decode(&batch_with(body, 1, 0)).unwrap();
    let want = vec![
        ("h".to_string(), Some(Bytes::from_static(b"a"))),
        ("h".to_string(), None),
        ("h".to_string(), Some(Bytes::new())),
    ];
    assert_eq!(decoded[0].headers, want);
    let mut r = rec(0, 1000, None, Some(b"v"));
    r.headers = stored(&want);
    let mut out = Vec::new();
    encode_batch(&mut out, [r]);
    assert_eq!(body_of(&out), body);
}

#[test]
fn round_trip_keeps_nulls_duplicate_headers_gaps_and_timestamps() {
    let mut a = rec(10, 5000, None, Some(b"first"));
    a.headers = stored(&[
        ("dup".into(), Some(Bytes::from_static(b"1"))),
        ("other".into(), Some(Bytes::new())),
        ("dup".into(), None),
        ("dup".into(), Some(Bytes::from_static(b"2"))),
    ]);
    let b = rec(13, 4000, Some(b"key"), None);
    let c = rec(14, i64::MAX / 2, Some(b""), Some(b""));
    let mut out = Vec::new();
    encode_batch(&mut out, [a.clone(), b.clone(), c.clone()]);
    let decoded = decode(&Bytes::from(out)).unwrap();
    let expect = |r: &OutRecord<'_>| BatchRecord {
        key: r.key.map(Bytes::copy_from_slice),
        value: r.value.map(Bytes::copy_from_slice),
        headers: r
            .headers
            .iter()
            .map(|h| (h.name.clone(), h.value.clone()))
            .collect(),
        timestamp_ms: Some(r.timestamp_ms),
    };
    assert_eq!(decoded, vec![expect(&a), expect(&b), expect(&c)]);
}

#[test]
fn several_batches_in_one_records_field_and_every_codec() {
    let mut one = Vec::new();
    encode_batch(
        &mut one,
        [
            rec(0, 1, Some(b"a"), Some(b"x")),
            rec(1, 2, Some(b"b"), Some(b"y")),
        ],
    );
    for codec in [
        compression::GZIP,
        compression::SNAPPY,
        compression::LZ4,
        compression::ZSTD,
    ] {
        let packed = compress(codec, body_of(&one));
        let mut data = batch_with(&packed, 2, i16::from(codec)).to_vec();
        data.extend_from_slice(&one);
        let decoded = decode(&Bytes::from(data)).unwrap();
        let keys: Vec<_> = decoded.iter().map(|r| r.key.clone().unwrap()).collect();
        assert_eq!(keys, [&b"a"[..], b"b", b"a", b"b"], "codec {codec}");
        assert_eq!(
            decoded[1].timestamp_ms,
            Some(1001),
            "delta from batch_with's base"
        );
    }
}

#[test]
fn log_append_time_batches_take_the_append_time() {
    let mut one = Vec::new();
    encode_batch(&mut one, [rec(0, 1, None, Some(b"x"))]);
    let data = batch_with(body_of(&one), 1, ATTR_LOG_APPEND_TIME);
    assert_eq!(decode(&data).unwrap()[0].timestamp_ms, None);
}

#[test]
fn each_kind_of_lying_batch_is_refused() {
    let mut good = Vec::new();
    let mut r = rec(0, 1, Some(b"key"), Some(b"value"));
    r.headers = stored(&[("h".into(), Some(Bytes::from_static(b"v")))]);
    encode_batch(&mut good, [r]);
    let body = body_of(&good).to_vec();

    // batchLength past the end, and below the header's own size.
    let mut long = good.clone();
    long[8..12].copy_from_slice(&1_000_000i32.to_be_bytes());
    assert!(matches!(
        decode(&Bytes::from(long)),
        Err(RecordError::Truncated { .. })
    ));
    let mut short = good.clone();
    short[8..12].copy_from_slice(&10i32.to_be_bytes());
    assert!(matches!(
        decode(&Bytes::from(short)),
        Err(RecordError::BadLength { .. })
    ));
    let mut negative = good.clone();
    negative[8..12].copy_from_slice(&(-5i32).to_be_bytes());
    assert!(matches!(
        decode(&Bytes::from(negative)),
        Err(RecordError::BadLength { .. })
    ));
    // A truncated batch header.
    assert!(matches!(
        decode(&Bytes::copy_from_slice(&good[..10])),
        Err(RecordError::Truncated { .. })
    ));
    // Magic and CRC.
    let mut magic = good.clone();
    magic[16] = 1;
    assert_eq!(
        decode(&Bytes::from(magic)),
        Err(RecordError::Magic { magic: 1 })
    );
    let mut flipped = good.clone();
    *flipped.last_mut().unwrap() ^= 1;
    assert!(matches!(
        decode(&Bytes::from(flipped)),
        Err(RecordError::Crc { .. })
    ));
    // A records count the bytes cannot hold (checked before reserving).
    assert!(matches!(
        decode(&batch_with(&body, i32::MAX, 0)),
        Err(RecordError::BadLength {
            what: "records count",
            ..
        })
    ));
    assert!(matches!(
        decode(&batch_with(&body, -1, 0)),
        Err(RecordError::BadLength {
            what: "records count",
            ..
        })
    ));
    // Fewer records than claimed, and more bytes than the records.
    assert!(matches!(
        decode(&batch_with(&[body.clone(), body.clone()].concat(), 1, 0)),
        Err(RecordError::TrailingBytes { .. })
    ));
    // A record length past the section.
    let mut lying = body.clone();
    lying[0] = 0x7e; // 63
    assert!(matches!(
        decode(&batch_with(&lying, 1, 0)),
        Err(RecordError::BadLength {
            what: "record length",
            ..
        })
    ));
    // A key length past its record: body = len, attrs, ts, off, keylen...
    let mut key = body.clone();
    key[4] = 0x7e;
    assert!(matches!(
        decode(&batch_with(&key, 1, 0)),
        Err(RecordError::Truncated { what: "key", .. })
    ));
    // A header count the record cannot hold: it follows key and value.
    let mut headers = body.clone();
    let at = 1 + 3 + 1 + 3 + 1 + 5;
    assert_eq!(headers[at], 0x02, "the header count's byte");
    headers[at] = 0xfe; // 127 headers
    assert!(matches!(
        decode(&batch_with(&headers, 1, 0)),
        Err(RecordError::BadLength {
            what: "headers count",
            ..
        })
    ));
    // A header value length below -1.
    let mut below = body.clone();
    below[at + 3] = 0x03; // value length -2
    assert!(matches!(
        decode(&batch_with(&below, 1, 0)),
        Err(RecordError::BadLength {
            what: "header value",
            value: -2
        })
    ));
    // A control batch is never a client's; a transaction's batch always
    // names its producer.
    assert_eq!(
        decode(&batch_with(&body, 1, ATTR_CONTROL | ATTR_TRANSACTIONAL)),
        Err(RecordError::Transactional)
    );
    assert_eq!(
        decode(&batch_with(&body, 1, ATTR_TRANSACTIONAL)),
        Err(RecordError::BadProducer {
            producer_id: -1,
            epoch: -1,
            base_sequence: -1
        })
    );
    // An unknown codec.
    assert_eq!(
        decode(&batch_with(&body, 1, 6)),
        Err(RecordError::Codec { codec: 6 })
    );
}

#[test]
fn a_decompression_bomb_stops_at_the_budget_and_spends_it() {
    let zeros = vec![0u8; 32 << 20];
    let packed = compress(compression::GZIP, &zeros);
    let data = batch_with(&packed, 1, i16::from(compression::GZIP));
    let mut budget = 1 << 20;
    assert_eq!(
        decode_batches(&data, &mut budget),
        Err(RecordError::Inflates { budget: 1 << 20 })
    );
    // Two honest batches share one budget: the second no longer fits.
    let mut one = Vec::new();
    let value = vec![7u8; 600];
    encode_batch(&mut one, [rec(0, 1, None, Some(&value))]);
    let packed = compress(compression::ZSTD, body_of(&one));
    let single = batch_with(&packed, 1, i16::from(compression::ZSTD));
    let mut budget = 1000;
    assert!(decode_batches(&single, &mut budget).is_ok());
    assert!(budget < 400);
    assert!(matches!(
        decode_batches(&single, &mut budget),
        Err(RecordError::Inflates { .. })
    ));
}

/// A batch built a record at a time from borrowed header entries (what a
/// fetch pushes from the store) is byte for byte the batch `encode_batch`
/// writes from the same records: offsets with gaps, nulls, duplicate
/// header names, a null header value, timestamps going back.
#[test]
fn a_batch_built_from_borrowed_headers_is_the_encoded_batch() {
    let mut a = rec(10, 5000, Some(b"k"), Some(b"v1"));
    a.headers = stored(&[
        ("h".into(), Some(Bytes::from_static(b"1"))),
        ("h".into(), None),
        ("x".into(), Some(Bytes::new())),
    ]);
    let b = rec(12, 4000, None, None);
    let mut c = rec(13, 9000, Some(b""), Some(&[7u8; 300]));
    c.headers = stored(&[("only".into(), Some(Bytes::from_static(b"z")))]);
    let mut expected = b"prefix".to_vec();
    encode_batch(&mut expected, [a.clone(), b.clone(), c.clone()]);
    let mut batch = BatchBuilder::new(b"prefix".to_vec());
    assert!(batch.is_empty());
    for r in [&a, &b, &c] {
        let entries: Vec<(&[u8], Option<&[u8]>)> = r
            .headers
            .iter()
            .map(|h| (h.name.as_bytes(), h.value.as_deref()))
            .collect();
        batch.push(
            r.offset,
            r.timestamp_ms,
            r.key,
            r.value,
            entries.into_iter(),
        );
    }
    assert_eq!(batch.len(), 3);
    assert_eq!(batch.finish(), expected);
    // No records: the buffer as it was.
    assert_eq!(BatchBuilder::new(b"as is".to_vec()).finish(), b"as is");
}

/// `count` tiny records (no key, an empty value: 7 bytes each), as one
/// record section.
fn tiny_records(count: usize) -> Vec<u8> {
    let mut body = Vec::with_capacity(count * 8);
    for i in 0..count {
        let mut record = vec![0u8]; // attributes
        record.push(0); // timestampDelta 0
                        // The offset delta, zigzag (i >= 0: twice i).
        let mut d = (i as u32) << 1;
        loop {
            let byte = (d & 0x7f) as u8;
            d >>= 7;
            if d == 0 {
                record.push(byte);
                break;
            }
            record.push(byte | 0x80);
        }
        record.extend_from_slice(&[1, 0, 0]); // key null, value empty, no headers
        body.push((record.len() as u8) << 1);
        body.extend_from_slice(&record);
    }
    body
}

/// A compressed batch is refused past one batch's inflated limit with
/// its own error (MESSAGE_TOO_LARGE), and past the request's records
/// left (RECORD_LIST_TOO_LARGE) before any record is handed over.
#[test]
fn a_batch_is_refused_past_its_inflated_limit_and_past_the_records_left() {
    let body = tiny_records(100_000);
    let packed = compress(compression::ZSTD, &body);
    assert!(packed.len() < body.len() / 10, "tiny records pack well");
    let data = batch_with(&packed, 100_000, i16::from(compression::ZSTD));
    assert!(any_compressed(&data));
    let mut out = Vec::new();
    let mut limits = DecodeLimits::new(1 << 30, 64 * 1024, usize::MAX);
    let err = decode_partition_into(&data, &mut limits, &mut out).unwrap_err();
    assert_eq!(err, RecordError::BatchTooLarge { limit: 64 * 1024 });
    assert_eq!(err.code(), ResponseErrorCode::MESSAGE_TOO_LARGE);

    let mut limits = DecodeLimits::new(1 << 30, 1 << 30, 99_999);
    let err = decode_partition_into(&data, &mut limits, &mut out).unwrap_err();
    assert_eq!(
        err,
        RecordError::TooManyRecords {
            count: 100_000,
            left: 99_999
        }
    );
    assert_eq!(err.code(), ResponseErrorCode::RECORD_LIST_TOO_LARGE);
    assert!(out.is_empty(), "nothing handed over before the count check");

    // Within every limit they decode, and spend the records left.
    let mut limits = DecodeLimits::new(1 << 30, 1 << 30, 250_000);
    decode_partition_into(&data, &mut limits, &mut out).unwrap();
    assert_eq!(out.len(), 100_000);
    assert_eq!(limits.records_left, 150_000);
    let plain = batch_with(&body[..8 * 10], 10, 0);
    assert!(!any_compressed(&plain));
}

/// A sink that refuses memory ends the decode with its error.
#[test]
fn a_sink_refusal_ends_the_decode() {
    struct Stingy(usize);
    impl RecordSink for Stingy {
        fn reserve(&mut self, records: usize) -> Result<(), RecordError> {
            if records > self.0 {
                return Err(RecordError::OverBudget { used: 1, limit: 1 });
            }
            Ok(())
        }
        fn push(&mut self, _: BatchRecord) -> Result<(), RecordError> {
            Ok(())
        }
    }
    let data = batch_with(&tiny_records(10), 10, 0);
    let mut limits = DecodeLimits::new(1 << 20, 1 << 20, 100);
    assert!(decode_partition_into(&data, &mut limits, &mut Stingy(10)).is_ok());
    let err = decode_partition_into(&data, &mut limits, &mut Stingy(9)).unwrap_err();
    assert_eq!(err.code(), ResponseErrorCode::REQUEST_TIMED_OUT);
}

/// One timestamp rule with HTTP's: a base timestamp plus delta that
/// overflows, or lands below 0 (i64::MIN), is INVALID_TIMESTAMP; -1 is
/// Kafka's NO_TIMESTAMP, stored as the append time.
#[test]
fn timestamps_follow_the_brokers_rule_and_never_wrap() {
    fn with_base(base: i64, delta: i64) -> Result<Vec<BatchRecord>, RecordError> {
        let mut record = vec![0u8]; // attributes
        push_varlong(&mut record, delta);
        record.extend_from_slice(&[0, 1, 2, b'v', 0]); // offsetDelta, null key, "v", no headers
        let mut section = Vec::new();
        push_varlong(&mut section, record.len() as i64);
        section.extend_from_slice(&record);
        let mut data = Vec::new();
        BatchHeader {
            base_offset: 0,
            attributes: 0,
            last_offset_delta: 0,
            base_timestamp: base,
            max_timestamp: base,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            count: 1,
        }
        .write(&mut data, &section);
        decode(&Bytes::from(data))
    }
    fn push_varlong(out: &mut Vec<u8>, v: i64) {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        loop {
            let byte = (z & 0x7f) as u8;
            z >>= 7;
            if z == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    assert_eq!(
        with_base(1_700_000_000_000, 5).unwrap()[0].timestamp_ms,
        Some(1_700_000_000_005)
    );
    let overflow = with_base(i64::MAX, 1 << 40).unwrap_err();
    assert_eq!(
        overflow,
        RecordError::TimestampOverflow {
            base: i64::MAX,
            delta: 1 << 40
        }
    );
    assert_eq!(overflow.code(), ResponseErrorCode::INVALID_TIMESTAMP);
    let min = with_base(i64::MIN, 0).unwrap_err();
    assert!(matches!(min, RecordError::Timestamp { .. }), "{min:?}");
    assert_eq!(min.code(), ResponseErrorCode::INVALID_TIMESTAMP);
    assert!(with_base(0, -2).is_err());
    assert_eq!(with_base(-1, 0).unwrap()[0].timestamp_ms, None);
    assert_eq!(with_base(0, 0).unwrap()[0].timestamp_ms, Some(0));
}

/// Kafka's error codes, as numbers (kafka-protocol's `ResponseError`).
#[allow(non_snake_case, non_upper_case_globals)]
mod ResponseErrorCode {
    pub const MESSAGE_TOO_LARGE: i16 = 10;
    pub const REQUEST_TIMED_OUT: i16 = 7;
    pub const RECORD_LIST_TOO_LARGE: i16 = 18;
    pub const INVALID_TIMESTAMP: i16 = 32;
}

/// A LogAppendTime topic's batches say so (attribute bit 3), and a record
/// of another append time starts a new batch: a client reads each record
/// at its batch's max timestamp. Kafka's own decoder reads them so.
#[test]
fn log_append_time_batches_hold_one_append_time_each() {
    use kafka_protocol::records::{RecordBatchDecoder, TimestampType};
    let records = [
        rec(0, 5000, Some(b"a"), Some(b"1")),
        rec(1, 5000, None, Some(b"2")),
        rec(2, 7000, Some(b"c"), Some(b"3")),
    ];
    let mut out = Vec::new();
    encode_batch_as(&mut out, records.clone(), true);
    let mut bytes = Bytes::from(out.clone());
    let decoded = RecordBatchDecoder::decode_all(&mut bytes).unwrap();
    assert_eq!(decoded.len(), 2, "a batch per append time");
    let seen: Vec<(i64, i64, TimestampType)> = decoded
        .iter()
        .flat_map(|set| set.records.iter())
        .map(|r| (r.offset, r.timestamp, r.timestamp_type))
        .collect();
    assert_eq!(
        seen,
        [
            (0, 5000, TimestampType::LogAppend),
            (1, 5000, TimestampType::LogAppend),
            (2, 7000, TimestampType::LogAppend),
        ]
    );
    // The same records of a CreateTime topic: one batch, as before.
    let mut plain = Vec::new();
    encode_batch(&mut plain, records);
    let mut bytes = Bytes::from(plain);
    let decoded = RecordBatchDecoder::decode_all(&mut bytes).unwrap();
    assert_eq!(decoded.len(), 1);
    assert!(decoded[0]
        .records
        .iter()
        .all(|r| r.timestamp_type == TimestampType::Creation));
}

/// A fetch answer compressed for a topic's `compression.type`: each
/// batch's records packed with the codec, its header's length,
/// attributes (the codec, LogAppendTime kept) and CRC rewritten; the
/// records read back the same, through every codec.
#[test]
fn compressed_answers_read_back_the_same_records() {
    let records: Vec<OutRecord<'_>> = (0..50)
        .map(|i| rec(i, 1000 + (i / 20) as i64, Some(b"key"), Some(&[7u8; 300])))
        .collect();
    let mut plain = Vec::new();
    encode_batch_as(&mut plain, records.clone(), true);
    let mut budget = usize::MAX;
    let expected = decode_batches(&Bytes::from(plain.clone()), &mut budget).unwrap();
    assert_eq!(expected.len(), 50);
    for codec in [
        compression::GZIP,
        compression::SNAPPY,
        compression::LZ4,
        compression::ZSTD,
    ] {
        for level in [None, Some(1)] {
            let packed = compress_batches(&plain, codec, level).unwrap();
            assert!(packed.len() < plain.len() / 4, "{codec}: {}", packed.len());
            let mut budget = usize::MAX;
            let mut bytes = Bytes::from(packed);
            assert_eq!(
                decode_batches(&bytes, &mut budget).unwrap(),
                expected,
                "{codec}"
            );
            // Each batch's attributes: the codec and LogAppendTime.
            let mut attributes = Vec::new();
            let mut at = 0;
            while at < bytes.len() {
                let length = i32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap());
                attributes.push(i16::from_be_bytes([bytes[at + 21], bytes[at + 22]]));
                at += 12 + length as usize;
            }
            let want = i16::from(codec) | ATTR_LOG_APPEND_TIME;
            assert_eq!(
                attributes, [want; 3],
                "LogAppendTime's three batches stay three"
            );
            bytes.clear();
        }
    }
    assert!(compress_batches(b"not a batch", compression::GZIP, None).is_err());
}

/// A transaction's records and markers go in batches of their own, with
/// the producer and the transactional and control attributes; the others
/// in batches with no producer. A control batch is never compressed.
#[test]
fn a_transactions_records_and_markers_get_batches_of_their_producer() {
    let mut b = BatchBuilder::new(Vec::new());
    let txn = |control| TxnBatch {
        producer_id: 7,
        epoch: 2,
        control,
    };
    let none = std::iter::empty();
    b.set_producer(None, -1);
    b.push(0, 1000, None, Some(b"plain"), none.clone());
    b.set_producer(Some(txn(false)), 5);
    b.push(1, 1000, None, Some(b"t0"), none.clone());
    b.set_producer(Some(txn(false)), 6);
    b.push(2, 1000, None, Some(b"t1"), none.clone());
    b.set_producer(Some(txn(true)), -1);
    b.push(
        3,
        1000,
        Some(&[0, 0, 0, 1]),
        Some(&[0, 0, 0, 0, 0, 0]),
        none.clone(),
    );
    b.set_producer(None, -1);
    b.push(4, 1000, None, Some(b"after"), none);
    let out = b.finish();
    // (base offset, count, attributes, producer id, epoch, base sequence)
    let mut got = Vec::new();
    let mut at = 0;
    while at < out.len() {
        let h = &out[at..];
        let length = i32::from_be_bytes(h[8..12].try_into().unwrap()) as usize;
        let crc = u32::from_be_bytes(h[17..21].try_into().unwrap());
        assert_eq!(crc, crc32c::crc32c(&h[21..12 + length]));
        got.push((
            i64::from_be_bytes(h[0..8].try_into().unwrap()),
            i32::from_be_bytes(h[57..61].try_into().unwrap()),
            i16::from_be_bytes([h[21], h[22]]),
            i64::from_be_bytes(h[43..51].try_into().unwrap()),
            i16::from_be_bytes([h[51], h[52]]),
            i32::from_be_bytes(h[53..57].try_into().unwrap()),
        ));
        at += 12 + length;
    }
    assert_eq!(
        got,
        [
            (0, 1, 0, -1, -1, -1),
            (1, 2, 0x10, 7, 2, 5),
            (3, 1, 0x30, 7, 2, -1),
            (4, 1, 0, -1, -1, -1),
        ]
    );
    // Compressed: every batch but the control one.
    let packed = compress_batches(&out, compression::GZIP, None).unwrap();
    let mut at = 0;
    let mut codecs = Vec::new();
    while at < packed.len() {
        let h = &packed[at..];
        let length = i32::from_be_bytes(h[8..12].try_into().unwrap()) as usize;
        codecs.push(i16::from_be_bytes([h[21], h[22]]) & 0x07);
        at += 12 + length;
    }
    assert_eq!(codecs, [1, 1, 0, 1]);
}
