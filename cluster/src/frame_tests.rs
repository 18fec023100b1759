//! The frames' bytes, bounds and refusals.

use super::*;

fn hello() -> Frame {
    Frame::Hello {
        epoch: 3,
        node_id: 2,
        log_end: 4096,
        cluster: "tl".into(),
    }
}

fn every_kind() -> Vec<Frame> {
    vec![
        hello(),
        Frame::Epochs {
            epoch: 3,
            log_end: 9000,
            entries: vec![
                EpochEntry { epoch: 1, start: 0 },
                EpochEntry {
                    epoch: 3,
                    start: 4096,
                },
            ],
        },
        Frame::Data {
            epoch: 3,
            position: 4096,
            bytes: Bytes::from_static(b"commitlog bytes"),
        },
        Frame::Confirm {
            epoch: 3,
            flushed: 8192,
        },
        Frame::Refused {
            epoch: 4,
            code: RefusalCode::StaleEpoch,
            reason: "epoch 3 is over".into(),
        },
        Frame::Refused {
            epoch: 4,
            code: RefusalCode::NotAuthorized,
            reason: "User:mallory may not CLUSTER_ACTION the cluster".into(),
        },
        Frame::Watermark {
            epoch: 3,
            high_watermark: 8000,
        },
    ]
}

/// A HELLO written out by hand.
#[test]
fn golden_bytes() {
    #[rustfmt::skip]
    let want: &[u8] = &[
        0x1c, 0x00, 0x00, 0x00, // body_len 28
        0x92, 0xf5, 0x8b, 0x1e, // crc
        0x01, 0x01, 0x00, 0x00, // kind HELLO, version 1, reserved
        0x03, 0, 0, 0, 0, 0, 0, 0, // epoch 3
        0x02, 0x00, 0x00, 0x00, // node_id 2
        0x00, 0x10, 0, 0, 0, 0, 0, 0, // log_end 4096
        0x02, 0x00, b't', b'l', // cluster "tl"
    ];
    assert_eq!(encode(&hello()).unwrap(), want);
    assert_eq!(decode(want).unwrap(), hello());
}

#[test]
fn every_kind_round_trips() {
    for f in every_kind() {
        let b = encode(&f).unwrap();
        assert_eq!(decode(&b).unwrap(), f);
    }
}

#[test]
fn every_flipped_byte_and_every_cut_is_refused() {
    for f in every_kind() {
        let b = encode(&f).unwrap();
        for i in 0..b.len() {
            let mut bad = b.clone();
            bad[i] ^= 0x10;
            assert!(decode(&bad).is_err(), "{f:?}: flip at {i}");
        }
        for cut in 0..b.len() {
            assert!(decode(&b[..cut]).is_err(), "{f:?}: cut at {cut}");
        }
        let mut longer = b.clone();
        longer.push(0);
        assert!(decode(&longer).is_err(), "{f:?}: a byte more");
    }
}

/// A body's fields re-framed with a good CRC, to reach the checks behind
/// it.
fn reframed(mut b: Vec<u8>) -> Result<Frame, FrameError> {
    let len = (b.len() - HEAD_LEN) as u32;
    b[..4].copy_from_slice(&len.to_le_bytes());
    let crc = crc32c::crc32c(&b[HEAD_LEN..]);
    b[4..8].copy_from_slice(&crc.to_le_bytes());
    decode(&b)
}

#[test]
fn bounds_and_rules_behind_the_crc() {
    // The head alone refuses a body past the bound: nothing is read.
    let mut head = [0u8; HEAD_LEN];
    head[..4].copy_from_slice(&((BODY_MAX + 1) as u32).to_le_bytes());
    assert_eq!(
        decode_head(&head),
        Err(FrameError::BodyLength { len: BODY_MAX + 1 })
    );
    head[..4].copy_from_slice(&3u32.to_le_bytes());
    assert!(decode_head(&head).is_err(), "shorter than any body");

    let b = encode(&hello()).unwrap();
    let mut kind = b.clone();
    kind[HEAD_LEN] = 9;
    assert_eq!(reframed(kind), Err(FrameError::Kind { kind: 9 }));
    let mut version = b.clone();
    version[HEAD_LEN + 1] = 2;
    assert_eq!(reframed(version), Err(FrameError::Version { version: 2 }));
    let mut reserved = b.clone();
    reserved[HEAD_LEN + 2] = 1;
    assert!(matches!(
        reframed(reserved),
        Err(FrameError::Reserved { .. })
    ));
    let mut utf8 = b.clone();
    let last = utf8.len() - 1;
    utf8[last] = 0xff;
    assert_eq!(
        reframed(utf8),
        Err(FrameError::NotUtf8 {
            what: "cluster name"
        })
    );
    // A name longer than its bound, though the bytes are there.
    let long = Frame::Hello {
        epoch: 3,
        node_id: 2,
        log_end: 4096,
        cluster: "x".repeat(NAME_MAX + 1),
    };
    assert!(matches!(encode(&long), Err(FrameError::TooLong { .. })));
    let mut b = encode(&hello()).unwrap();
    b.truncate(b.len() - 4);
    push_u16(&mut b, (NAME_MAX + 1) as u16);
    b.extend(std::iter::repeat_n(b'x', NAME_MAX + 1));
    assert!(matches!(reframed(b), Err(FrameError::TooLong { .. })));

    // An epoch count past the bytes that hold it, and epochs out of order.
    let epochs = |entries: Vec<EpochEntry>| Frame::Epochs {
        epoch: 1,
        log_end: 0,
        entries,
    };
    let mut b = encode(&epochs(vec![])).unwrap();
    let count_at = b.len() - 4;
    b[count_at..].copy_from_slice(&1000u32.to_le_bytes());
    assert!(matches!(reframed(b), Err(FrameError::Truncated(_))));
    let b = encode(&epochs(vec![
        EpochEntry { epoch: 2, start: 0 },
        EpochEntry { epoch: 2, start: 5 },
    ]))
    .unwrap();
    assert!(matches!(
        reframed(b),
        Err(FrameError::EpochOrder { entry: 1, .. })
    ));
    // Data past its bound is refused at encode.
    let big = Frame::Data {
        epoch: 1,
        position: 0,
        bytes: Bytes::from(vec![0u8; DATA_MAX + 1]),
    };
    assert!(matches!(encode(&big), Err(FrameError::TooLong { .. })));
    // An unknown refusal code.
    let mut b = encode(&every_kind()[4]).unwrap();
    b[HEAD_LEN + BODY_FIXED_LEN] = 77;
    assert_eq!(reframed(b), Err(FrameError::Code { code: 77 }));
}
