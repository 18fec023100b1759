//! The `cleaner-offset-checkpoint` file: for each compact topic-partition,
//! the queue offset up to which the LogCleaner has cleaned (the start of the
//! next dirty range). Kafka's text format, so operators can read it:
//!
//! ```text
//! 0                 version (CHECKPOINT_VERSION)
//! 2                 number of entries
//! orders 0 1200     topic, partition, offset: single spaces, decimal
//! orders 1 877
//! ```
//!
//! Invariants:
//! - Every line ends with `\n`; numbers are canonical decimal (no sign, no
//!   leading zeros); topic names match `[a-zA-Z0-9._-]{1,249}` and are not
//!   `.` or `..` (they become directory names elsewhere).
//! - Entries are written sorted by (topic, partition), so the same state
//!   always gives the same bytes.
//! - The reader accepts exactly what the writer produces and calls anything
//!   else corruption, with the line: the file is replaced atomically
//!   (temp → fsync → rename → fsync dir), so a torn or half-written file can
//!   only come from outside damage, and guessing at it could make the cleaner
//!   skip records that were never cleaned.
//! - The cleaner starts from a corrupt file as from an empty one
//!   ([`CleanerCheckpoint::load_or_empty`], as Kafka does): every log is
//!   then dirty from its start, and a re-clean is always safe (cleaning
//!   only removes what a newer record or an expired tombstone makes
//!   redundant). Dropping some entries and keeping others would be the
//!   guess the previous rule forbids; dropping all of them is not a guess.
//! - No file means nothing was cleaned yet. A leftover
//!   `cleaner-offset-checkpoint.tmp` (a crash before the rename) is never
//!   read; the next store overwrites it.
//! - Sizes are bounded before anything is read into memory: at most
//!   [`CHECKPOINT_ENTRIES_MAX`] entries and [`CHECKPOINT_FILE_BYTES_MAX`]
//!   bytes, and the writer refuses to produce more than the reader accepts.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};

use tidelog_storage::fs_util::write_atomic;

use crate::error::{CleanerError, CorruptionKind, Location, Result};

/// Name of the file in the data directory.
pub const CHECKPOINT_FILE_NAME: &str = "cleaner-offset-checkpoint";

/// The only format version, as Kafka's `OffsetCheckpointFile`.
pub const CHECKPOINT_VERSION: u32 = 0;

/// Most entries a checkpoint may hold: one per compact topic-partition on
/// this node, far above what a single node serves.
pub const CHECKPOINT_ENTRIES_MAX: usize = 100_000;

/// Longest topic name, as in Kafka.
pub const TOPIC_NAME_BYTES_MAX: usize = tidelog_storage::types::TOPIC_NAME_MAX;

/// Longest entry line: topic, space, u32, space, u64, newline.
const ENTRY_LINE_BYTES_MAX: usize = TOPIC_NAME_BYTES_MAX + 1 + 10 + 1 + 20 + 1;

/// Room for the version and count lines, generously.
const HEADER_BYTES_MAX: usize = 32;

/// Largest file the reader will load into memory (about 28 MB).
pub const CHECKPOINT_FILE_BYTES_MAX: usize =
    HEADER_BYTES_MAX + CHECKPOINT_ENTRIES_MAX * ENTRY_LINE_BYTES_MAX;

const _: () = assert!(ENTRY_LINE_BYTES_MAX == 282);

/// Longest piece of a bad line quoted in an error message.
const EXCERPT_CHARS_MAX: usize = 80;

/// Cleaned-up-to offsets of every compact topic-partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanerCheckpoint {
    entries: BTreeMap<(String, u32), u64>,
}

impl CleanerCheckpoint {
    /// An empty checkpoint: nothing cleaned yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Path of the checkpoint file inside `dir`.
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(CHECKPOINT_FILE_NAME)
    }

    /// Read `dir/cleaner-offset-checkpoint`. A missing file is an empty
    /// checkpoint; any other failure to read it, or any deviation from the
    /// format, is an error (never a silently emptier map).
    pub fn load(dir: &Path) -> Result<Self> {
        let path = Self::path(dir);
        let io_error = |source| CleanerError::Io {
            path: path.clone(),
            source,
        };
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(err) if err.kind() == ErrorKind::NotFound => {
                tracing::debug!(path = %path.display(), "no cleaner checkpoint yet");
                return Ok(Self::new());
            }
            Err(err) => return Err(io_error(err)),
        };
        let len = file.metadata().map_err(io_error)?.len();
        if len > CHECKPOINT_FILE_BYTES_MAX as u64 {
            return Err(too_large(&path, len));
        }
        // `take` keeps the bound even if the file grows after the check.
        let mut bytes = Vec::with_capacity(len as usize);
        file.take(CHECKPOINT_FILE_BYTES_MAX as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(io_error)?;
        if bytes.len() > CHECKPOINT_FILE_BYTES_MAX {
            return Err(too_large(&path, bytes.len() as u64));
        }
        Self::decode(&path, &bytes)
    }

    /// As [`CleanerCheckpoint::load`], but a file that does not parse is
    /// logged at warn and read as empty (see the module doc for why that is
    /// safe). A file that cannot be read at all is still an error: the disk
    /// under it needs an operator.
    pub fn load_or_empty(dir: &Path) -> Result<Self> {
        match Self::load(dir) {
            Err(CleanerError::Corruption { path, at, kind }) => {
                tracing::warn!(
                    path = %path.display(),
                    at = %at,
                    reason = %kind,
                    "corrupt cleaner checkpoint; starting from an empty one (every compacted log is cleaned again from its start)"
                );
                Ok(Self::new())
            }
            other => other,
        }
    }

    /// Replace `dir/cleaner-offset-checkpoint` atomically and durably.
    pub fn store(&self, dir: &Path) -> Result<()> {
        if self.entries.len() > CHECKPOINT_ENTRIES_MAX {
            return Err(CleanerError::CheckpointTooLarge {
                entries: self.entries.len(),
                max: CHECKPOINT_ENTRIES_MAX,
            });
        }
        let path = Self::path(dir);
        write_atomic(&path, self.encode().as_bytes())
            .map_err(|source| CleanerError::Store { path, source })
    }

    /// The cleaned-up-to offset of a topic-partition.
    pub fn get(&self, topic: &str, partition: u32) -> Option<u64> {
        self.entries.get(&(topic.to_owned(), partition)).copied()
    }

    /// Set the cleaned-up-to offset, returning the previous one. A topic
    /// name the file could not hold is refused here rather than at `store`,
    /// so the caller learns which topic is at fault.
    pub fn set(&mut self, topic: &str, partition: u32, offset: u64) -> Result<Option<u64>> {
        if let Err(kind) = check_topic_name(topic) {
            return Err(CleanerError::InvalidTopic {
                topic: topic.to_owned(),
                reason: kind.to_string(),
            });
        }
        Ok(self.entries.insert((topic.to_owned(), partition), offset))
    }

    /// Forget one partition (e.g. it was deleted), returning its offset.
    pub fn remove(&mut self, topic: &str, partition: u32) -> Option<u64> {
        self.entries.remove(&(topic.to_owned(), partition))
    }

    /// Forget every partition of a topic, returning how many there were.
    pub fn remove_topic(&mut self, topic: &str) -> usize {
        let before = self.entries.len();
        self.entries.retain(|(t, _), _| t != topic);
        before - self.entries.len()
    }

    /// Number of topic-partitions with an offset.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no topic-partition has an offset.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every (topic, partition, offset), sorted by topic then partition.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u32, u64)> + '_ {
        self.entries
            .iter()
            .map(|((topic, partition), offset)| (topic.as_str(), *partition, *offset))
    }

    /// The file's bytes. BTreeMap order makes them deterministic.
    fn encode(&self) -> String {
        let mut out = String::with_capacity(HEADER_BYTES_MAX + self.entries.len() * 32);
        out.push_str(&format!("{CHECKPOINT_VERSION}\n{}\n", self.entries.len()));
        for ((topic, partition), offset) in &self.entries {
            out.push_str(&format!("{topic} {partition} {offset}\n"));
        }
        out
    }

    /// Parse the file's bytes; `path` is only for error messages.
    fn decode(path: &Path, bytes: &[u8]) -> Result<Self> {
        Self::parse(bytes).map_err(|(at, kind)| CleanerError::Corruption {
            path: path.to_path_buf(),
            at,
            kind,
        })
    }

    /// Parse the file's bytes; `Err` says where and why.
    fn parse(bytes: &[u8]) -> std::result::Result<Self, (Location, CorruptionKind)> {
        let text = std::str::from_utf8(bytes).map_err(|err| {
            let valid = &bytes[..err.valid_up_to()];
            let line = 1 + valid.iter().filter(|&&b| b == b'\n').count();
            (Location::Line(line), CorruptionKind::NotUtf8)
        })?;
        if text.is_empty() {
            return Err((Location::Whole, CorruptionKind::Empty));
        }
        let body = text
            .strip_suffix('\n')
            .ok_or((Location::Whole, CorruptionKind::NoFinalNewline))?;
        let mut lines = body
            .split('\n')
            .enumerate()
            .map(|(i, line)| (Location::Line(i + 1), line));

        // `split` yields at least one piece, so line 1 always exists.
        let (at, version) = lines.next().unwrap_or((Location::Line(1), ""));
        if parse_decimal::<u32>(version) != Some(CHECKPOINT_VERSION) {
            let found = excerpt(version).to_owned();
            let kind = CorruptionKind::Version {
                found,
                expected: CHECKPOINT_VERSION,
            };
            return Err((at, kind));
        }

        let Some((at, count)) = lines.next() else {
            return Err((Location::Line(2), CorruptionKind::NoCountLine));
        };
        let expected = parse_decimal::<usize>(count).ok_or_else(|| {
            let found = excerpt(count).to_owned();
            (at, CorruptionKind::Count { found })
        })?;
        if expected > CHECKPOINT_ENTRIES_MAX {
            let kind = CorruptionKind::CountOverLimit {
                count: expected,
                max: CHECKPOINT_ENTRIES_MAX,
            };
            return Err((at, kind));
        }

        let mut entries = BTreeMap::new();
        for found in 0..expected {
            let Some((at, line)) = lines.next() else {
                // Entries start on line 3.
                let kind = CorruptionKind::TooFewEntries { expected, found };
                return Err((Location::Line(3 + found), kind));
            };
            let (topic, partition, offset) = parse_entry(line).map_err(|kind| (at, kind))?;
            if entries
                .insert((topic.to_owned(), partition), offset)
                .is_some()
            {
                let topic = topic.to_owned();
                return Err((at, CorruptionKind::DuplicateEntry { topic, partition }));
            }
        }
        if let Some((at, _)) = lines.next() {
            return Err((at, CorruptionKind::TooManyEntries { expected }));
        }
        Ok(CleanerCheckpoint { entries })
    }
}

fn too_large(path: &Path, len: u64) -> CleanerError {
    CleanerError::Corruption {
        path: path.to_path_buf(),
        at: Location::Whole,
        kind: CorruptionKind::FileTooLarge {
            len,
            max: CHECKPOINT_FILE_BYTES_MAX,
        },
    }
}

/// `topic partition offset`, separated by single spaces.
fn parse_entry(line: &str) -> std::result::Result<(&str, u32, u64), CorruptionKind> {
    let mut fields = line.split(' ');
    let (Some(topic), Some(partition), Some(offset), None) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        let line = excerpt(line).to_owned();
        return Err(CorruptionKind::EntryShape { line });
    };
    check_topic_name(topic)?;
    let partition = parse_decimal::<u32>(partition).ok_or_else(|| CorruptionKind::Partition {
        found: excerpt(partition).to_owned(),
    })?;
    let offset = parse_decimal::<u64>(offset).ok_or_else(|| CorruptionKind::Offset {
        found: excerpt(offset).to_owned(),
    })?;
    Ok((topic, partition, offset))
}

/// Kafka's topic-name rules, as the store applies them (one definition:
/// `tidelog_storage::topic_name_problem`).
fn check_topic_name(topic: &str) -> std::result::Result<(), CorruptionKind> {
    match tidelog_storage::topic_name_problem(topic) {
        None => Ok(()),
        Some(problem) => Err(CorruptionKind::BadTopic {
            topic: topic.to_owned(),
            problem,
        }),
    }
}

/// A number exactly as the writer prints it: ASCII digits, no sign, no
/// leading zeros, in range. `str::parse` alone would accept `+5` and `007`.
fn parse_decimal<T: std::str::FromStr>(text: &str) -> Option<T> {
    let canonical = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    if canonical {
        text.parse().ok()
    } else {
        None
    }
}

/// The start of `text`, so a hostile line cannot blow up an error message.
fn excerpt(text: &str) -> &str {
    match text.char_indices().nth(EXCERPT_CHARS_MAX) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn sample() -> CleanerCheckpoint {
        let mut cp = CleanerCheckpoint::new();
        cp.set("orders", 1, 877).unwrap();
        cp.set("orders", 0, 1200).unwrap();
        cp.set("a.b_c-D9", u32::MAX, u64::MAX).unwrap();
        cp.set("orders", 10, 0).unwrap();
        cp.set(&"x".repeat(TOPIC_NAME_BYTES_MAX), 2, 5).unwrap();
        cp
    }

    fn load_text(text: &[u8]) -> Result<CleanerCheckpoint> {
        let dir = tempfile::tempdir().unwrap();
        fs::write(CleanerCheckpoint::path(dir.path()), text).unwrap();
        CleanerCheckpoint::load(dir.path())
    }

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let cp = sample();
        cp.store(dir.path()).unwrap();
        let loaded = CleanerCheckpoint::load(dir.path()).unwrap();
        assert_eq!(loaded, cp);
        assert_eq!(loaded.get("orders", 0), Some(1200));
        assert_eq!(loaded.get("a.b_c-D9", u32::MAX), Some(u64::MAX));
        assert_eq!(loaded.len(), 5);
    }

    #[test]
    fn file_is_kafka_text_sorted() {
        let dir = tempfile::tempdir().unwrap();
        let mut cp = CleanerCheckpoint::new();
        cp.set("orders", 10, 0).unwrap();
        cp.set("orders", 2, 7).unwrap();
        cp.set("clicks", 0, 42).unwrap();
        cp.store(dir.path()).unwrap();
        let text = fs::read_to_string(CleanerCheckpoint::path(dir.path())).unwrap();
        // Partitions sort numerically, not as text.
        assert_eq!(text, "0\n3\nclicks 0 42\norders 2 7\norders 10 0\n");
        // The golden text decodes back (docs/formats.md).
        assert_eq!(
            load_text(b"0\n3\nclicks 0 42\norders 2 7\norders 10 0\n").unwrap(),
            cp
        );
        let empty = tempfile::tempdir().unwrap();
        CleanerCheckpoint::new().store(empty.path()).unwrap();
        let text = fs::read_to_string(CleanerCheckpoint::path(empty.path())).unwrap();
        assert_eq!(text, "0\n0\n");
        assert!(CleanerCheckpoint::load(empty.path()).unwrap().is_empty());
    }

    #[test]
    fn store_replaces_the_previous_file() {
        let dir = tempfile::tempdir().unwrap();
        sample().store(dir.path()).unwrap();
        let mut cp = CleanerCheckpoint::new();
        cp.set("t", 0, 1).unwrap();
        cp.store(dir.path()).unwrap();
        assert_eq!(CleanerCheckpoint::load(dir.path()).unwrap(), cp);
    }

    #[test]
    fn missing_file_is_an_empty_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        assert!(CleanerCheckpoint::load(dir.path()).unwrap().is_empty());
        let gone = dir.path().join("not-created");
        assert!(CleanerCheckpoint::load(&gone).unwrap().is_empty());
    }

    #[test]
    fn unreadable_file_is_an_error_not_an_empty_map() {
        // A data "directory" that is a file: open fails with ENOTDIR.
        let dir = tempfile::tempdir().unwrap();
        let not_a_dir = dir.path().join("file");
        fs::write(&not_a_dir, b"x").unwrap();
        let err = CleanerCheckpoint::load(&not_a_dir).unwrap_err();
        assert!(matches!(err, CleanerError::Io { .. }), "{err}");
        // The checkpoint path is a directory: reading fails.
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(CleanerCheckpoint::path(dir.path())).unwrap();
        let err = CleanerCheckpoint::load(dir.path()).unwrap_err();
        assert!(matches!(err, CleanerError::Io { .. }), "{err}");
        // Storing there fails too, with the path in the message.
        let err = sample().store(dir.path()).unwrap_err();
        assert!(matches!(err, CleanerError::Store { .. }), "{err}");
        assert!(err.to_string().contains(CHECKPOINT_FILE_NAME), "{err}");
    }

    #[test]
    fn leftover_temp_file_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let tmp = dir.path().join(format!("{CHECKPOINT_FILE_NAME}.tmp"));
        // Crash before the first rename: only a half-written temp file.
        fs::write(&tmp, b"0\n5\norders 0").unwrap();
        assert!(CleanerCheckpoint::load(dir.path()).unwrap().is_empty());
        // Crash during a later store: the old checkpoint is what counts.
        let cp = sample();
        cp.store(dir.path()).unwrap();
        fs::write(&tmp, b"garbage \xff\n").unwrap();
        assert_eq!(CleanerCheckpoint::load(dir.path()).unwrap(), cp);
        // The next store goes through and consumes the temp file.
        let mut newer = cp.clone();
        newer.set("orders", 0, 5000).unwrap();
        newer.store(dir.path()).unwrap();
        assert_eq!(CleanerCheckpoint::load(dir.path()).unwrap(), newer);
        assert!(!tmp.exists());
    }

    #[test]
    fn rejects_every_kind_of_bad_input() {
        let long_topic = format!("0\n1\n{} 0 1\n", "x".repeat(TOPIC_NAME_BYTES_MAX + 1));
        let too_many = format!("0\n{}\n", CHECKPOINT_ENTRIES_MAX + 1);
        use tidelog_storage::TopicNameProblem;
        // Each case: the text, the line (0: the file as a whole), the
        // kind's variant, and a word of its message.
        type Kind = fn(&CorruptionKind) -> bool;
        let empty: Kind = |k| matches!(k, CorruptionKind::Empty);
        let newline: Kind = |k| matches!(k, CorruptionKind::NoFinalNewline);
        let version: Kind = |k| matches!(k, CorruptionKind::Version { .. });
        let count_line: Kind = |k| matches!(k, CorruptionKind::NoCountLine);
        let count: Kind = |k| matches!(k, CorruptionKind::Count { .. });
        let over: Kind = |k| matches!(k, CorruptionKind::CountOverLimit { .. });
        let few: Kind = |k| matches!(k, CorruptionKind::TooFewEntries { .. });
        let more: Kind = |k| matches!(k, CorruptionKind::TooManyEntries { .. });
        let shape: Kind = |k| matches!(k, CorruptionKind::EntryShape { .. });
        let offset: Kind = |k| matches!(k, CorruptionKind::Offset { .. });
        let partition: Kind = |k| matches!(k, CorruptionKind::Partition { .. });
        let length: Kind = |k| {
            matches!(
                k,
                CorruptionKind::BadTopic {
                    problem: TopicNameProblem::Empty | TopicNameProblem::TooLong(_),
                    ..
                }
            )
        };
        let character: Kind = |k| {
            matches!(
                k,
                CorruptionKind::BadTopic {
                    problem: TopicNameProblem::Character(_),
                    ..
                }
            )
        };
        let reserved: Kind = |k| {
            matches!(
                k,
                CorruptionKind::BadTopic {
                    problem: TopicNameProblem::Reserved,
                    ..
                }
            )
        };
        let duplicate: Kind = |k| matches!(k, CorruptionKind::DuplicateEntry { .. });
        let utf8: Kind = |k| matches!(k, CorruptionKind::NotUtf8);
        let cases: Vec<(&[u8], usize, Kind, &str)> = vec![
            (b"", 0, empty, "empty"),
            (b"0\n1\nt 0 5", 0, newline, "newline"),
            (b"1\n0\n", 1, version, "version"),
            (b"00\n0\n", 1, version, "version"),
            (b"\n0\n", 1, version, "version"),
            (b"0\n", 2, count_line, "count line"),
            (b"0\nx\n", 2, count, "not a decimal"),
            (b"0\n-1\n", 2, count, "not a decimal"),
            (b"0\n+1\nt 0 1\n", 2, count, "not a decimal"),
            (b"0\n 1\nt 0 1\n", 2, count, "not a decimal"),
            (b"0\n99999999999999999999999\n", 2, count, "not a decimal"),
            (too_many.as_bytes(), 2, over, "exceeds the limit"),
            (b"0\n2\nt 0 1\n", 4, few, "expected 2 entries, found 1"),
            (b"0\n1\n", 3, few, "expected 1 entries, found 0"),
            (b"0\n1\nt 0 1\nt 1 2\n", 4, more, "found more"),
            (b"0\n0\n\n", 3, more, "found more"),
            (b"0\n1\nt 0\n", 3, shape, "single spaces"),
            (b"0\n1\nt 0 1 2\n", 3, shape, "single spaces"),
            (b"0\n1\nt  0 1\n", 3, shape, "single spaces"),
            (b"0\n1\nt 0 1 \n", 3, shape, "single spaces"),
            (b"0\n1\nt\t0\t1\n", 3, shape, "single spaces"),
            (b"0\n1\n\n", 3, shape, "single spaces"),
            (b"0\n1\nt 0 1\r\n", 3, offset, "offset"),
            (b"0\n1\n 0 1\n", 3, length, "1 to 249"),
            (long_topic.as_bytes(), 3, length, "1 to 249"),
            (b"0\n1\n../x 0 1\n", 3, character, "character '/'"),
            (b"0\n1\n.. 0 1\n", 3, reserved, "reserved"),
            (b"0\n1\n. 0 1\n", 3, reserved, "reserved"),
            (b"0\n1\ntop\xc3\xa9 0 1\n", 3, character, "character"),
            (b"0\n1\nt 4294967296 1\n", 3, partition, "partition"),
            (b"0\n1\nt -1 1\n", 3, partition, "partition"),
            (b"0\n1\nt 01 1\n", 3, partition, "partition"),
            (b"0\n1\nt 0 18446744073709551616\n", 3, offset, "offset"),
            (b"0\n1\nt 0 -1\n", 3, offset, "offset"),
            (b"0\n1\nt 0 0x10\n", 3, offset, "offset"),
            (b"0\n1\nt 0 007\n", 3, offset, "offset"),
            (
                b"0\n2\nt 0 1\nt 0 2\n",
                4,
                duplicate,
                "second entry for topic t partition 0",
            ),
            (b"0\n1\n\xff 0 1\n", 3, utf8, "UTF-8"),
        ];
        for (text, line, is_kind, needle) in cases {
            let shown = String::from_utf8_lossy(text);
            let want_at = match line {
                0 => Location::Whole,
                line => Location::Line(line),
            };
            match load_text(text) {
                Err(CleanerError::Corruption { path, at, kind }) => {
                    let reason = kind.to_string();
                    assert_eq!(at, want_at, "{shown:?}: {reason}");
                    assert!(is_kind(&kind), "{shown:?}: {kind:?}");
                    assert!(reason.contains(needle), "{shown:?}: {reason}");
                    assert!(path.ends_with(CHECKPOINT_FILE_NAME));
                }
                other => panic!("{shown:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn load_or_empty_reads_a_corrupt_file_as_empty_but_not_an_unreadable_one() {
        for text in [&b"0\n2\nt 0 1\n"[..], b"", b"\xff\xfe", b"0\n1\nt 0 -1\n"] {
            let dir = tempfile::tempdir().unwrap();
            fs::write(CleanerCheckpoint::path(dir.path()), text).unwrap();
            assert!(CleanerCheckpoint::load(dir.path()).is_err());
            let cp = CleanerCheckpoint::load_or_empty(dir.path()).unwrap();
            assert!(cp.is_empty(), "{:?}", String::from_utf8_lossy(text));
        }
        // A good file reads as itself.
        let dir = tempfile::tempdir().unwrap();
        sample().store(dir.path()).unwrap();
        assert_eq!(
            CleanerCheckpoint::load_or_empty(dir.path()).unwrap(),
            sample()
        );
        // The checkpoint path is a directory: an I/O error, not "empty".
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(CleanerCheckpoint::path(dir.path())).unwrap();
        let err = CleanerCheckpoint::load_or_empty(dir.path()).unwrap_err();
        assert!(matches!(err, CleanerError::Io { .. }), "{err}");
    }

    #[test]
    fn oversized_file_is_refused_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let file = File::create(CleanerCheckpoint::path(dir.path())).unwrap();
        // Sparse: costs no disk, but the length says 28 MB + 1.
        file.set_len(CHECKPOINT_FILE_BYTES_MAX as u64 + 1).unwrap();
        let err = CleanerCheckpoint::load(dir.path()).unwrap_err();
        assert!(
            matches!(&err, CleanerError::Corruption { at: Location::Whole, kind: kind @ CorruptionKind::FileTooLarge { .. }, .. } if kind.to_string().contains("limit")),
            "{err}"
        );
    }

    #[test]
    fn error_messages_quote_only_an_excerpt() {
        let line = format!("0\n1\n{}\n", "é".repeat(10_000));
        let err = load_text(line.as_bytes()).unwrap_err();
        let message = err.to_string();
        assert!(message.len() < 600, "{message}");
        assert!(message.contains("line 3"), "{message}");
    }

    #[test]
    fn get_set_remove() {
        let mut cp = CleanerCheckpoint::new();
        assert_eq!(cp.get("t", 0), None);
        assert_eq!(cp.set("t", 0, 10).unwrap(), None);
        assert_eq!(cp.set("t", 0, 20).unwrap(), Some(10));
        cp.set("t", 1, 30).unwrap();
        cp.set("t2", 0, 40).unwrap();
        cp.set("t.", 0, 50).unwrap();
        assert_eq!(cp.get("t", 0), Some(20));
        assert_eq!(cp.remove("t", 0), Some(20));
        assert_eq!(cp.remove("t", 0), None);
        assert_eq!(cp.get("t", 0), None);
        cp.set("t", 5, 60).unwrap();
        // Only the exact topic goes, not topics sharing its prefix.
        assert_eq!(cp.remove_topic("t"), 2);
        assert_eq!(cp.remove_topic("t"), 0);
        let left: Vec<_> = cp.iter().collect();
        assert_eq!(left, vec![("t.", 0, 50), ("t2", 0, 40)]);
    }

    #[test]
    fn set_refuses_names_the_file_cannot_hold() {
        let mut cp = CleanerCheckpoint::new();
        for bad in ["", "a b", "a\nb", "../x", "..", ".", "ü", &"x".repeat(250)] {
            let err = cp.set(bad, 0, 1).unwrap_err();
            assert!(
                matches!(err, CleanerError::InvalidTopic { .. }),
                "{bad:?}: {err}"
            );
        }
        assert!(cp.is_empty());
    }

    #[test]
    fn store_refuses_more_entries_than_load_accepts() {
        let dir = tempfile::tempdir().unwrap();
        let mut cp = CleanerCheckpoint::new();
        for partition in 0..=CHECKPOINT_ENTRIES_MAX as u32 {
            cp.set("t", partition, u64::from(partition)).unwrap();
        }
        let err = cp.store(dir.path()).unwrap_err();
        assert!(
            matches!(err, CleanerError::CheckpointTooLarge { .. }),
            "{err}"
        );
        assert!(!CleanerCheckpoint::path(dir.path()).exists());
        // At the limit it is written and read back.
        cp.remove("t", 0);
        cp.store(dir.path()).unwrap();
        assert_eq!(CleanerCheckpoint::load(dir.path()).unwrap(), cp);
    }

    #[test]
    fn longest_entry_line_matches_the_bound() {
        let topic = "x".repeat(TOPIC_NAME_BYTES_MAX);
        let mut cp = CleanerCheckpoint::new();
        cp.set(&topic, u32::MAX, u64::MAX).unwrap();
        let text = cp.encode();
        let entry = text.lines().nth(2).unwrap();
        assert_eq!(entry.len() + 1, ENTRY_LINE_BYTES_MAX);
        assert!(text.len() - entry.len() - 1 <= HEADER_BYTES_MAX);
    }
}
