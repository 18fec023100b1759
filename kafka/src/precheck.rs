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
//!
//! One walk function per served API ([`Body`]); the table of served APIs
//! (`routes::ROUTES`) names each row's, so an API is walked exactly when
//! it is served. This file imports nothing of the crate's.

use kafka_protocol::messages::ApiKey;

type Walked = Result<(), String>;

/// A cursor over a request's bytes; its walks allocate nothing.
pub struct Walk<'a> {
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

    /// Resources, each a type, a name and configs: a name, for the
    /// incremental alter an operation, and a nullable value; then
    /// validate-only (AlterConfigs, IncrementalAlterConfigs).
    fn resource_configs(&mut self, incremental: bool) -> Walked {
        self.array(|w| {
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
        self.fixed(1)
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

/// How one API's request body is walked at a version: the `walk` of its
/// row in `routes::ROUTES`, one of the functions below. The tagged fields
/// that end every flexible body are walked by [`body`], not by these.
pub type Body = fn(&mut Walk<'_>, i16) -> Walked;

/// The body of a request of API `key` at `version`, walked by `walk`;
/// `frame` starts at the body's first byte (after the header).
///
/// A version is flexible (compact lengths, tagged fields) when its
/// request header is v2, as kafka-protocol's own decoders read it, so
/// the walk and the decoder never disagree on a frame's layout.
pub fn body(key: ApiKey, walk: Body, version: i16, frame: &[u8]) -> Walked {
    let mut w = Walk {
        bytes: frame,
        at: 0,
        flexible: key.request_header_version(version) >= 2,
    };
    walk(&mut w, version)?;
    w.tags()
}

/// ApiVersions: v3+ the client software name and version.
pub fn api_versions(w: &mut Walk<'_>, v: i16) -> Walked {
    if v >= 3 {
        w.string()?;
        w.string()?;
    }
    Ok(())
}

pub fn metadata(w: &mut Walk<'_>, v: i16) -> Walked {
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
    Ok(())
}

pub fn produce(w: &mut Walk<'_>, _v: i16) -> Walked {
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
    })
}

pub fn fetch(w: &mut Walk<'_>, v: i16) -> Walked {
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
    Ok(())
}

pub fn list_offsets(w: &mut Walk<'_>, v: i16) -> Walked {
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
    })
}

pub fn offset_commit(w: &mut Walk<'_>, v: i16) -> Walked {
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
    })
}

/// OffsetFetch: up to v7 one group, from v8 an array of groups.
pub fn offset_fetch(w: &mut Walk<'_>, v: i16) -> Walked {
    if v <= 7 {
        w.string()?;
        w.topic_indexes()?;
        if v >= 7 {
            w.fixed(1)?;
        }
        return Ok(());
    }
    w.array(|w| {
        w.string()?;
        if v >= 9 {
            // The member id and epoch of a KIP-848 member.
            w.string()?;
            w.fixed(4)?;
        }
        w.topic_indexes()?;
        w.tags()
    })?;
    w.fixed(1)
}

pub fn find_coordinator(w: &mut Walk<'_>, v: i16) -> Walked {
    if v <= 3 {
        w.string()?;
    }
    if v >= 1 {
        w.fixed(1)?;
    }
    if v >= 4 {
        w.array(|w| w.string())?;
    }
    Ok(())
}

pub fn join_group(w: &mut Walk<'_>, v: i16) -> Walked {
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
    w.named_bytes()
}

pub fn heartbeat(w: &mut Walk<'_>, v: i16) -> Walked {
    w.member(v >= 3)
}

pub fn leave_group(w: &mut Walk<'_>, v: i16) -> Walked {
    w.string()?;
    if v <= 2 {
        w.string()
    } else {
        w.array(|w| {
            w.string()?;
            w.string()?;
            w.tags()
        })
    }
}

pub fn sync_group(w: &mut Walk<'_>, v: i16) -> Walked {
    w.member(v >= 3)?;
    if v >= 5 {
        w.string()?;
        w.string()?;
    }
    w.named_bytes()
}

pub fn describe_groups(w: &mut Walk<'_>, v: i16) -> Walked {
    w.array(|w| w.string())?;
    if v >= 3 {
        w.fixed(1)?;
    }
    Ok(())
}

/// ListGroups: v4+ the states filter, v5+ the types filter.
pub fn list_groups(w: &mut Walk<'_>, v: i16) -> Walked {
    if v >= 4 {
        w.array(|w| w.string())?;
    }
    if v >= 5 {
        w.array(|w| w.string())?;
    }
    Ok(())
}

/// ConsumerGroupHeartbeat (KIP-848): group and member ids, epoch,
/// instance and rack ids, rebalance timeout, subscribed names, v1's
/// regex, the assignor, then the owned topics (a 16-byte id and
/// partition indexes each).
pub fn consumer_group_heartbeat(w: &mut Walk<'_>, v: i16) -> Walked {
    w.string()?;
    w.string()?;
    w.fixed(4)?;
    w.string()?;
    w.string()?;
    w.fixed(4)?;
    w.array(|w| w.string())?;
    if v >= 1 {
        w.string()?;
    }
    w.string()?;
    w.array(|w| {
        w.fixed(16)?;
        w.array(|w| w.fixed(4))?;
        w.tags()
    })
}

/// ConsumerGroupDescribe: the group ids, then whether to answer the
/// authorized operations.
pub fn consumer_group_describe(w: &mut Walk<'_>, _v: i16) -> Walked {
    w.array(|w| w.string())?;
    w.fixed(1)
}

/// DeleteGroups: the group ids.
pub fn delete_groups(w: &mut Walk<'_>, _v: i16) -> Walked {
    w.array(|w| w.string())
}

/// OffsetDelete: the group id, then topics of partition indexes.
pub fn offset_delete(w: &mut Walk<'_>, _v: i16) -> Walked {
    w.string()?;
    w.topic_indexes()
}

pub fn create_topics(w: &mut Walk<'_>, _v: i16) -> Walked {
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
    w.fixed(4 + 1)
}

/// CreatePartitions: topics, each a name, a count and a nullable list of
/// assignments (broker ids each); the timeout and validate-only.
pub fn create_partitions(w: &mut Walk<'_>, _v: i16) -> Walked {
    w.array(|w| {
        w.string()?;
        w.fixed(4)?;
        w.array(|w| {
            w.array(|w| w.fixed(4))?;
            w.tags()
        })?;
        w.tags()
    })?;
    w.fixed(4 + 1)
}

pub fn delete_topics(w: &mut Walk<'_>, v: i16) -> Walked {
    if v >= 6 {
        w.array(|w| {
            w.string()?;
            w.fixed(16)?;
            w.tags()
        })?;
    } else {
        w.array(|w| w.string())?;
    }
    w.fixed(4)
}

/// DeleteRecords: topics, each a name and (partition, offset) pairs; the
/// timeout.
pub fn delete_records(w: &mut Walk<'_>, _v: i16) -> Walked {
    w.array(|w| {
        w.string()?;
        w.array(|w| {
            w.fixed(4 + 8)?;
            w.tags()
        })?;
        w.tags()
    })?;
    w.fixed(4)
}

pub fn describe_configs(w: &mut Walk<'_>, v: i16) -> Walked {
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
    Ok(())
}

pub fn alter_configs(w: &mut Walk<'_>, _v: i16) -> Walked {
    w.resource_configs(false)
}

pub fn incremental_alter_configs(w: &mut Walk<'_>, _v: i16) -> Walked {
    w.resource_configs(true)
}

pub fn sasl_handshake(w: &mut Walk<'_>, _v: i16) -> Walked {
    w.string()
}

pub fn sasl_authenticate(w: &mut Walk<'_>, _v: i16) -> Walked {
    w.bytes()
}

pub fn describe_cluster(w: &mut Walk<'_>, v: i16) -> Walked {
    w.fixed(1)?;
    if v >= 1 {
        w.fixed(1)?;
    }
    Ok(())
}

/// An ACL filter (DescribeAcls' body, each of DeleteAcls'): resource
/// type, name (nullable), v1+ pattern type, principal and host
/// (nullable), operation, permission.
fn acl_filter(w: &mut Walk<'_>, v: i16) -> Walked {
    w.fixed(1)?;
    w.string()?;
    if v >= 1 {
        w.fixed(1)?;
    }
    w.string()?;
    w.string()?;
    w.fixed(2)
}

pub fn describe_acls(w: &mut Walk<'_>, v: i16) -> Walked {
    acl_filter(w, v)
}

pub fn create_acls(w: &mut Walk<'_>, v: i16) -> Walked {
    w.array(|w| {
        w.fixed(1)?;
        w.string()?;
        if v >= 1 {
            w.fixed(1)?;
        }
        w.string()?;
        w.string()?;
        w.fixed(2)?;
        w.tags()
    })
}

pub fn delete_acls(w: &mut Walk<'_>, v: i16) -> Walked {
    w.array(|w| {
        acl_filter(w, v)?;
        w.tags()
    })
}

/// DescribeUserScramCredentials: users (nullable) of a name each.
pub fn describe_user_scram_credentials(w: &mut Walk<'_>, _v: i16) -> Walked {
    w.array(|w| {
        w.string()?;
        w.tags()
    })
}

/// AlterUserScramCredentials: deletions (name, mechanism), upsertions
/// (name, mechanism, iterations, salt, salted password).
pub fn alter_user_scram_credentials(w: &mut Walk<'_>, _v: i16) -> Walked {
    w.array(|w| {
        w.string()?;
        w.fixed(1)?;
        w.tags()
    })?;
    w.array(|w| {
        w.string()?;
        w.fixed(1 + 4)?;
        w.bytes()?;
        w.bytes()?;
        w.tags()
    })
}

/// AddPartitionsToTxn v0-3: transactional id, producer id and epoch,
/// topics (name, partitions).
pub fn add_partitions_to_txn(w: &mut Walk<'_>, _v: i16) -> Walked {
    w.string()?;
    w.fixed(8 + 2)?;
    w.array(|w| {
        w.string()?;
        w.array(|w| w.fixed(4))?;
        w.tags()
    })
}

/// AddOffsetsToTxn v0-3: transactional id, producer id and epoch, group.
pub fn add_offsets_to_txn(w: &mut Walk<'_>, _v: i16) -> Walked {
    w.string()?;
    w.fixed(8 + 2)?;
    w.string()
}

/// TxnOffsetCommit v0-3: transactional id, group, producer id and epoch;
/// v3 generation, member id and instance id (nullable); topics (name,
/// partitions: index, offset, v2+ leader epoch, metadata (nullable)).
pub fn txn_offset_commit(w: &mut Walk<'_>, v: i16) -> Walked {
    w.string()?;
    w.string()?;
    w.fixed(8 + 2)?;
    if v >= 3 {
        w.fixed(4)?;
        w.string()?;
        w.string()?;
    }
    w.array(|w| {
        w.string()?;
        w.array(|w| {
            w.fixed(4 + 8)?;
            if v >= 2 {
                w.fixed(4)?;
            }
            w.string()?;
            w.tags()
        })?;
        w.tags()
    })
}

/// DescribeTransactions v0: transactional ids.
pub fn describe_transactions(w: &mut Walk<'_>, _v: i16) -> Walked {
    w.array(|w| w.string())
}

/// DescribeProducers v0: topics, each with its partition indexes.
pub fn describe_producers(w: &mut Walk<'_>, _v: i16) -> Walked {
    w.array(|w| {
        w.string()?;
        w.array(|w| w.fixed(4))?;
        w.tags()
    })
}

/// ListTransactions v0-1: state filters, producer id filters; v1 the
/// duration filter.
pub fn list_transactions(w: &mut Walk<'_>, v: i16) -> Walked {
    w.array(|w| w.string())?;
    w.array(|w| w.fixed(8))?;
    if v >= 1 {
        w.fixed(8)?;
    }
    Ok(())
}

/// EndTxn v0-3: transactional id, producer id and epoch, committed.
pub fn end_txn(w: &mut Walk<'_>, _v: i16) -> Walked {
    w.string()?;
    w.fixed(8 + 2 + 1)
}

/// InitProducerId: transactional id (nullable), transaction timeout; v3+
/// the producer id and epoch.
pub fn init_producer_id(w: &mut Walk<'_>, v: i16) -> Walked {
    w.string()?;
    w.fixed(4)?;
    if v >= 3 {
        w.fixed(8 + 2)?;
    }
    Ok(())
}
