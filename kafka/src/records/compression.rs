//! Record-batch codecs: every decompressor writes at most `cap` bytes.
//!
//! Invariant: no output buffer grows past `cap` (the smaller of the
//! request's inflation budget left and one batch's limit,
//! `records::DecodeLimits`); a batch that would inflate further is refused
//! with [`RecordError::Inflates`] after at most `cap + 1` bytes were
//! produced (the caller names which limit it was). The decode runs where
//! the caller put it: Produce moves a partition with a compressed batch
//! to the blocking pool.
//! Snappy's raw format states its length up front, which is checked
//! before anything is allocated.

use std::io::Read;

use crate::error::RecordError;

pub const NONE: u8 = 0;
pub const GZIP: u8 = 1;
pub const SNAPPY: u8 = 2;
pub const LZ4: u8 = 3;
pub const ZSTD: u8 = 4;

/// snappy-java's stream header (the Java client's framing; librdkafka
/// reads and writes it too): magic, then two version ints, then blocks of
/// a 4-byte big-endian length and a raw snappy block.
const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_LEN: usize = 16;

pub fn codec_name(codec: u8) -> &'static str {
    match codec {
        GZIP => "gzip",
        SNAPPY => "snappy",
        LZ4 => "lz4",
        ZSTD => "zstd",
        _ => "none",
    }
}

/// The records section of a compressed batch, inflated, at most `cap`
/// bytes.
pub fn decompress(codec: u8, input: &[u8], cap: usize) -> Result<Vec<u8>, RecordError> {
    match codec {
        GZIP => read_capped(codec, flate2::read::GzDecoder::new(input), cap),
        LZ4 => read_capped(codec, lz4_flex::frame::FrameDecoder::new(input), cap),
        ZSTD => {
            let decoder = zstd::stream::read::Decoder::new(input).map_err(|e| failed(codec, e))?;
            read_capped(codec, decoder, cap)
        }
        SNAPPY => snappy(input, cap),
        other => Err(RecordError::Codec { codec: other }),
    }
}

/// `data` compressed with `codec` at `level` (`None`: the codec's
/// default), as Kafka's producers write each codec: gzip and zstd
/// streams, an LZ4 frame (lz4_flex has one speed: a level changes
/// nothing), snappy in snappy-java's stream framing (which the Java
/// consumer and librdkafka read) in 32 KiB blocks.
pub fn compress(codec: u8, data: &[u8], level: Option<i32>) -> std::io::Result<Vec<u8>> {
    use std::io::Write;
    match codec {
        GZIP => {
            let level = level
                .and_then(|l| u32::try_from(l).ok())
                .map_or(flate2::Compression::default(), flate2::Compression::new);
            let mut e = flate2::write::GzEncoder::new(Vec::with_capacity(data.len() / 2), level);
            e.write_all(data)?;
            e.finish()
        }
        LZ4 => {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::with_capacity(data.len() / 2));
            e.write_all(data)?;
            e.finish().map_err(std::io::Error::other)
        }
        ZSTD => zstd::stream::encode_all(data, level.unwrap_or(3)),
        SNAPPY => {
            let mut out = XERIAL_MAGIC.to_vec();
            // snappy-java's version and oldest compatible version.
            out.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
            let mut encoder = snap::raw::Encoder::new();
            for chunk in data.chunks(XERIAL_BLOCK_BYTES) {
                let block = encoder.compress_vec(chunk).map_err(std::io::Error::other)?;
                out.extend_from_slice(&(block.len() as u32).to_be_bytes());
                out.extend_from_slice(&block);
            }
            Ok(out)
        }
        _ => Ok(data.to_vec()),
    }
}

/// snappy-java's default block size.
const XERIAL_BLOCK_BYTES: usize = 32 * 1024;

fn failed(codec: u8, e: impl std::fmt::Display) -> RecordError {
    RecordError::Decompress {
        codec: codec_name(codec),
        reason: e.to_string(),
    }
}

/// Reads `reader` to its end into a buffer that never grows past `cap + 1`
/// bytes (`take`), so a bomb costs at most the budget.
fn read_capped(codec: u8, reader: impl Read, cap: usize) -> Result<Vec<u8>, RecordError> {
    let mut out = Vec::new();
    let limit = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
    reader
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|e| failed(codec, e))?;
    if out.len() > cap {
        return Err(RecordError::Inflates { budget: cap });
    }
    Ok(out)
}

fn snappy(input: &[u8], cap: usize) -> Result<Vec<u8>, RecordError> {
    if !input.starts_with(XERIAL_MAGIC) {
        let mut out = Vec::new();
        raw_snappy_block(input, cap, &mut out)?;
        return Ok(out);
    }
    let mut rest = input
        .get(XERIAL_HEADER_LEN..)
        .ok_or(RecordError::Truncated {
            what: "snappy stream header",
            needed: XERIAL_HEADER_LEN,
            left: input.len(),
        })?;
    let mut out = Vec::new();
    while !rest.is_empty() {
        let Some((len, tail)) = rest.split_first_chunk::<4>() else {
            return Err(RecordError::Truncated {
                what: "snappy block length",
                needed: 4,
                left: rest.len(),
            });
        };
        let len = u32::from_be_bytes(*len) as usize;
        let block = tail.get(..len).ok_or(RecordError::Truncated {
            what: "snappy block",
            needed: len,
            left: tail.len(),
        })?;
        raw_snappy_block(block, cap - out.len(), &mut out)?;
        rest = &tail[len..];
    }
    Ok(out)
}

/// Appends one raw snappy block to `out`, its stated length checked
/// against `cap` before anything is allocated.
fn raw_snappy_block(block: &[u8], cap: usize, out: &mut Vec<u8>) -> Result<(), RecordError> {
    let len = snap::raw::decompress_len(block).map_err(|e| failed(SNAPPY, e))?;
    if len > cap {
        return Err(RecordError::Inflates { budget: cap });
    }
    let start = out.len();
    out.resize(start + len, 0);
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|e| failed(SNAPPY, e))?;
    out.truncate(start + written);
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use std::io::Write;

    use super::*;

    pub fn compress(codec: u8, data: &[u8]) -> Vec<u8> {
        match codec {
            GZIP => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(data).unwrap();
                e.finish().unwrap()
            }
            LZ4 => {
                let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
                e.write_all(data).unwrap();
                e.finish().unwrap()
            }
            ZSTD => zstd::stream::encode_all(data, 1).unwrap(),
            SNAPPY => snap::raw::Encoder::new().compress_vec(data).unwrap(),
            _ => data.to_vec(),
        }
    }

    fn xerial(data: &[u8]) -> Vec<u8> {
        let mut out = XERIAL_MAGIC.to_vec();
        out.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
        for chunk in data.chunks(7) {
            let block = snap::raw::Encoder::new().compress_vec(chunk).unwrap();
            out.extend_from_slice(&(block.len() as u32).to_be_bytes());
            out.extend_from_slice(&block);
        }
        out
    }

    #[test]
    fn every_codec_round_trips() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        for codec in [GZIP, SNAPPY, LZ4, ZSTD] {
            let packed = compress(codec, &data);
            assert_eq!(
                decompress(codec, &packed, data.len()).unwrap(),
                data,
                "{codec}"
            );
        }
        assert_eq!(
            decompress(SNAPPY, &xerial(&data), data.len()).unwrap(),
            data
        );
    }

    #[test]
    fn a_bomb_stops_at_the_budget_for_every_codec() {
        // 64 MiB of zeros packs into a few KiB; the budget is 1 MiB.
        let zeros = vec![0u8; 64 << 20];
        for codec in [GZIP, SNAPPY, LZ4, ZSTD] {
            let packed = compress(codec, &zeros);
            assert!(packed.len() < 4 << 20, "{codec}: {}", packed.len());
            assert_eq!(
                decompress(codec, &packed, 1 << 20),
                Err(RecordError::Inflates { budget: 1 << 20 }),
                "{codec}"
            );
        }
        assert!(matches!(
            decompress(SNAPPY, &xerial(&zeros[..4096]), 1000),
            Err(RecordError::Inflates { .. })
        ));
    }

    #[test]
    fn garbage_is_a_decompress_error_and_unknown_codecs_are_refused() {
        for codec in [GZIP, SNAPPY, LZ4, ZSTD] {
            assert!(matches!(
                decompress(codec, b"definitely not compressed", 1 << 20),
                Err(RecordError::Decompress { .. })
            ));
        }
        assert_eq!(decompress(5, b"", 10), Err(RecordError::Codec { codec: 5 }));
    }
}
