//! Server-side partition assignment for groups of HTTP consumer instances:
//! Kafka's range and round-robin assignors, computed the way Kafka's
//! `RangeAssignor` and `RoundRobinAssignor` do so that a group behaves as
//! Kafka users expect.
//!
//! Invariants: every partition of a topic some member subscribes to (and
//! whose partition count is known) is given to exactly one member that
//! subscribes to it; nothing else is given. Members are ordered by their
//! static instance id when they have one, else by member id, so a static
//! member that restarts under a new member id keeps its partitions.

use std::collections::{BTreeMap, BTreeSet};

/// One partition of a topic.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: u32,
}

impl TopicPartition {
    pub fn new(topic: &str, partition: u32) -> Self {
        TopicPartition {
            topic: topic.to_string(),
            partition,
        }
    }
}

/// Which server-side assignor a group of HTTP instances uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Assignor {
    /// Kafka's default: each topic's partitions split into consecutive
    /// ranges, the first members getting one more when they do not divide.
    #[default]
    Range,
    /// All subscribed partitions dealt out one at a time in turn.
    RoundRobin,
}

impl Assignor {
    /// Kafka's protocol name (`partition.assignment.strategy`).
    pub fn name(self) -> &'static str {
        match self {
            Assignor::Range => "range",
            Assignor::RoundRobin => "roundrobin",
        }
    }
}

/// The partition counts of topics; `None` for a topic that does not exist
/// (its subscribers get nothing of it).
pub trait TopicPartitions {
    fn partitions(&self, topic: &str) -> Option<u32>;
}

impl TopicPartitions for BTreeMap<String, u32> {
    fn partitions(&self, topic: &str) -> Option<u32> {
        self.get(topic).copied()
    }
}

impl<F: Fn(&str) -> Option<u32>> TopicPartitions for F {
    fn partitions(&self, topic: &str) -> Option<u32> {
        self(topic)
    }
}

/// One member as an assignor sees it.
#[derive(Debug, Clone)]
pub struct Subscriber<'a> {
    pub member_id: &'a str,
    pub instance_id: Option<&'a str>,
    pub topics: &'a [String],
}

impl Subscriber<'_> {
    fn sort_key(&self) -> &str {
        self.instance_id.unwrap_or(self.member_id)
    }
}

/// Member id → its partitions, sorted. Every subscriber has an entry (an
/// empty one when it gets nothing).
pub type Assignment = BTreeMap<String, Vec<TopicPartition>>;

/// Assigns the subscribed partitions among `subscribers`.
pub fn assign(
    assignor: Assignor,
    subscribers: &[Subscriber<'_>],
    topics: &dyn TopicPartitions,
) -> Assignment {
    let mut ordered: Vec<&Subscriber<'_>> = subscribers.iter().collect();
    ordered.sort_by(|a, b| {
        a.sort_key()
            .cmp(b.sort_key())
            .then(a.member_id.cmp(b.member_id))
    });
    let mut result: Assignment = ordered
        .iter()
        .map(|s| (s.member_id.to_string(), Vec::new()))
        .collect();
    // Topic → its subscribers in order; a BTreeMap so topics are visited in
    // name order (Kafka sorts them too).
    let mut by_topic: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for s in &ordered {
        let unique: BTreeSet<&str> = s.topics.iter().map(String::as_str).collect();
        for topic in unique {
            by_topic.entry(topic).or_default().push(s.member_id);
        }
    }
    match assignor {
        Assignor::Range => {
            for (topic, members) in &by_topic {
                let Some(count) = topics.partitions(topic) else {
                    continue;
                };
                let n = members.len() as u32;
                let (each, extra) = (count / n, count % n);
                let mut next = 0u32;
                for (i, member) in members.iter().enumerate() {
                    let take = each + u32::from((i as u32) < extra);
                    let owned = result.entry((*member).to_string()).or_default();
                    owned.extend((next..next + take).map(|p| TopicPartition::new(topic, p)));
                    next += take;
                }
            }
        }
        Assignor::RoundRobin => {
            // Kafka's RoundRobinAssignor: one circular walk over the ordered
            // members; each partition goes to the next member that
            // subscribes to its topic.
            let subscribed: Vec<BTreeSet<&str>> = ordered
                .iter()
                .map(|s| s.topics.iter().map(String::as_str).collect())
                .collect();
            let mut cursor = 0usize;
            for topic in by_topic.keys() {
                let Some(count) = topics.partitions(topic) else {
                    continue;
                };
                for partition in 0..count {
                    // Some member subscribes to `topic` (it is in by_topic),
                    // so this finds one within one turn.
                    for _ in 0..ordered.len() {
                        let at = cursor % ordered.len();
                        cursor += 1;
                        if subscribed[at].contains(topic) {
                            let owned =
                                result.entry(ordered[at].member_id.to_string()).or_default();
                            owned.push(TopicPartition::new(topic, partition));
                            break;
                        }
                    }
                }
            }
        }
    }
    for owned in result.values_mut() {
        owned.sort();
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topics(list: &[(&str, u32)]) -> BTreeMap<String, u32> {
        list.iter().map(|(t, n)| (t.to_string(), *n)).collect()
    }

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn tps(list: &[(&str, u32)]) -> Vec<TopicPartition> {
        list.iter()
            .map(|(t, p)| TopicPartition::new(t, *p))
            .collect()
    }

    #[test]
    fn range_splits_each_topic_with_the_remainder_to_the_first_members() {
        // Kafka's RangeAssignor javadoc example: C0, C1 on t0, t1 with 3
        // partitions each: C0 gets t0p0 t0p1 t1p0 t1p1, C1 gets t0p2 t1p2.
        let both = strings(&["t0", "t1"]);
        let subs = [
            Subscriber {
                member_id: "c1",
                instance_id: None,
                topics: &both,
            },
            Subscriber {
                member_id: "c0",
                instance_id: None,
                topics: &both,
            },
        ];
        let got = assign(Assignor::Range, &subs, &topics(&[("t0", 3), ("t1", 3)]));
        assert_eq!(
            got["c0"],
            tps(&[("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)])
        );
        assert_eq!(got["c1"], tps(&[("t0", 2), ("t1", 2)]));
    }

    #[test]
    fn round_robin_deals_in_turn_and_skips_members_not_subscribed() {
        // Kafka's RoundRobinAssignor javadoc example: C0 on t0; C1 on t0,
        // t1; C2 on t0, t1, t2; t0 has 1 partition, t1 2, t2 3:
        // C0 [t0p0], C1 [t1p0], C2 [t1p1, t2p0, t2p1, t2p2].
        let (a, b, c) = (
            strings(&["t0"]),
            strings(&["t0", "t1"]),
            strings(&["t0", "t1", "t2"]),
        );
        let subs = [
            Subscriber {
                member_id: "c0",
                instance_id: None,
                topics: &a,
            },
            Subscriber {
                member_id: "c1",
                instance_id: None,
                topics: &b,
            },
            Subscriber {
                member_id: "c2",
                instance_id: None,
                topics: &c,
            },
        ];
        let got = assign(
            Assignor::RoundRobin,
            &subs,
            &topics(&[("t0", 1), ("t1", 2), ("t2", 3)]),
        );
        assert_eq!(got["c0"], tps(&[("t0", 0)]));
        assert_eq!(got["c1"], tps(&[("t1", 0)]));
        assert_eq!(
            got["c2"],
            tps(&[("t1", 1), ("t2", 0), ("t2", 1), ("t2", 2)])
        );
    }

    #[test]
    fn round_robin_spreads_two_topics_over_two_members() {
        let both = strings(&["a", "b"]);
        let subs = [
            Subscriber {
                member_id: "m0",
                instance_id: None,
                topics: &both,
            },
            Subscriber {
                member_id: "m1",
                instance_id: None,
                topics: &both,
            },
        ];
        let got = assign(Assignor::RoundRobin, &subs, &topics(&[("a", 3), ("b", 3)]));
        assert_eq!(got["m0"], tps(&[("a", 0), ("a", 2), ("b", 1)]));
        assert_eq!(got["m1"], tps(&[("a", 1), ("b", 0), ("b", 2)]));
    }

    #[test]
    fn more_members_than_partitions_leaves_the_last_members_empty() {
        let one = strings(&["t"]);
        let subs: Vec<Subscriber<'_>> = ["m0", "m1", "m2", "m3"]
            .iter()
            .map(|id| Subscriber {
                member_id: id,
                instance_id: None,
                topics: &one,
            })
            .collect();
        for assignor in [Assignor::Range, Assignor::RoundRobin] {
            let got = assign(assignor, &subs, &topics(&[("t", 2)]));
            assert_eq!(got["m0"], tps(&[("t", 0)]), "{assignor:?}");
            assert_eq!(got["m1"], tps(&[("t", 1)]), "{assignor:?}");
            assert!(got["m2"].is_empty() && got["m3"].is_empty(), "{assignor:?}");
        }
    }

    #[test]
    fn static_members_are_ordered_by_instance_id_and_unknown_topics_skipped() {
        let t = strings(&["t", "gone"]);
        // "zzz" sorts last by member id but first by its instance id.
        let subs = [
            Subscriber {
                member_id: "aaa",
                instance_id: Some("i2"),
                topics: &t,
            },
            Subscriber {
                member_id: "zzz",
                instance_id: Some("i1"),
                topics: &t,
            },
        ];
        let got = assign(Assignor::Range, &subs, &topics(&[("t", 3)]));
        assert_eq!(got["zzz"], tps(&[("t", 0), ("t", 1)]));
        assert_eq!(got["aaa"], tps(&[("t", 2)]));
    }
}
