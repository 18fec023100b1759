//! The server-side assignors of KIP-848 groups, Kafka's two: `uniform`
//! (its default) and `range`. Pure functions of the members'
//! subscriptions, the subscribed topics' partition counts and the
//! previous target: the coordinator calls one whenever the group epoch
//! moves past the assignment epoch.
//!
//! * `uniform` balances the partitions of every subscribed topic over the
//!   members that subscribe to them, and is sticky: a member keeps what it
//!   had, up to its share, so a member joining moves only the partitions
//!   it takes (the others are not revoked and handed back, as an eager
//!   classic rebalance does). With identical subscriptions every member
//!   gets ⌊P/N⌋ or ⌈P/N⌉ partitions.
//! * `range` gives each topic's partitions out in contiguous ranges, by
//!   member id, as Kafka's server-side range does: members subscribed to
//!   the same topics get the same partition numbers of each (co-partitioned
//!   joins).

use std::collections::{BTreeMap, BTreeSet};

use super::Partitions;
use uuid::Uuid;

/// The assignors served, default first (Kafka's
/// `group.consumer.assignors`).
pub const ASSIGNORS: [&str; 2] = ["uniform", "range"];

/// One member as an assignor sees it.
#[derive(Debug, Clone)]
pub struct Subscriber<'a> {
    pub member_id: &'a str,
    /// Topic names, regex matches included.
    pub topics: BTreeSet<&'a str>,
}

/// A subscribed topic as it is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicShape {
    pub id: Uuid,
    pub partitions: u32,
}

/// Runs the assignor `name` (one of [`ASSIGNORS`]). `members` is sorted by
/// member id; `previous` is the target being replaced. Every member gets
/// an entry, maybe empty.
pub fn assign(
    name: &str,
    members: &[Subscriber<'_>],
    topics: &BTreeMap<String, TopicShape>,
    previous: &BTreeMap<String, Partitions>,
) -> BTreeMap<String, Partitions> {
    match name {
        "range" => range(members, topics),
        _ => uniform(members, topics, previous),
    }
}

fn empty_target(members: &[Subscriber<'_>]) -> BTreeMap<String, Partitions> {
    members
        .iter()
        .map(|m| (m.member_id.to_string(), Partitions::new()))
        .collect()
}

fn count(p: &Partitions) -> usize {
    p.values().map(BTreeSet::len).sum()
}

/// Contiguous ranges per topic over its subscribers, by member id.
fn range(
    members: &[Subscriber<'_>],
    topics: &BTreeMap<String, TopicShape>,
) -> BTreeMap<String, Partitions> {
    let mut out = empty_target(members);
    for (name, shape) in topics {
        let subscribers: Vec<&str> = members
            .iter()
            .filter(|m| m.topics.contains(name.as_str()))
            .map(|m| m.member_id)
            .collect();
        if subscribers.is_empty() {
            continue;
        }
        let n = subscribers.len() as u32;
        let (each, extra) = (shape.partitions / n, shape.partitions % n);
        let mut next = 0;
        for (i, member) in subscribers.iter().enumerate() {
            let take = each + u32::from((i as u32) < extra);
            if take == 0 {
                continue;
            }
            if let Some(mine) = out.get_mut(*member) {
                mine.entry(shape.id).or_default().extend(next..next + take);
            }
            next += take;
        }
    }
    out
}

/// Balanced and sticky (module doc).
fn uniform(
    members: &[Subscriber<'_>],
    topics: &BTreeMap<String, TopicShape>,
    previous: &BTreeMap<String, Partitions>,
) -> BTreeMap<String, Partitions> {
    let mut out = empty_target(members);
    // Topic id → name and shape, for what `previous` holds by id.
    let by_id: BTreeMap<Uuid, (&str, u32)> = topics
        .iter()
        .map(|(name, shape)| (shape.id, (name.as_str(), shape.partitions)))
        .collect();
    let subscribed = |m: &Subscriber<'_>, id: &Uuid| {
        by_id
            .get(id)
            .is_some_and(|(name, _)| m.topics.contains(name))
    };
    // Every partition some member subscribes to.
    let mut unassigned: BTreeSet<(Uuid, u32)> = BTreeSet::new();
    for (name, shape) in topics {
        if members.iter().any(|m| m.topics.contains(name.as_str())) {
            unassigned.extend((0..shape.partitions).map(|p| (shape.id, p)));
        }
    }
    let takers = members
        .iter()
        .filter(|m| m.topics.iter().any(|t| topics.contains_key(*t)))
        .count();
    if takers == 0 {
        return out;
    }
    let total = unassigned.len();
    let floor = total / takers;
    // How many members may hold one more than `floor`.
    let mut extra = total % takers;
    // Stickiness: each member keeps what it had that is still valid, up to
    // its share.
    for m in members {
        let Some(had) = previous.get(m.member_id) else {
            continue;
        };
        let mine = out.entry(m.member_id.to_string()).or_default();
        for (id, partitions) in had {
            if !subscribed(m, id) {
                continue;
            }
            for p in partitions {
                let held = count(mine);
                let room = held < floor || (held == floor && extra > 0);
                if room && unassigned.remove(&(*id, *p)) {
                    if held == floor {
                        extra -= 1;
                    }
                    mine.entry(*id).or_default().insert(*p);
                }
            }
        }
    }
    // The rest, each to the subscribed member holding the fewest (ties by
    // member id); partitions with the fewest subscribers first, so a
    // topic only some members take does not land on members that others
    // filled already.
    let subscribers = |id: &Uuid| members.iter().filter(|m| subscribed(m, id)).count();
    let mut unassigned: Vec<(Uuid, u32)> = unassigned.into_iter().collect();
    unassigned.sort_by_cached_key(|(id, p)| (subscribers(id), *id, *p));
    for (id, p) in unassigned {
        let fewest = members
            .iter()
            .filter(|m| subscribed(m, &id))
            .min_by_key(|m| (out.get(m.member_id).map_or(0, count), m.member_id));
        if let Some(m) = fewest {
            if let Some(mine) = out.get_mut(m.member_id) {
                mine.entry(id).or_default().insert(p);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn shapes(topics: &[(&str, u128, u32)]) -> BTreeMap<String, TopicShape> {
        topics
            .iter()
            .map(|(name, id, partitions)| {
                (
                    name.to_string(),
                    TopicShape {
                        id: Uuid::from_u128(*id),
                        partitions: *partitions,
                    },
                )
            })
            .collect()
    }

    fn subscribers<'a>(ids: &'a [String], topics: &[&'a str]) -> Vec<Subscriber<'a>> {
        ids.iter()
            .map(|id| Subscriber {
                member_id: id,
                topics: topics.iter().copied().collect(),
            })
            .collect()
    }

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("m{i:02}")).collect()
    }

    /// Every partition exactly once.
    fn assert_complete(
        target: &BTreeMap<String, Partitions>,
        topics: &BTreeMap<String, TopicShape>,
    ) {
        let mut seen = BTreeSet::new();
        for partitions in target.values() {
            for (id, ps) in partitions {
                for p in ps {
                    assert!(seen.insert((*id, *p)), "{id} {p} twice");
                }
            }
        }
        let want: usize = topics.values().map(|s| s.partitions as usize).sum();
        assert_eq!(seen.len(), want);
    }

    #[test]
    fn uniform_balances_identical_subscriptions() {
        let topics = shapes(&[("a", 1, 7), ("b", 2, 5)]);
        for n in 1..=13 {
            let ids = ids(n);
            let members = subscribers(&ids, &["a", "b"]);
            let target = assign("uniform", &members, &topics, &BTreeMap::new());
            assert_complete(&target, &topics);
            let counts: Vec<usize> = target.values().map(count).collect();
            let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
            assert!(hi - lo <= 1, "{n} members: {counts:?}");
            assert_eq!(target.len(), n);
        }
    }

    #[test]
    fn uniform_moves_only_what_a_new_member_takes() {
        let topics = shapes(&[("a", 1, 20)]);
        let nine = ids(9);
        let before = assign(
            "uniform",
            &subscribers(&nine, &["a"]),
            &topics,
            &BTreeMap::new(),
        );
        let ten = ids(10);
        let after = assign("uniform", &subscribers(&ten, &["a"]), &topics, &before);
        assert_complete(&after, &topics);
        assert_eq!(count(&after["m09"]), 2);
        // Every old member keeps a subset of what it had: nothing moves
        // between old members.
        let moved: usize = nine
            .iter()
            .map(|m| {
                let had = &before[m][&Uuid::from_u128(1)];
                let has = after[m]
                    .get(&Uuid::from_u128(1))
                    .cloned()
                    .unwrap_or_default();
                assert!(has.is_subset(had), "{m}: {has:?} not in {had:?}");
                had.len() - has.len()
            })
            .sum();
        assert_eq!(moved, 2, "only the new member's share moves");
        // And a member leaving hands out only its own partitions.
        let back = assign("uniform", &subscribers(&nine, &["a"]), &topics, &after);
        for m in &nine {
            let had = &after[m];
            for (id, ps) in had {
                assert!(ps.is_subset(&back[m][id]));
            }
        }
    }

    #[test]
    fn uniform_assigns_only_subscribed_topics() {
        let topics = shapes(&[("a", 1, 4), ("b", 2, 4)]);
        let ids = ids(2);
        let members = vec![
            Subscriber {
                member_id: &ids[0],
                topics: ["a"].into_iter().collect(),
            },
            Subscriber {
                member_id: &ids[1],
                topics: ["a", "b"].into_iter().collect(),
            },
        ];
        let target = assign("uniform", &members, &topics, &BTreeMap::new());
        assert_complete(&target, &topics);
        assert!(!target["m00"].contains_key(&Uuid::from_u128(2)));
        assert_eq!(count(&target["m00"]), 4, "{target:?}");
        // A topic nobody subscribes to, or that does not exist, gives nothing.
        let none = vec![Subscriber {
            member_id: &ids[0],
            topics: ["missing"].into_iter().collect(),
        }];
        let target = assign("uniform", &none, &topics, &BTreeMap::new());
        assert_eq!(count(&target["m00"]), 0);
    }

    #[test]
    fn range_gives_contiguous_ranges_by_member_id() {
        let topics = shapes(&[("a", 1, 5), ("b", 2, 5)]);
        let ids = ids(2);
        let target = assign(
            "range",
            &subscribers(&ids, &["a", "b"]),
            &topics,
            &BTreeMap::new(),
        );
        assert_complete(&target, &topics);
        for id in [1, 2] {
            let id = Uuid::from_u128(id);
            assert_eq!(target["m00"][&id], BTreeSet::from([0, 1, 2]));
            assert_eq!(target["m01"][&id], BTreeSet::from([3, 4]));
        }
        // More members than partitions: the last get none.
        let five = self::ids(5);
        let topics = shapes(&[("a", 1, 3)]);
        let target = assign(
            "range",
            &subscribers(&five, &["a"]),
            &topics,
            &BTreeMap::new(),
        );
        assert_complete(&target, &topics);
        assert_eq!(count(&target["m03"]) + count(&target["m04"]), 0);
    }
}
