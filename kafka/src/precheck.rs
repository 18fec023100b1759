//! A structural walk of a request before kafka-protocol decodes it.
//!
//! kafka-protocol's decoders reserve `Vec` capacity from array counts read
//! off the wire (`Vec::with_capacity(n)`), so a 40-byte frame claiming two
//! billion topics would allocate gigabytes before failing. This walk
//! follows each served request's schema (the fields of KAFKA.md's served
//! versions, from Kafka's message definitions) and checks that every
//! array count, string and bytes length fits the bytes left, allocating
//! nothing. A frame that passes decodes with allocations bounded by its
//! own size; one that fails closes the connection as undecodable.

use kafka_protocol::messages::ApiKey;

type Walked = Result<(), String>;

struct Walk<'a> {
    bytes: &'a [u8],
    at: usize,
    flexible: bool,
}

impl Walk<'_> {
    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn skip(&mut self, n: usize, what: &str) -> Walked {
        if n > self.left() {
            return Err(format!("{what}: {n} bytes claimed, {} left", self.left()));
        }
        self.at += n;
        Ok(())
    }

    fn fixed(&mut self, n: usize) -> Walked {
        self.skip(n, "a fixed-size field")
    }

    fn uvarint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for i in 0..5 {
            let Some(&b) = self.bytes.get(self.at) else {
                return Err("a truncated varint".into());
            };
            self.at += 1;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("a varint longer than 32 bits".into())
    }

    fn int16(&mut self) -> Result<i16, String> {
        let at = self.at;
        self.fixed(2)?;
        Ok(i16::from_be_bytes([self.bytes[at], self.bytes[at + 1]]))
    }

    fn int32(&mut self) -> Result<i32, String> {
        let at = self.at;
        self.fixed(4)?;
        let b = &self.bytes[at..at + 4];
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A length-prefixed field (string or bytes, nullable or not): compact
    /// (uvarint length + 1) in flexible versions, else `int16` for strings
    /// and `int32` for bytes.
    fn sized(&mut self, bytes: bool, what: &str) -> Walked {
        let len: i64 = if self.flexible {
            i64::try_from(self.uvarint()?).unwrap_or(i64::MAX) - 1
        } else if bytes {
            i64::from(self.int32()?)
        } else {
            i64::from(self.int16()?)
        };
        if len < 0 {
            return Ok(()); // null
        }
        self.skip(usize::try_from(len).unwrap_or(usize::MAX), what)
    }

    fn string(&mut self) -> Walked {
        self.sized(false, "a string")
    }

    /// A non-compact nullable string, whatever the flexibility (the
    /// request header's client id).
    fn legacy_string(&mut self) -> Walked {
        let flexible = std::mem::replace(&mut self.flexible, false);
        let walked = self.string();
        self.flexible = flexible;
        walked
    }

    fn bytes(&mut self) -> Walked {
        self.sized(true, "a bytes field")
    }

    /// An array (nullable or not): its count must fit the bytes left (each
    /// element takes at least one byte), then `element` walks each.
    fn array(&mut self, mut element: impl FnMut(&mut Self) -> Walked) -> Walked {
        let count: i64 = if self.flexible {
            i64::try_from(self.uvarint()?).unwrap_or(i64::MAX) - 1
        } else {
            i64::from(self.int32()?)
        };
        if count < 0 {
            return Ok(());
        }
        if count > i64::try_from(self.left()).unwrap_or(i64::MAX) {
            return Err(format!(
                "an array of {count} elements in {} bytes",
                self.left()
            ));
        }
        for _ in 0..count {
            element(self)?;
        }
        Ok(())
    }

    /// Tagged fields, in flexible versions only.
    fn tags(&mut self) -> Walked {
        if !self.flexible {
            return Ok(());
        }
        let count = self.uvarint()?;
        if count > self.left() as u64 {
            return Err(format!("{count} tagged fields in {} bytes", self.left()));
        }
        for _ in 0..count {
            self.uvarint()?;
            let size = self.uvarint()?;
            self.skip(
                usize::try_from(size).unwrap_or(usize::MAX),
                "a tagged field",
            )?;
        }
        Ok(())
    }
}

impl Walk<'_> {
    /// A group member's fields: group id, generation, member id, and the
    /// instance id when the version has it (Heartbeat, SyncGroup,
    /// OffsetCommit).
    fn member(&mut self, instance_id: bool) -> Walked {
        self.string()?;
        self.fixed(4)?;
        self.string()?;
        if instance_id {
            self.string()?;
        }
        Ok(())
    }

    /// An array of topics, each a name and partition indexes (OffsetFetch,
    /// OffsetDelete).
    fn topic_indexes(&mut self) -> Walked {
        self.array(|w| {
            w.string()?;
            w.array(|w| w.fixed(4))?;
            w.tags()
        })
    }

    /// An array of (name, bytes) elements: JoinGroup's protocols,
    /// SyncGroup's assignments.
    fn named_bytes(&mut self) -> Walked {
        self.array(|w| {
            w.string()?;
            w.bytes()?;
            w.tags()
        })
    }
}

/// The request header of `header_version` (1: key, version, correlation
/// id, client id; 2: and tagged fields).
pub fn header(frame: &[u8], header_version: i16) -> Walked {
    let mut w = Walk {
        bytes: frame,
        at: 0,
        flexible: header_version >= 2,
    };
    w.fixed(8)?;
    w.legacy_string()?;
    w.tags()
}

/// The body of a served request at `version`; `frame` starts at the
/// body's first byte (after the header).
pub fn body(key: ApiKey, version: i16, frame: &[u8]) -> Walked {
    let v = version;
    let flexible = match key {
        ApiKey::ApiVersions => v >= 3,
        ApiKey::Metadata => v >= 9,
        ApiKey::Produce => v >= 9,
        ApiKey::Fetch => v >= 12,
        ApiKey::ListOffsets => v >= 6,
        ApiKey::OffsetCommit => v >= 8,
        ApiKey::OffsetFetch => v >= 6,
        ApiKey::FindCoordinator => v >= 3,
        ApiKey::JoinGroup => v >= 6,
        ApiKey::Heartbeat => v >= 4,
        ApiKey::LeaveGroup => v >= 4,
        ApiKey::SyncGroup => v >= 4,
        ApiKey::DescribeGroups => v >= 5,
        ApiKey::ListGroups => v >= 3,
        ApiKey::OffsetDelete => false,
        ApiKey::CreateTopics => v >= 5,
        ApiKey::DeleteTopics => v >= 4,
        ApiKey::DeleteRecords => v >= 2,
        ApiKey::DescribeConfigs => v >= 4,
        ApiKey::AlterConfigs => v >= 2,
        ApiKey::IncrementalAlterConfigs => v >= 1,
        ApiKey::DescribeCluster => true,
        ApiKey::InitProducerId => v >= 2,
        ApiKey::SaslHandshake => false,
        ApiKey::SaslAuthenticate => v >= 2,
        _ => return Err("not a served API".into()),
    };
    let mut w = Walk {
        bytes: frame,
        at: 0,
        flexible,
    };
    match key {
        // Client software name and version.
        ApiKey::ApiVersions if v >= 3 => {
            w.string()?;
            w.string()?;
        }
        ApiKey::Metadata => {
            w.array(|w| {
                if v >= 10 {
                    w.fixed(16)?;
                }
                w.string()?;
                w.tags()
            })?;
            if v >= 4 {
                w.fixed(1)?;
            }
            if (8..=10).contains(&v) {
                w.fixed(1)?;
            }
            if v >= 8 {
                w.fixed(1)?;
            }
        }
        ApiKey::Produce => {
            w.string()?;
            w.fixed(2 + 4)?;
            w.array(|w| {
                w.string()?;
                w.array(|w| {
                    w.fixed(4)?;
                    w.bytes()?;
                    w.tags()
                })?;
                w.tags()
            })?;
        }
        ApiKey::Fetch => {
            w.fixed(4 + 4 + 4 + 4 + 1)?;
            if v >= 7 {
                w.fixed(4 + 4)?;
            }
            w.array(|w| {
                w.string()?;
                w.array(|w| {
                    w.fixed(4)?;
                    if v >= 9 {
                        w.fixed(4)?;
                    }
                    w.fixed(8)?;
                    if v >= 12 {
                        w.fixed(4)?;
                    }
                    if v >= 5 {
                        w.fixed(8)?;
                    }
                    w.fixed(4)?;
                    w.tags()
                })?;
                w.tags()
            })?;
            if v >= 7 {
                w.array(|w| {
                    w.string()?;
                    w.array(|w| w.fixed(4))?;
                    w.tags()
                })?;
            }
            if v >= 11 {
                w.string()?;
            }
        }
        ApiKey::ListOffsets => {
            w.fixed(4)?;
            if v >= 2 {
                w.fixed(1)?;
            }
            w.array(|w| {
                w.string()?;
                w.array(|w| {
                    w.fixed(4)?;
                    if v >= 4 {
                        w.fixed(4)?;
                    }
                    w.fixed(8)?;
                    w.tags()
                })?;
                w.tags()
            })?;
        }
        ApiKey::OffsetCommit => {
            w.member(v >= 7)?;
            if v <= 4 {
                w.fixed(8)?;
            }
            w.array(|w| {
                w.string()?;
                w.array(|w| {
                    w.fixed(4 + 8)?;
                    if v >= 6 {
                        w.fixed(4)?;
                    }
                    w.string()?;
                    w.tags()
                })?;
                w.tags()
            })?;
        }
        ApiKey::OffsetFetch if v <= 7 => {
            w.string()?;
            w.topic_indexes()?;
            if v >= 7 {
                w.fixed(1)?;
            }
        }
        ApiKey::OffsetFetch => {
            w.array(|w| {
                w.string()?;
                w.topic_indexes()?;
                w.tags()
            })?;
            w.fixed(1)?;
        }
        ApiKey::FindCoordinator => {
            if v <= 3 {
                w.string()?;
            }
            if v >= 1 {
                w.fixed(1)?;
            }
            if v >= 4 {
                w.array(|w| w.string())?;
            }
        }
        ApiKey::JoinGroup => {
            w.string()?;
            w.fixed(4)?;
            if v >= 1 {
                w.fixed(4)?;
            }
            w.string()?;
            if v >= 5 {
                w.string()?;
            }
            w.string()?;
            w.named_bytes()?;
        }
        ApiKey::Heartbeat => w.member(v >= 3)?,
        ApiKey::LeaveGroup => {
            w.string()?;
            if v <= 2 {
                w.string()?;
            } else {
                w.array(|w| {
                    w.string()?;
                    w.string()?;
                    w.tags()
                })?;
            }
        }
        ApiKey::SyncGroup => {
            w.member(v >= 3)?;
            if v >= 5 {
                w.string()?;
                w.string()?;
            }
            w.named_bytes()?;
        }
        ApiKey::DescribeGroups => {
            w.array(|w| w.string())?;
            if v >= 3 {
                w.fixed(1)?;
            }
        }
        ApiKey::ListGroups if v >= 4 => {
            w.array(|w| w.string())?;
        }
        // The group id, then topics of partition indexes.
        ApiKey::OffsetDelete => {
            w.string()?;
            w.topic_indexes()?;
        }
        ApiKey::CreateTopics => {
            w.array(|w| {
                w.string()?;
                w.fixed(4 + 2)?;
                // Assignments: a partition and its broker ids.
                w.array(|w| {
                    w.fixed(4)?;
                    w.array(|w| w.fixed(4))?;
                    w.tags()
                })?;
                // Configs: name and nullable value.
                w.array(|w| {
                    w.string()?;
                    w.string()?;
                    w.tags()
                })?;
                w.tags()
            })?;
            w.fixed(4 + 1)?;
        }
        ApiKey::DeleteTopics => {
            if v >= 6 {
                w.array(|w| {
                    w.string()?;
                    w.fixed(16)?;
                    w.tags()
                })?;
            } else {
                w.array(|w| w.string())?;
            }
            w.fixed(4)?;
        }
        // Topics, each a name and (partition, offset) pairs; the timeout.
        ApiKey::DeleteRecords => {
            w.array(|w| {
                w.string()?;
                w.array(|w| {
                    w.fixed(4 + 8)?;
                    w.tags()
                })?;
                w.tags()
            })?;
            w.fixed(4)?;
        }
        ApiKey::DescribeConfigs => {
            w.array(|w| {
                w.fixed(1)?;
                w.string()?;
                w.array(|w| w.string())?;
                w.tags()
            })?;
            w.fixed(1)?;
            if v >= 3 {
                w.fixed(1)?;
            }
        }
        // Resources, each a type, a name and configs: a name, for the
        // incremental alter an operation, and a nullable value.
        ApiKey::AlterConfigs | ApiKey::IncrementalAlterConfigs => {
            let incremental = key == ApiKey::IncrementalAlterConfigs;
            w.array(|w| {
                w.fixed(1)?;
                w.string()?;
                w.array(|w| {
                    w.string()?;
                    if incremental {
                        w.fixed(1)?;
                    }
                    w.string()?;
                    w.tags()
                })?;
                w.tags()
            })?;
            w.fixed(1)?;
        }
        ApiKey::SaslHandshake => w.string()?,
        ApiKey::SaslAuthenticate => w.bytes()?,
        ApiKey::DescribeCluster => {
            w.fixed(1)?;
            if v >= 1 {
                w.fixed(1)?;
            }
        }
        // Transactional id (nullable), transaction timeout; v3+ the
        // producer id and epoch.
        ApiKey::InitProducerId => {
            w.string()?;
            w.fixed(4)?;
            if v >= 3 {
                w.fixed(8 + 2)?;
            }
        }
        _ => {}
    }
    w.tags()
}
