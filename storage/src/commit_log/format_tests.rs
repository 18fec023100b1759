//! Tests of the CommitLog entry format (`format.rs`): golden bytes of
//! versions 2 and 3 (with and without a producer block), round trips of
//! entries, records and end markers, the segment payload limit, and the
//! decoder's refusal of damaged or hostile input (every flipped byte, a
//! torn entry, a wrong position, an unknown version, lengths past their
//! bounds) with an error, never a panic.

use super::*;

const STORE_TS: i64 = 1_700_000_000_000;

#[test]
fn the_segment_payload_limit_fits_and_is_tight() {
    for segment in [4096u64, 65536, 1 << 20] {
        let payload = payload_max_in_segment(segment) as usize;
        // The worst split: key, value and one header share the payload.
        let header_value = 10;
        let headers = vec![Header {
            name: "h".into(),
            value: Some(Bytes::from(vec![0u8; header_value])),
        }];
        let key = 7;
        let value = payload - key - headers_block_len(&headers);
        let len = entry_header_len_with(TOPIC_LEN_MAX, true)
            + record_len_bound(Some(key), Some(value), &headers);
        assert!((len + END_MARKER_LEN) as u64 <= segment, "{segment}");
        assert_eq!(
            len + END_MARKER_LEN,
            segment as usize,
            "one more byte would not fit"
        );
    }
    // Large segments: the entry ceiling bounds it.
    assert_eq!(
        payload_max_in_segment(1 << 30) as usize,
        RECORD_LEN_MAX - entry_header_len_with(TOPIC_LEN_MAX, true) - RECORD_FRAMING_MAX
    );
}

fn sample_headers() -> Vec<Header> {
    vec![
        Header {
            name: "trace".into(),
            value: Some(Bytes::from_static(b"abc")),
        },
        Header {
            name: "trace".into(),
            value: Some(Bytes::new()),
        },
        Header {
            name: "".into(),
            value: Some(Bytes::from_static(b"\x00\xff")),
        },
    ]
}

fn entry_fields() -> EntryFields<'static> {
    EntryFields {
        base_queue_offset: 7,
        store_timestamp_ms: STORE_TS,
        topic: "orders",
        partition: 3,
        producer: None,
        marker: None,
    }
}

fn record<'a>(headers: &'a [Header]) -> RecordFields<'a> {
    RecordFields {
        producer_timestamp_ms: STORE_TS,
        key: Some(b"k1"),
        value: Some(b"hello"),
        headers,
    }
}

/// Encode an entry of `records` at physical offset 4096; returns the
/// bytes and each record's (position, length).
fn encode_entry(records: &[RecordFields<'_>]) -> (Vec<u8>, Vec<(usize, usize)>) {
    let mut buf = Vec::new();
    let mut b = EntryBuilder::begin(&mut buf, &entry_fields());
    let placed = records.iter().map(|r| b.push(&mut buf, r)).collect();
    b.finish(&mut buf, 4096);
    (buf, placed)
}

fn entry_view(buf: &[u8]) -> EntryView {
    match decode(buf, 4096, true) {
        Ok(Decoded::Entry(v)) => v,
        other => panic!("not an entry: {other:?}"),
    }
}

#[test]
fn entry_round_trip() {
    let headers = sample_headers();
    let mut tombstone = record(&[]);
    tombstone.value = None;
    tombstone.producer_timestamp_ms = STORE_TS + 5;
    let mut keyless = record(&[]);
    keyless.key = None;
    keyless.value = Some(b"");
    keyless.producer_timestamp_ms = i64::MIN;
    let records = [record(&headers), tombstone, keyless];
    let (buf, placed) = encode_entry(&records);
    let v = entry_view(&buf);
    assert_eq!(v.total_len, buf.len());
    assert_eq!(v.record_count, 3);
    assert_eq!(v.partition, 3);
    assert_eq!(&buf[v.topic.clone()], b"orders");
    assert_eq!(placed[0].0, v.first_record());
    for (i, (r, &(at, len))) in records.iter().zip(&placed).enumerate() {
        let got = decode_record(&buf, &v, at).unwrap();
        assert_eq!((got.at as usize, got.len as usize), (at, len));
        assert_eq!(got.queue_offset, 7 + i as u64);
        assert_eq!(got.physical_offset, 4096 + at as u64);
        assert_eq!(got.store_timestamp_ms, STORE_TS);
        assert_eq!(got.producer_timestamp_ms, r.producer_timestamp_ms);
        assert_eq!(got.key().map(|k| &buf[k]), r.key);
        assert_eq!(got.value().map(|k| &buf[k]), r.value);
        let block = Bytes::copy_from_slice(&buf[got.headers()]);
        assert_eq!(decode_headers(&block, got.header_count.into()), r.headers);
        assert_eq!(len, record_len(at, i as u64, STORE_TS, r));
        assert!(
            len <= record_len_bound(r.key.map(<[u8]>::len), r.value.map(<[u8]>::len), r.headers)
        );
    }
    // A 100-byte keyless value costs 7 bytes of its own, not 64.
    let mut plain = record(&[]);
    plain.key = None;
    plain.value = Some(&[b'x'; 100]);
    plain.producer_timestamp_ms = STORE_TS;
    assert_eq!(record_len(200, 5, STORE_TS, &plain), 107);
}

/// A version-2 entry (what every data dir before version 3 holds),
/// written out by hand: it still decodes, with no producer.
#[test]
fn golden_bytes_v2_is_still_read() {
    #[rustfmt::skip]
        let v2: &[u8] = &[
            0x59, 0x00, 0x00, 0x00, // total_len 89
            0xce, 0x41, 0xc8, 0xc7, // crc
            0x1e, 0x7d, 0x02, 0x00, // magic, version 2, flags
            0x00, 0x10, 0, 0, 0, 0, 0, 0, // physical_offset 4096
            0x07, 0, 0, 0, 0, 0, 0, 0, // base_queue_offset 7
            0x00, 0x68, 0xe5, 0xcf, 0x8b, 0x01, 0x00, 0x00, // store_timestamp
            0x03, 0x00, 0x00, 0x00, // partition 3
            0x02, 0x00, 0x00, 0x00, // record_count 2
            0x06, 0x00, b'o', b'r', b'd', b'e', b'r', b's', // topic
            0x34, 0x03, 0x00, 0x03, 0x02, 0x05, 0x01, 0x0e,
            b'k', b'1', b'h', b'e', b'l', b'l', b'o',
            0x05, 0x00, 0x03, 0x00, 0x00, 0x00, b't', b'r', b'a', b'c', b'e', b'a', b'b', b'c',
            0x51, 0x01, 0x01, 0x0a, 0x02, 0x00, b'k', b'1',
        ];
    let v = entry_view(v2);
    assert_eq!(
        (v.record_count, v.producer, v.first_record()),
        (2, None, 52)
    );
    let r0 = decode_record(v2, &v, 52).unwrap();
    assert_eq!(r0.value().map(|k| &v2[k]), Some(&b"hello"[..]));
    let r1 = decode_record(v2, &v, 81).unwrap();
    assert_eq!((r1.queue_offset, r1.value()), (8, None));
    // Version 2 had no entry flags: a set one is refused there.
    let mut flagged = v2.to_vec();
    flagged[OFF_FLAGS] = ENTRY_HAS_PRODUCER;
    let crc = crc32c::crc32c(&flagged[CRC_START..]);
    put_u32(&mut flagged, OFF_CRC, crc);
    assert_eq!(
        decode(&flagged, 4096, true),
        Err(Invalid::BadFlags(ENTRY_HAS_PRODUCER))
    );
    // Version 2 end markers are read too.
    #[rustfmt::skip]
        let marker: [u8; END_MARKER_LEN] = [
            0x64, 0x00, 0x00, 0x00, 0x8b, 0xe6, 0xce, 0x48,
            0xf5, 0xe0, 0x02, 0x00, 0x84, 0x03, 0, 0, 0, 0, 0, 0,
        ];
    let mut segment_end = marker.to_vec();
    segment_end.resize(100, 0);
    assert_eq!(
        decode(&segment_end, 900, true),
        Ok(Decoded::EndOfSegment { len: 100 })
    );
}

/// The bytes of one entry and one end marker, written out by hand: an
/// encoder and decoder changed together still fail here (a format
/// change needs a new version, see docs/formats.md).
#[test]
fn golden_bytes() {
    #[rustfmt::skip]
        let want: &[u8] = &[
            0x59, 0x00, 0x00, 0x00, // total_len 89
            0x46, 0x1a, 0xc5, 0xd2, // crc
            0x1e, 0x7d, 0x03, 0x00, // magic, version 3, flags: no producer
            0x00, 0x10, 0, 0, 0, 0, 0, 0, // physical_offset 4096
            0x07, 0, 0, 0, 0, 0, 0, 0, // base_queue_offset 7
            0x00, 0x68, 0xe5, 0xcf, 0x8b, 0x01, 0x00, 0x00, // store_timestamp
            0x03, 0x00, 0x00, 0x00, // partition 3
            0x02, 0x00, 0x00, 0x00, // record_count 2
            0x06, 0x00, b'o', b'r', b'd', b'e', b'r', b's', // topic
            // record 0: distance 52, key and value, delta 0, ts -2,
            // key 2, value 5, one header of 14 bytes
            0x34, 0x03, 0x00, 0x03, 0x02, 0x05, 0x01, 0x0e,
            b'k', b'1', b'h', b'e', b'l', b'l', b'o',
            0x05, 0x00, 0x03, 0x00, 0x00, 0x00, b't', b'r', b'a', b'c', b'e', b'a', b'b', b'c',
            // record 1: distance 81, a tombstone, delta 1, ts +5, key 2,
            // no headers
            0x51, 0x01, 0x01, 0x0a, 0x02, 0x00, b'k', b'1',
        ];
    let headers = [Header {
        name: "trace".into(),
        value: Some(Bytes::from_static(b"abc")),
    }];
    let mut first = record(&headers);
    first.producer_timestamp_ms = STORE_TS - 2;
    let tombstone = RecordFields {
        producer_timestamp_ms: STORE_TS + 5,
        key: Some(b"k1"),
        value: None,
        headers: &[],
    };
    let (buf, placed) = encode_entry(&[first, tombstone]);
    assert_eq!(buf, want);
    assert_eq!(placed, [(52, 29), (81, 8)]);
    let v = entry_view(want);
    assert_eq!(
        (v.physical_offset, v.base_queue_offset, v.store_timestamp_ms),
        (4096, 7, STORE_TS)
    );
    assert_eq!(
        (v.partition, v.record_count, &want[v.topic.clone()]),
        (3, 2, &b"orders"[..])
    );
    assert_eq!(v.producer, None);
    let r0 = decode_record(want, &v, 52).unwrap();
    assert_eq!(
        (r0.queue_offset, r0.producer_timestamp_ms),
        (7, STORE_TS - 2)
    );
    assert_eq!(r0.key().map(|k| &want[k]), Some(&b"k1"[..]));
    assert_eq!(r0.value().map(|k| &want[k]), Some(&b"hello"[..]));
    let block = Bytes::copy_from_slice(&want[r0.headers()]);
    assert_eq!(decode_headers(&block, r0.header_count.into()), headers);
    let r1 = decode_record(want, &v, 81).unwrap();
    assert_eq!(
        (r1.queue_offset, r1.producer_timestamp_ms),
        (8, STORE_TS + 5)
    );
    assert_eq!((r1.value(), r1.header_count), (None, 0));

    #[rustfmt::skip]
        let marker: [u8; END_MARKER_LEN] = [
            0x64, 0x00, 0x00, 0x00, // total_len 100: bytes left in the segment
            0x2e, 0x9d, 0x98, 0x83, // crc
            0xf5, 0xe0, 0x03, 0x00, // magic, version 3, flags
            0x84, 0x03, 0, 0, 0, 0, 0, 0, // physical_offset 900
        ];
    let mut got = [0u8; END_MARKER_LEN];
    encode_end_marker(&mut got, 900, 100);
    assert_eq!(got, marker);
    let mut segment_end = marker.to_vec();
    segment_end.resize(100, 0);
    assert_eq!(
        decode(&segment_end, 900, true),
        Ok(Decoded::EndOfSegment { len: 100 })
    );
}

/// A version-3 entry whose record has a null header value between two
/// others of the same name, written out by hand: the null is
/// `HEADER_VALUE_NULL` with no bytes after it, kept apart from an empty
/// value, and the duplicates stay in order.
#[test]
fn golden_bytes_with_a_null_header_value() {
    #[rustfmt::skip]
        let want: &[u8] = &[
            0x67, 0x00, 0x00, 0x00, // total_len 103
            0xcc, 0x27, 0x36, 0xc6, // crc
            0x1e, 0x7d, 0x03, 0x00, // magic, version 3, flags: no producer
            0x00, 0x10, 0, 0, 0, 0, 0, 0, // physical_offset 4096
            0x07, 0, 0, 0, 0, 0, 0, 0, // base_queue_offset 7
            0x00, 0x68, 0xe5, 0xcf, 0x8b, 0x01, 0x00, 0x00, // store_timestamp
            0x03, 0x00, 0x00, 0x00, // partition 3
            0x01, 0x00, 0x00, 0x00, // record_count 1
            0x06, 0x00, b'o', b'r', b'd', b'e', b'r', b's', // topic
            // record 0: distance 52, key and value, delta 0, ts 0, key 2,
            // value 5, three headers of 36 bytes
            0x34, 0x03, 0x00, 0x00, 0x02, 0x05, 0x03, 0x24,
            b'k', b'1', b'h', b'e', b'l', b'l', b'o',
            0x05, 0x00, 0x03, 0x00, 0x00, 0x00, b't', b'r', b'a', b'c', b'e', b'a', b'b', b'c',
            0x05, 0x00, 0xff, 0xff, 0xff, 0xff, b't', b'r', b'a', b'c', b'e', // null
            0x05, 0x00, 0x00, 0x00, 0x00, 0x00, b't', b'r', b'a', b'c', b'e', // empty
        ];
    let headers = [
        Header {
            name: "trace".into(),
            value: Some(Bytes::from_static(b"abc")),
        },
        Header {
            name: "trace".into(),
            value: None,
        },
        Header {
            name: "trace".into(),
            value: Some(Bytes::new()),
        },
    ];
    let (buf, placed) = encode_entry(&[record(&headers)]);
    assert_eq!(buf, want);
    assert_eq!(placed, [(52, 51)]);
    let v = entry_view(want);
    let r = decode_record(want, &v, 52).unwrap();
    assert_eq!(r.header_count, 3);
    let block = Bytes::copy_from_slice(&want[r.headers()]);
    assert_eq!(decode_headers(&block, 3), headers);

    // Version 2 never wrote the sentinel: the same bytes as a version-2
    // entry (CRC fixed up) are corrupt, with the full check and without.
    let mut v2 = want.to_vec();
    v2[OFF_VERSION] = VERSION_2;
    let crc = crc32c::crc32c(&v2[CRC_START..]);
    put_u32(&mut v2, OFF_CRC, crc);
    assert!(matches!(
        decode(&v2, 4096, true),
        Err(Invalid::BadHeaders(reason)) if reason.contains("null value")
    ));
    let Ok(Decoded::Entry(v2_view)) = decode(&v2, 4096, false) else {
        panic!("the header decodes without the record walk")
    };
    assert!(matches!(
        decode_record(&v2, &v2_view, 52),
        Err(Invalid::BadHeaders(_))
    ));
    // A null value has no bytes: one after it is refused.
    let mut trailing = block.to_vec();
    trailing.insert(14 + 11, b'x');
    assert!(validate_headers(&trailing, 3, true).is_err());
    assert!(validate_headers(&block, 3, true).is_ok());
}

/// A version-3 entry with a producer block, written out by hand.
#[test]
fn golden_bytes_with_a_producer() {
    #[rustfmt::skip]
        let want: &[u8] = &[
            0x4a, 0x00, 0x00, 0x00, // total_len 74
            0x5d, 0x1c, 0x8e, 0xef, // crc
            0x1e, 0x7d, 0x03, 0x01, // magic, version 3, flags ENTRY_HAS_PRODUCER
            0x00, 0x10, 0, 0, 0, 0, 0, 0, // physical_offset 4096
            0x07, 0, 0, 0, 0, 0, 0, 0, // base_queue_offset 7
            0x00, 0x68, 0xe5, 0xcf, 0x8b, 0x01, 0x00, 0x00, // store_timestamp
            0x03, 0x00, 0x00, 0x00, // partition 3
            0x01, 0x00, 0x00, 0x00, // record_count 1
            0x06, 0x00, b'o', b'r', b'd', b'e', b'r', b's', // topic
            0x05, 0x04, 0x03, 0x02, 0x01, 0x00, 0x00, 0x00, // producer_id 0x0102030405
            0x02, 0x00, // producer_epoch 2
            0x09, 0x00, 0x00, 0x00, // base_sequence 9
            // record 0: distance 66, a tombstone, delta 0, ts +5, key 2
            0x42, 0x01, 0x00, 0x0a, 0x02, 0x00, b'k', b'1',
        ];
    let producer = EntryProducer {
        producer_id: 0x01_0203_0405,
        epoch: 2,
        base_sequence: 9,
        continues: false,
        transactional: false,
    };
    let mut fields = entry_fields();
    fields.producer = Some(producer);
    let tombstone = RecordFields {
        producer_timestamp_ms: STORE_TS + 5,
        key: Some(b"k1"),
        value: None,
        headers: &[],
    };
    let mut buf = Vec::new();
    let mut b = EntryBuilder::begin(&mut buf, &fields);
    assert_eq!(b.push(&mut buf, &tombstone), (66, 8));
    b.finish(&mut buf, 4096);
    assert_eq!(buf, want);
    let v = entry_view(want);
    assert_eq!(v.producer, Some(producer));
    assert_eq!((v.first_record(), v.record_count), (66, 1));
    assert_eq!(&want[v.topic.clone()], b"orders");
    let r = decode_record(want, &v, 66).unwrap();
    assert_eq!((r.queue_offset, r.physical_offset), (7, 4096 + 66));
    assert_eq!(r.key().map(|k| &want[k]), Some(&b"k1"[..]));
    assert_eq!(r.value(), None);
    // A position inside the producer block is no record.
    assert!(decode_record(want, &v, 60).is_err());
}

#[test]
fn producer_blocks_are_checked() {
    let continued = EntryProducer {
        producer_id: 1,
        epoch: 0,
        base_sequence: 4,
        continues: true,
        transactional: false,
    };
    let mut fields = entry_fields();
    fields.producer = Some(continued);
    let mut buf = Vec::new();
    let mut b = EntryBuilder::begin(&mut buf, &fields);
    b.push(&mut buf, &record(&[]));
    b.finish(&mut buf, 4096);
    assert_eq!(
        buf[OFF_FLAGS],
        ENTRY_HAS_PRODUCER | ENTRY_PRODUCER_CONTINUES
    );
    assert_eq!(entry_view(&buf).producer, Some(continued));
    let resealed = |mut b: Vec<u8>| {
        let crc = crc32c::crc32c(&b[CRC_START..]);
        put_u32(&mut b, OFF_CRC, crc);
        b
    };
    // A continuation without a producer, an unknown flag.
    for flags in [ENTRY_PRODUCER_CONTINUES, 0x04] {
        let mut bad = buf.clone();
        bad[OFF_FLAGS] = flags;
        assert_eq!(
            decode(&resealed(bad), 4096, true),
            Err(Invalid::BadFlags(flags))
        );
    }
    // A negative producer id, epoch or sequence.
    let block = ENTRY_HEADER_LEN + "orders".len();
    for at in [
        block + 7,
        block + OFF_PRODUCER_EPOCH + 1,
        block + OFF_BASE_SEQUENCE + 3,
    ] {
        let mut bad = buf.clone();
        bad[at] = 0x80;
        assert!(matches!(
            decode(&resealed(bad), 4096, true),
            Err(Invalid::BadProducer { .. })
        ));
    }
    // Versions 1 and 5 are refused by name.
    for version in [1, 5] {
        let mut bad = buf.clone();
        bad[OFF_VERSION] = version;
        assert_eq!(
            decode(&resealed(bad), 4096, true),
            Err(Invalid::BadVersion(version))
        );
    }
    // Version 4 is a transaction's only.
    let mut bad = buf.clone();
    bad[OFF_VERSION] = VERSION_TXN;
    assert_eq!(
        decode(&resealed(bad), 4096, true),
        Err(Invalid::BadFlags(
            ENTRY_HAS_PRODUCER | ENTRY_PRODUCER_CONTINUES
        ))
    );
}

/// A transaction's records: version 4, the TRANSACTIONAL flag, the
/// producer block as version 3's.
#[test]
fn transactional_entry_golden_bytes() {
    let producer = EntryProducer {
        producer_id: 0x0102,
        epoch: 1,
        base_sequence: 0,
        continues: false,
        transactional: true,
    };
    let mut fields = entry_fields();
    fields.producer = Some(producer);
    let mut buf = Vec::new();
    let mut b = EntryBuilder::begin(&mut buf, &fields);
    b.push(&mut buf, &record(&[]));
    b.finish(&mut buf, 4096);
    assert_eq!(buf[OFF_VERSION], 4);
    assert_eq!(buf[OFF_FLAGS], 0b0101);
    let v = entry_view(&buf);
    assert_eq!(v.producer, Some(producer));
    assert_eq!((v.version, v.marker), (4, None));
    // Without its producer block, or as version 3, it is refused.
    let resealed = |mut b: Vec<u8>| {
        let crc = crc32c::crc32c(&b[CRC_START..]);
        put_u32(&mut b, OFF_CRC, crc);
        b
    };
    let mut bad = buf.clone();
    bad[OFF_VERSION] = VERSION;
    assert_eq!(
        decode(&resealed(bad), 4096, true),
        Err(Invalid::BadFlags(0b0101))
    );
    let mut bad = buf.clone();
    bad[OFF_FLAGS] = ENTRY_TRANSACTIONAL;
    assert_eq!(
        decode(&resealed(bad), 4096, true),
        Err(Invalid::BadFlags(ENTRY_TRANSACTIONAL))
    );
}

/// A marker: its header, producer block (sequence -1), marker block and
/// Kafka's control record, byte for byte (docs/formats.md).
#[test]
fn marker_entry_golden_bytes() {
    #[rustfmt::skip]
    let want: &[u8] = &[
        0x63, 0x00, 0x00, 0x00, // total_len 99
        0, 0, 0, 0, // crc, filled in below
        0x1e, 0x7d, // magic
        0x04, // version 4
        0x0d, // HAS_PRODUCER | TRANSACTIONAL | CONTROL
        0x00, 0x10, 0, 0, 0, 0, 0, 0, // physical_offset 4096
        0x07, 0, 0, 0, 0, 0, 0, 0, // base_queue_offset 7
        0x00, 0x68, 0xe5, 0xcf, 0x8b, 0x01, 0x00, 0x00, // store_timestamp
        0x03, 0x00, 0x00, 0x00, // partition 3
        0x01, 0x00, 0x00, 0x00, // record_count 1
        0x06, 0x00, b'o', b'r', b'd', b'e', b'r', b's', // topic
        0x02, 0x01, 0, 0, 0, 0, 0, 0, // producer_id 0x0102
        0x01, 0x00, // producer_epoch 1
        0xff, 0xff, 0xff, 0xff, // base_sequence -1
        0x04, 0, 0, 0, 0, 0, 0, 0, // txn_first_offset 4
        0x05, 0, 0, 0, 0, 0, 0, 0, // last_stable_offset 5
        // the control record: distance 82, key and value, delta 0, ts 0,
        // key 4, value 6, no headers
        0x52, 0x03, 0x00, 0x00, 0x04, 0x06, 0x00,
        0x00, 0x00, 0x00, 0x00, // key: version 0, ABORT
        0x00, 0x00, 0x00, 0x00, 0x00, 0x09, // value: version 0, epoch 9
    ];
    let mut want = want.to_vec();
    let crc = crc32c::crc32c(&want[CRC_START..]);
    put_u32(&mut want, OFF_CRC, crc);
    let marker = EntryMarker {
        commit: false,
        coordinator_epoch: 9,
        txn_first_offset: Some(4),
        last_stable_offset: 5,
    };
    let mut fields = entry_fields();
    fields.producer = Some(EntryProducer {
        producer_id: 0x0102,
        epoch: 1,
        base_sequence: MARKER_SEQUENCE,
        continues: false,
        transactional: true,
    });
    fields.marker = Some(marker);
    let mut buf = Vec::new();
    let mut b = EntryBuilder::begin(&mut buf, &fields);
    let key = control_key(false);
    let value = control_value(9);
    b.push(
        &mut buf,
        &RecordFields {
            producer_timestamp_ms: STORE_TS,
            key: Some(&key),
            value: Some(&value),
            headers: &[],
        },
    );
    b.finish(&mut buf, 4096);
    assert_eq!(buf, want);
    let v = entry_view(&want);
    assert_eq!(v.marker, Some(marker));
    assert!(v.is_control());
    assert_eq!(v.first_record(), 82);
    let r = decode_record(&want, &v, 82).unwrap();
    assert_eq!(r.queue_offset, 7);
    assert_eq!(control_key(true), [0, 0, 0, 1]);

    let resealed = |mut b: Vec<u8>| {
        let crc = crc32c::crc32c(&b[CRC_START..]);
        put_u32(&mut b, OFF_CRC, crc);
        b
    };
    // Every malformed marker is refused: a control record of another type
    // or version, a marker block naming a transaction after the marker or
    // an LSO past it, a sequence, a marker without TRANSACTIONAL.
    for (at, byte) in [
        (92, 2), // key type 2
        (90, 1), // key version 1
        (94, 1), // value version 1
        (66, 8), // txn_first_offset 8 > 7
        (74, 9), // last_stable_offset 9 > 8
        (65, 0), // base_sequence no longer -1
    ] {
        let mut bad = want.clone();
        bad[at] = byte;
        assert!(
            decode(&resealed(bad), 4096, true).is_err(),
            "byte {at} = {byte} accepted"
        );
    }
    let mut bad = want.clone();
    bad[OFF_FLAGS] = ENTRY_HAS_PRODUCER | ENTRY_CONTROL;
    assert_eq!(
        decode(&resealed(bad), 4096, true),
        Err(Invalid::BadFlags(ENTRY_HAS_PRODUCER | ENTRY_CONTROL))
    );
    // No transaction open here: u64::MAX.
    let mut none = want.clone();
    none[66..74].copy_from_slice(&u64::MAX.to_le_bytes());
    let v = entry_view(&resealed(none));
    assert_eq!(v.marker.unwrap().txn_first_offset, None);
}

#[test]
fn end_marker_round_trip() {
    let mut buf = vec![0u8; 100];
    let mut marker = [0u8; END_MARKER_LEN];
    encode_end_marker(&mut marker, 900, 100);
    buf[..END_MARKER_LEN].copy_from_slice(&marker);
    assert_eq!(
        decode(&buf, 900, true).unwrap(),
        Decoded::EndOfSegment { len: 100 }
    );
    assert!(matches!(
        decode(&buf, 901, true),
        Err(Invalid::OffsetMismatch { .. })
    ));
}

#[test]
fn zeros_are_empty() {
    assert_eq!(decode(&[0u8; 64], 0, true).unwrap(), Decoded::Empty);
    assert_eq!(decode(&[0u8; 2], 0, true).unwrap(), Decoded::Empty);
    assert_eq!(decode(&[], 0, true).unwrap(), Decoded::Empty);
}

#[test]
fn every_flipped_byte_is_detected() {
    let headers = sample_headers();
    let (buf, _) = encode_entry(&[record(&headers), record(&[])]);
    for i in 0..buf.len() {
        let mut bad = buf.clone();
        bad[i] ^= 0x40;
        match decode(&bad, 4096, true) {
            Err(_) => {}
            // A flipped length byte can make the entry look empty or
            // too long; both are refusals, never a wrong record.
            Ok(Decoded::Empty) => assert!(i < 4),
            Ok(other) => panic!("flip at byte {i} decoded as {other:?}"),
        }
    }
}

#[test]
fn torn_entry_is_truncated() {
    let (buf, _) = encode_entry(&[record(&[]), record(&[])]);
    for cut in 1..buf.len() {
        let r = decode(&buf[..cut], 4096, true);
        assert!(r.is_err(), "cut at {cut} gave {r:?}");
    }
}

#[test]
fn entry_at_wrong_position_is_refused() {
    let (buf, _) = encode_entry(&[record(&[])]);
    assert_eq!(
        decode(&buf, 8192, true),
        Err(Invalid::OffsetMismatch {
            stored: 4096,
            expected: 8192
        })
    );
}

#[test]
fn a_version_1_log_is_named_as_such() {
    let (mut buf, _) = encode_entry(&[record(&[])]);
    buf[OFF_VERSION] = 1;
    assert_eq!(decode(&buf, 4096, false), Err(Invalid::BadVersion(1)));
}

#[test]
fn only_record_starts_decode_as_records() {
    let headers = sample_headers();
    let (buf, placed) = encode_entry(&[record(&headers), record(&[]), record(&[])]);
    let v = entry_view(&buf);
    let starts: Vec<usize> = placed.iter().map(|p| p.0).collect();
    for at in 0..buf.len() + 2 {
        let r = decode_record(&buf, &v, at);
        if starts.contains(&at) {
            assert!(r.is_ok(), "record at {at}: {r:?}");
        } else {
            assert!(r.is_err(), "position {at} decoded as {r:?}");
        }
    }
}

#[test]
fn hostile_lengths_are_bounded() {
    // Claim a gigantic total length.
    let (mut buf, placed) = encode_entry(&[record(&[])]);
    buf[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        decode(&buf, 4096, false),
        Err(Invalid::BadLength(_))
    ));
    // More records than the bytes could hold.
    let (mut buf, _) = encode_entry(&[record(&[])]);
    buf[OFF_RECORD_COUNT..OFF_RECORD_COUNT + 4].copy_from_slice(&1000u32.to_le_bytes());
    assert!(matches!(
        decode(&buf, 4096, false),
        Err(Invalid::BadLength(_))
    ));
    // A key length that overflows the entry, with the CRC check off:
    // the record decode refuses it.
    let (mut buf, _) = encode_entry(&[record(&[])]);
    let v = entry_view(&buf);
    let key_len_at = placed[0].0 + 4;
    assert_eq!(buf[key_len_at], 2);
    buf[key_len_at] = 0x7f;
    assert!(matches!(
        decode_record(&buf, &v, placed[0].0),
        Err(Invalid::BadLength(_))
    ));
    // A header count larger than the block holds.
    let headers = sample_headers();
    let (buf, placed) = encode_entry(&[record(&headers)]);
    let v = entry_view(&buf);
    let mut bad = buf.clone();
    // distance, flags, delta, ts, key len, value len, then the count.
    let count_at = placed[0].0 + 6;
    assert_eq!(bad[count_at], 3);
    bad[count_at] = 4;
    assert!(matches!(
        decode_record(&bad, &v, placed[0].0),
        Err(Invalid::BadHeaders(_))
    ));
    // A bad topic name in bytes of unknown origin (even with a valid
    // CRC) never reaches the caller.
    let (mut buf, _) = encode_entry(&[record(&[])]);
    buf[ENTRY_HEADER_LEN] = b'/';
    let crc = crc32c::crc32c(&buf[CRC_START..]);
    put_u32(&mut buf, OFF_CRC, crc);
    assert_eq!(decode(&buf, 4096, true), Err(Invalid::BadTopic));
    // Trusted reads (bytes this process wrote or recovery checked) skip
    // the name check; a name that is not UTF-8 still never reaches a
    // caller as a `str`.
    let (mut buf, placed) = encode_entry(&[record(&[])]);
    buf[ENTRY_HEADER_LEN] = 0xff;
    let Ok(Decoded::Entry(view)) = decode(&buf, 4096, false) else {
        panic!("a trusted read decodes the entry");
    };
    let rec = decode_record(&buf, &view, placed[0].0).unwrap();
    let record = super::super::StoredRecord::from_bytes(Bytes::from(buf), rec);
    assert_eq!(record.topic(), "");
}
