#![allow(clippy::unwrap_used)]

use super::format::{decode, decode_all, encode, Invalid, ENTRY_LEN};
use super::*;

#[test]
fn golden_bytes() {
    let e = AbortedTxn {
        producer_id: 0x0102_0304_0506_0708,
        first_offset: 10,
        last_offset: 20,
        last_stable_offset: 21,
        marker_position: 4096,
    };
    let b = encode(&e);
    let mut body = vec![1u8, 0, 0, 0];
    body.extend_from_slice(&0x0102_0304_0506_0708i64.to_le_bytes());
    body.extend_from_slice(&10u64.to_le_bytes());
    body.extend_from_slice(&20u64.to_le_bytes());
    body.extend_from_slice(&21u64.to_le_bytes());
    body.extend_from_slice(&4096u64.to_le_bytes());
    // The CRC computed independently of the encoder.
    let crc = crc32c::crc32c(&body);
    assert_eq!(&b[..4], &crc.to_le_bytes());
    assert_eq!(&b[4..], &body[..]);
    assert_eq!(decode(&b), Ok(e));

    for at in 0..ENTRY_LEN {
        let mut torn = b;
        torn[at] ^= 0x40;
        assert!(decode(&torn).is_err(), "a flipped byte {at} decoded");
    }
    assert_eq!(
        decode(&[0u8; ENTRY_LEN]),
        Err(Invalid::Crc {
            stored: 0,
            computed: crc32c::crc32c(&[0u8; ENTRY_LEN - 4])
        })
    );
    assert_eq!(decode(&b[..10]), Err(Invalid::Short { len: 10 }));
    let backwards = AbortedTxn {
        first_offset: 30,
        ..e
    };
    assert_eq!(
        decode(&encode(&backwards)),
        Err(Invalid::Range {
            first: 30,
            last: 20
        })
    );
    let negative = AbortedTxn {
        producer_id: -1,
        ..e
    };
    assert!(matches!(
        decode(&encode(&negative)),
        Err(Invalid::ProducerId { .. })
    ));

    // A file: whole entries, a torn tail dropped, damage refused where it is.
    let mut file: Vec<u8> = [
        e,
        AbortedTxn {
            first_offset: 25,
            last_offset: 30,
            ..e
        },
    ]
    .iter()
    .flat_map(encode)
    .collect();
    file.extend_from_slice(&[7u8; 13]);
    let (entries, whole) = decode_all(&file).unwrap();
    assert_eq!((entries.len(), whole), (2, 2 * ENTRY_LEN));
    file[ENTRY_LEN + 9] ^= 1;
    assert_eq!(decode_all(&file).unwrap_err().0, ENTRY_LEN);
}

#[test]
fn the_lso_waits_for_the_earliest_open_transaction() {
    let mut t = PartitionTxns::default();
    assert_eq!(t.last_stable_offset(0), 0);
    t.record(1, 0).unwrap();
    t.record(2, 1).unwrap();
    t.record(1, 2).unwrap();
    assert_eq!(t.last_stable_offset(3), 0);
    // Producer 1 commits: the LSO moves to producer 2's first record.
    assert_eq!(t.ending(1, 3), (Some(0), 1));
    assert_eq!(t.marker(1, 3, true, 300).unwrap(), None);
    assert_eq!(t.last_stable_offset(4), 1);
    // Producer 2 aborts: an entry, with the LSO after it.
    assert_eq!(t.ending(2, 4), (Some(1), 5));
    let aborted = t.marker(2, 4, false, 400).unwrap().unwrap();
    assert_eq!(
        aborted,
        AbortedTxn {
            producer_id: 2,
            first_offset: 1,
            last_offset: 4,
            last_stable_offset: 5,
            marker_position: 400,
        }
    );
    assert_eq!(t.last_stable_offset(5), 5);
    // A marker of a producer with nothing open here writes nothing.
    assert_eq!(t.ending(9, 5), (None, 6));
    assert_eq!(t.marker(9, 5, false, 500).unwrap(), None);
    assert_eq!(
        t.record(1, 5),
        Err(TxnIndexProblem::OutOfOrder { offset: 5, last: 5 })
    );
    assert_eq!(t.aborted_in(0, 10), [(2, 1)]);
    assert_eq!(t.aborted_in(5, 10), []);
    assert_eq!(t.aborted_in(0, 1), []);
    t.truncate_before(5);
    assert!(t.aborted().is_empty());
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Five producers write, commit and abort at random in one partition,
/// interleaved with plain records. At every step the LSO is the first
/// offset of the earliest open transaction (or the end), and every fetch
/// window names exactly the aborted transactions a full scan finds.
#[test]
fn model_lso_and_aborted_windows_match_a_full_scan() {
    for seed in 1..=30u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut t = PartitionTxns::default();
        let mut open: BTreeMap<i64, u64> = BTreeMap::new();
        let mut all_aborted: Vec<(i64, u64, u64)> = Vec::new();
        for offset in 0..600u64 {
            let producer = rng.below(5) as i64;
            match rng.below(6) {
                0 if open.contains_key(&producer) => {
                    let commit = rng.below(2) == 0;
                    let first = open.remove(&producer).unwrap();
                    let (first_seen, lso) = t.ending(producer, offset);
                    assert_eq!(first_seen, Some(first), "seed {seed}");
                    let entry = t.marker(producer, offset, commit, offset * 10).unwrap();
                    if let Some(e) = entry {
                        assert_eq!(e.last_stable_offset, lso, "seed {seed}");
                    }
                    assert_eq!(entry.is_some(), !commit, "seed {seed}");
                    if !commit {
                        all_aborted.push((producer, first, offset));
                    }
                }
                0 | 1 => {
                    // A record outside any transaction moves nothing.
                    t.take(offset).unwrap();
                }
                _ => {
                    t.record(producer, offset).unwrap();
                    open.entry(producer).or_insert(offset);
                }
            }
            let expected = open.values().min().copied().unwrap_or(offset + 1);
            assert_eq!(t.last_stable_offset(offset + 1), expected, "seed {seed}");
            let from = rng.below(offset + 1);
            let to = from + rng.below(200);
            // The search stops early (at the first entry whose LSO
            // reaches `to`); the answer is the full scan's all the same.
            let mut want: Vec<(i64, u64)> = all_aborted
                .iter()
                .filter(|(_, first, last)| *last >= from && *first < to)
                .map(|(p, first, _)| (*p, *first))
                .collect();
            let mut got = t.aborted_in(from, to);
            want.sort_unstable();
            got.sort_unstable();
            assert_eq!(got, want, "seed {seed}: [{from}, {to}) at {offset}");
        }
    }
}

#[test]
fn aborted_ranges_answer_by_producer_and_span() {
    // Producer 7 aborted [10, 14] and [30, 31]; producer 9 aborted [12, 20].
    let a = AbortedRanges::new([(7, 30, 31), (9, 12, 20), (7, 10, 14)]);
    assert!(!a.is_empty());
    for (producer, offset, aborted) in [
        (7, 9, false),
        (7, 10, true),
        (7, 14, true),
        (7, 15, false), // between its two aborted transactions
        (7, 29, false),
        (7, 30, true),
        (7, 31, true),
        (7, 32, false),
        (9, 11, false),
        (9, 16, true),
        (9, 21, false),
        (8, 12, false), // no abort of its own
    ] {
        assert_eq!(a.contains(producer, offset), aborted, "{producer}@{offset}");
    }
    assert!(AbortedRanges::new([]).is_empty());
    assert!(!AbortedRanges::default().contains(7, 10));
}

/// One partition holds at most `OPEN_PER_PARTITION_MAX` open
/// transactions: one more producer is refused (the writer answers
/// TooManyTransactions), a producer already open goes on, and once one
/// ends there is room again.
#[test]
fn a_partition_holds_a_bounded_number_of_open_transactions() {
    let mut t = PartitionTxns::default();
    let max = OPEN_PER_PARTITION_MAX as i64;
    for producer in 0..max {
        t.record(producer, producer as u64).unwrap();
    }
    let next = max as u64;
    assert_eq!(t.can_open(max), Err(TxnIndexProblem::TooManyOpen));
    assert_eq!(t.record(max, next), Err(TxnIndexProblem::TooManyOpen));
    assert!(t.can_open(0).is_ok(), "an open producer writes on");
    t.record(0, next).unwrap();
    t.marker(0, next + 1, true, 0).unwrap();
    assert!(t.can_open(max).is_ok(), "room again after an end");
    t.record(max, next + 2).unwrap();
}
