//! The epoch file: its bytes, its rules, its durability, and
//! [`common_end`] against a brute-force model of failovers.

use super::*;
use crate::test_rng::SplitMix64;

fn e(epoch: u64, start: u64) -> EpochEntry {
    EpochEntry { epoch, start }
}

/// Two entries written out by hand (docs/formats.md).
#[test]
fn golden_bytes() {
    #[rustfmt::skip]
    let want: &[u8] = &[
        0x54, 0x45, 0x50, 0x4f, // magic "TEPO"
        0x01, 0x00, 0x00, 0x00, // version 1, reserved
        0x02, 0x00, 0x00, 0x00, // count 2
        0x01, 0, 0, 0, 0, 0, 0, 0, // epoch 1
        0x00, 0, 0, 0, 0, 0, 0, 0, // start 0
        0x03, 0, 0, 0, 0, 0, 0, 0, // epoch 3
        0x00, 0x10, 0, 0, 0, 0, 0, 0, // start 4096
        0x5a, 0xbc, 0xf1, 0x5b, // crc
    ];
    let entries = [e(1, 0), e(3, 4096)];
    assert_eq!(encode(&entries), want);
    assert_eq!(decode(want).unwrap(), entries);
    assert_eq!(decode(&encode(&[])).unwrap(), []);
}

#[test]
fn damage_and_bad_order_are_refused() {
    let good = encode(&[e(1, 0), e(3, 4096)]);
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 0x04;
        assert!(decode(&bad).is_err(), "flip at {i}");
    }
    for cut in 0..good.len() {
        assert!(decode(&good[..cut]).is_err(), "cut at {cut}");
    }
    // Well framed, badly ordered: an epoch not above the one before, a
    // start below the one before.
    assert!(matches!(
        decode(&encode(&[e(3, 0), e(3, 10)])),
        Err(CorruptionKind::BadTopicEntry { entry: 1, .. })
    ));
    assert!(matches!(
        decode(&encode(&[e(1, 10), e(2, 5)])),
        Err(CorruptionKind::BadTopicEntry { entry: 1, .. })
    ));
    // A count past the bound, CRC fixed up.
    let mut many = encode(&[]);
    many[8..12].copy_from_slice(&(EPOCHS_MAX + 1).to_le_bytes());
    let at = many.len() - 4;
    let crc = crc32c::crc32c(&many[..at]);
    many[at..].copy_from_slice(&crc.to_le_bytes());
    assert!(matches!(
        decode(&many),
        Err(CorruptionKind::TooManyEntries { .. })
    ));
}

#[test]
fn begin_truncate_and_reload() {
    let dir = tempfile::tempdir().unwrap();
    let mut epochs = Epochs::load(dir.path()).unwrap();
    assert_eq!(epochs.last(), None);
    epochs.begin(1, 0).unwrap();
    epochs.begin(2, 100).unwrap();
    epochs.begin(4, 100).unwrap(); // epoch 2 wrote nothing
    epochs.begin(5, 250).unwrap();
    // Refused: an epoch not above the last, a start below it.
    assert!(epochs.begin(5, 300).is_err());
    assert!(epochs.begin(6, 200).is_err());
    let want = [e(1, 0), e(2, 100), e(4, 100), e(5, 250)];
    assert_eq!(epochs.entries(), want);
    assert_eq!(Epochs::load(dir.path()).unwrap().entries(), want);

    // Kafka's OffsetsForLeaderEpoch over a log ending at 400.
    assert_eq!(epochs.end_for(0, 400), None);
    assert_eq!(epochs.end_for(1, 400), Some((1, 100)));
    assert_eq!(epochs.end_for(2, 400), Some((2, 100)));
    assert_eq!(
        epochs.end_for(3, 400),
        Some((2, 100)),
        "the largest not above"
    );
    assert_eq!(epochs.end_for(4, 400), Some((4, 250)));
    assert_eq!(epochs.end_for(9, 400), Some((5, 400)));

    // Cut at 100: epochs 2 and 4 began there and wrote nothing left.
    epochs.truncate_to(100).unwrap();
    assert_eq!(epochs.entries(), [e(1, 0)]);
    assert_eq!(Epochs::load(dir.path()).unwrap().entries(), [e(1, 0)]);
    epochs.truncate_to(500).unwrap();
    assert_eq!(epochs.entries(), [e(1, 0)], "nothing past the end");
    // A damaged file is refused at open, by name.
    std::fs::write(dir.path().join(FILE_NAME), b"not an epoch file").unwrap();
    match Epochs::load(dir.path()) {
        Err(StoreError::Corruption { file, .. }) => assert!(file.ends_with(FILE_NAME)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn common_end_by_hand() {
    // A master of epochs 1 and 3; a node that was master of epoch 2 and
    // wrote 100..180 nobody copied.
    let master = [e(1, 0), e(3, 100)];
    let deposed = [e(1, 0), e(2, 100)];
    assert_eq!(common_end(&master, 500, &deposed, 180), 100);
    // A replica that copied the master to 300 of its 500.
    assert_eq!(common_end(&master, 500, &master, 300), 300);
    // A node with its own history from before it joined shares nothing.
    assert_eq!(common_end(&master, 500, &[], 700), 0);
    assert_eq!(common_end(&[e(1, 50)], 500, &[e(1, 50)], 400), 0);
    // An epoch that wrote nothing changes nothing.
    assert_eq!(
        common_end(
            &[e(1, 0), e(2, 80), e(3, 80)],
            200,
            &[e(1, 0), e(3, 80)],
            200
        ),
        200
    );
}

/// The offset→epoch labels of a log, one per byte-offset unit.
fn labels(entries: &[EpochEntry], end: u64) -> Vec<Option<u64>> {
    (0..end).map(|o| epoch_at(entries, o)).collect()
}

/// Seeded failovers: a run of masters, each writing a stretch some
/// replicas copy part of; a deposed master keeps what it wrote past what
/// was copied. Two nodes' files and ends against the brute-force first
/// offset where their labels differ.
#[test]
fn common_end_matches_a_brute_force_model() {
    let mut rng = SplitMix64(38);
    for round in 0..2_000 {
        let nodes = 3;
        // Each node's log: its epoch entries and its end (in units).
        let mut logs: Vec<(Vec<EpochEntry>, u64)> = vec![(Vec::new(), 0); nodes];
        // Sometimes a node starts with a history of its own.
        for log in logs.iter_mut() {
            if rng.below(4) == 0 {
                log.1 = rng.below(5);
            }
        }
        let mut epoch = 0;
        for _ in 0..1 + rng.below(6) {
            epoch += 1 + rng.below(2);
            let master = rng.below(nodes as u64) as usize;
            // The new master begins at its own end and writes a stretch.
            let start = logs[master].1;
            logs[master].0.push(e(epoch, start));
            logs[master].1 = start + rng.below(6);
            // Each other node copies some prefix of the master's log: it
            // cuts to the common end first, as a returning node does.
            for n in 0..nodes {
                if n == master || rng.below(3) == 0 {
                    continue;
                }
                let (m_entries, m_end) = logs[master].clone();
                let (n_entries, n_end) = &logs[n];
                let keep = common_end(&m_entries, m_end, n_entries, *n_end);
                let upto = keep + rng.below(m_end - keep + 1);
                let copied: Vec<EpochEntry> = m_entries
                    .iter()
                    .copied()
                    .filter(|x| x.start < upto || (x.start == upto && upto == m_end))
                    .collect();
                logs[n] = (copied, upto);
            }
        }
        for a in 0..nodes {
            for b in 0..nodes {
                let (ea, na) = &logs[a];
                let (eb, nb) = &logs[b];
                let la = labels(ea, *na);
                let lb = labels(eb, *nb);
                let brute = la
                    .iter()
                    .zip(&lb)
                    .position(|(x, y)| x.is_none() || x != y)
                    .map_or(la.len().min(lb.len()) as u64, |p| p as u64);
                assert_eq!(
                    common_end(ea, *na, eb, *nb),
                    brute,
                    "round {round}: {ea:?} to {na} against {eb:?} to {nb}"
                );
            }
        }
    }
}
