//! Kafka's ConsumerProtocol Assignment: the bytes a Kafka group's leader
//! hands each member through SyncGroup, which the coordinator relays as it
//! got them ([`MemberAssignment::Opaque`](crate::coordinator::MemberAssignment::Opaque))
//! and the operator's describe decodes. And its Subscription, the
//! metadata a member joins with, whose topics OffsetDelete checks
//! ([`decode_subscription`], layout there).
//!
//! ```text
//! version            int16   0..=3 (newer versions are read as 3: they only
//!                            add fields at the end, Kafka's own rule)
//! topics             int32   count, then per topic:
//!   topic            int16 length + UTF-8 bytes (never null)
//!   partitions       int32   count, then int32 each
//! user_data          int32 length + bytes, -1 for null
//! ```
//!
//! Big-endian, Kafka's non-flexible encoding (every version of the
//! Assignment is). Every count and length is checked against the bytes
//! left before anything is allocated for it, so a leader cannot make the
//! broker allocate more than it sent. Bytes after `user_data` are ignored
//! (a newer version's fields). An empty assignment (no bytes at all) is a
//! member with no partitions, as Kafka's tools read it.

use crate::coordinator::TopicPartition;
use crate::error::BrokerError;

/// The newest Assignment version this reader knows the layout of.
pub const ASSIGNMENT_VERSION_MAX: i16 = 3;

/// The fewest bytes a topic entry takes: its name's length and its
/// partition count.
const TOPIC_ENTRY_MIN_BYTES: usize = 2 + 4;
const PARTITION_BYTES: usize = 4;

/// The partitions of one member's assignment, in the order the leader
/// listed them.
pub fn decode_assignment(bytes: &[u8]) -> Result<Vec<TopicPartition>, BrokerError> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    let mut r = Reader { bytes, at: 0 };
    let version = r.i16("version")?;
    if version < 0 {
        return Err(r.bad(format!("version {version} is negative")));
    }
    let topics = r.count("topics", TOPIC_ENTRY_MIN_BYTES)?;
    let mut out = Vec::new();
    for _ in 0..topics {
        let topic = r.string("topic")?;
        let partitions = r.count("partitions", PARTITION_BYTES)?;
        out.reserve(partitions);
        for _ in 0..partitions {
            let partition = r.i32("partition")?;
            let partition = u32::try_from(partition)
                .map_err(|_| r.bad(format!("partition {partition} of {topic:?} is negative")))?;
            out.push(TopicPartition::new(&topic, partition));
        }
    }
    let user_data = r.i32("user_data length")?;
    if user_data != -1 {
        let len = usize::try_from(user_data)
            .map_err(|_| r.bad(format!("user_data length {user_data} is negative")))?;
        r.take("user_data", len)?;
    }
    Ok(out)
}

/// The newest Subscription version this reader knows the layout of.
pub const SUBSCRIPTION_VERSION_MAX: i16 = 3;

/// The fewest bytes a topic name takes: its length.
const TOPIC_NAME_MIN_BYTES: usize = 2;

/// The topics of a member's Subscription (the metadata of its JoinGroup
/// protocol, as Kafka's `ConsumerProtocol.serializeSubscription` writes
/// it), in its order:
///
/// ```text
/// version            int16   0..=3 (newer read as 3, as for the Assignment)
/// topics             int32   count, then int16 length + UTF-8 bytes each
/// user_data          int32 length + bytes, -1 for null
/// v1+: owned_partitions, v2+: generation_id, v3+: rack_id (not read)
/// ```
///
/// The same bounds as [`decode_assignment`]: every count and length is
/// checked against the bytes left before anything is allocated. What
/// follows the topics is not needed and not read.
pub fn decode_subscription(bytes: &[u8]) -> Result<Vec<String>, BrokerError> {
    let mut r = Reader { bytes, at: 0 };
    let version = r.i16("version")?;
    if version < 0 {
        return Err(r.bad(format!("version {version} is negative")));
    }
    let topics = r.count("topics", TOPIC_NAME_MIN_BYTES)?;
    let mut out = Vec::with_capacity(topics);
    for _ in 0..topics {
        out.push(r.string("topic")?);
    }
    Ok(out)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn bad(&self, reason: String) -> BrokerError {
        BrokerError::ConsumerProtocolMalformed {
            byte: self.at,
            reason,
        }
    }

    fn take(&mut self, field: &str, len: usize) -> Result<&'a [u8], BrokerError> {
        let left = self.bytes.len() - self.at;
        if len > left {
            return Err(self.bad(format!("{field} needs {len} bytes, {left} are left")));
        }
        let out = &self.bytes[self.at..self.at + len];
        self.at += len;
        Ok(out)
    }

    fn i16(&mut self, field: &str) -> Result<i16, BrokerError> {
        let b = self.take(field, 2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self, field: &str) -> Result<i32, BrokerError> {
        let b = self.take(field, 4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// An array count, refused unless that many entries of at least
    /// `entry_min_bytes` each fit in the bytes left.
    fn count(&mut self, field: &str, entry_min_bytes: usize) -> Result<usize, BrokerError> {
        let count = self.i32(field)?;
        let left = self.bytes.len() - self.at;
        match usize::try_from(count) {
            Ok(n) if n <= left / entry_min_bytes => Ok(n),
            _ => Err(self.bad(format!(
                "{field} count {count} does not fit in the {left} bytes left"
            ))),
        }
    }

    fn string(&mut self, field: &str) -> Result<String, BrokerError> {
        let len = self.i16(field)?;
        let len = usize::try_from(len)
            .map_err(|_| self.bad(format!("{field} length {len} is negative")))?;
        let bytes = self.take(field, len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| self.bad(format!("{field} is not UTF-8")))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// An Assignment as Kafka's `ConsumerProtocol.serializeAssignment`
    /// writes it.
    fn encode(version: i16, topics: &[(&str, &[i32])], user_data: Option<&[u8]>) -> Vec<u8> {
        let mut out = version.to_be_bytes().to_vec();
        out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
        for (topic, partitions) in topics {
            out.extend_from_slice(&(topic.len() as i16).to_be_bytes());
            out.extend_from_slice(topic.as_bytes());
            out.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
            for p in *partitions {
                out.extend_from_slice(&p.to_be_bytes());
            }
        }
        match user_data {
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(d) => {
                out.extend_from_slice(&(d.len() as i32).to_be_bytes());
                out.extend_from_slice(d);
            }
        }
        out
    }

    /// A Subscription as `ConsumerProtocol.serializeSubscription` writes
    /// it: v0's fields, then (v1+) no owned partitions, (v2+) generation
    /// -1, (v3+) a null rack.
    fn encode_subscription(version: i16, topics: &[&str], user_data: Option<&[u8]>) -> Vec<u8> {
        let mut out = version.to_be_bytes().to_vec();
        out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
        for topic in topics {
            out.extend_from_slice(&(topic.len() as i16).to_be_bytes());
            out.extend_from_slice(topic.as_bytes());
        }
        match user_data {
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(d) => {
                out.extend_from_slice(&(d.len() as i32).to_be_bytes());
                out.extend_from_slice(d);
            }
        }
        if version >= 1 {
            out.extend_from_slice(&0i32.to_be_bytes());
        }
        if version >= 2 {
            out.extend_from_slice(&(-1i32).to_be_bytes());
        }
        if version >= 3 {
            out.extend_from_slice(&(-1i16).to_be_bytes());
        }
        out
    }

    #[test]
    fn subscriptions_of_every_version_give_their_topics() {
        // Golden v0: topics "a" and "bc", null user data.
        let golden = [
            0, 0, 0, 0, 0, 2, 0, 1, b'a', 0, 2, b'b', b'c', 0xff, 0xff, 0xff, 0xff,
        ];
        assert_eq!(encode_subscription(0, &["a", "bc"], None), golden);
        assert_eq!(decode_subscription(&golden).unwrap(), ["a", "bc"]);
        for version in 0..=SUBSCRIPTION_VERSION_MAX + 1 {
            let bytes = encode_subscription(version, &["orders", "users"], Some(b"x"));
            assert_eq!(
                decode_subscription(&bytes).unwrap(),
                ["orders", "users"],
                "v{version}"
            );
        }
        assert!(decode_subscription(&encode_subscription(0, &[], None))
            .unwrap()
            .is_empty());
    }

    #[test]
    fn bad_subscriptions_are_refused_without_allocating_for_them() {
        let good = encode_subscription(0, &["topic"], None);
        // Cut anywhere in the version, the count or the topics: refused.
        for len in 0..2 + 4 + 2 + 5 {
            assert!(decode_subscription(&good[..len]).is_err(), "{len} bytes");
        }
        let mut huge = good.clone();
        huge[2..6].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(decode_subscription(&huge).is_err(), "a count past the end");
        let mut negative = good.clone();
        negative[2..6].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(decode_subscription(&negative).is_err(), "a negative count");
        let mut null_name = good.clone();
        null_name[6..8].copy_from_slice(&(-1i16).to_be_bytes());
        assert!(decode_subscription(&null_name).is_err(), "a null topic");
        assert!(decode_subscription(&encode_subscription(-1, &[], None)).is_err());
    }

    #[test]
    fn golden_bytes_of_a_v0_assignment() {
        // Version 0, one topic "t" with partitions 1 and 2, null user data.
        let bytes = [
            0, 0, // version
            0, 0, 0, 1, // one topic
            0, 1, b't', // "t"
            0, 0, 0, 2, // two partitions
            0, 0, 0, 1, 0, 0, 0, 2, // 1, 2
            0xff, 0xff, 0xff, 0xff, // user data: null
        ];
        assert_eq!(encode(0, &[("t", &[1, 2])], None), bytes);
        assert_eq!(
            decode_assignment(&bytes).unwrap(),
            [TopicPartition::new("t", 1), TopicPartition::new("t", 2)]
        );
    }

    #[test]
    fn every_version_and_user_data_decode_alike() {
        let want = [
            TopicPartition::new("orders", 0),
            TopicPartition::new("orders", 3),
            TopicPartition::new("users", 1),
        ];
        let topics: &[(&str, &[i32])] = &[("orders", &[0, 3]), ("users", &[1])];
        for version in 0..=ASSIGNMENT_VERSION_MAX + 1 {
            for user_data in [None, Some(&b""[..]), Some(&b"sticky-state"[..])] {
                let bytes = encode(version, topics, user_data);
                assert_eq!(decode_assignment(&bytes).unwrap(), want, "v{version}");
            }
        }
        let mut longer = encode(3, topics, None);
        longer.extend_from_slice(b"a later version's field");
        assert_eq!(decode_assignment(&longer).unwrap(), want);
        assert!(decode_assignment(&[]).unwrap().is_empty());
        assert!(decode_assignment(&encode(1, &[], None)).unwrap().is_empty());
    }

    #[test]
    fn bad_bytes_are_refused_without_allocating_for_them() {
        let good = encode(0, &[("t", &[1, 2])], Some(b"x"));
        // Every truncation of a good assignment is refused.
        for len in 1..good.len() {
            assert!(decode_assignment(&good[..len]).is_err(), "{len} bytes");
        }
        let huge_count = |at: usize| {
            let mut b = good.clone();
            b[at..at + 4].copy_from_slice(&i32::MAX.to_be_bytes());
            b
        };
        let cases = [
            ("negative version", encode(-1, &[], None)),
            ("topic count past the end", huge_count(2)),
            ("partition count past the end", huge_count(9)),
            ("user data past the end", huge_count(21)),
            ("negative topic count", {
                let mut b = good.clone();
                b[2..6].copy_from_slice(&(-1i32).to_be_bytes());
                b
            }),
            ("null topic name", {
                let mut b = good.clone();
                b[6..8].copy_from_slice(&(-1i16).to_be_bytes());
                b
            }),
            ("negative partition", encode(0, &[("t", &[-5])], None)),
            ("negative user data length", {
                let mut b = encode(0, &[], None);
                let at = b.len() - 4;
                b[at..].copy_from_slice(&(-2i32).to_be_bytes());
                b
            }),
            ("topic not UTF-8", {
                let mut b = encode(0, &[("t", &[1])], None);
                b[8] = 0xff;
                b
            }),
        ];
        for (what, bytes) in cases {
            let err = decode_assignment(&bytes).unwrap_err();
            assert!(
                matches!(err, BrokerError::ConsumerProtocolMalformed { .. }),
                "{what}: {err}"
            );
        }
    }
}
