//! Who may campaign, and who goes first (the cluster contract: a member of
//! the in-sync set with the longest log becomes master).
//!
//! - Only a member of the last in-sync set may campaign: it holds every
//!   acknowledged record. With no in-sync set yet (a new cluster, no
//!   master ever) every node may.
//! - Among the eligible nodes that are alive (their `nodes/` entry exists),
//!   the one with the longest published log goes first, ties to the lower
//!   node id. The others wait a grace period and campaign only if the
//!   master key is still absent then: the first may be slow or about to
//!   die, and a shorter log as master beats no master.

use std::cmp::Reverse;

use super::records::{InsyncSet, NodeInfo};

/// When a node may campaign for an absent master.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CampaignTurn {
    /// It goes first.
    Now,
    /// Another eligible node goes first; after the grace period, if the
    /// master key is still absent.
    AfterGrace,
    /// Not in the last in-sync set.
    Never,
}

/// The turn of node `my_id`, whose log ends at `my_end`, given the live
/// nodes' entries and the last in-sync set. Its own entry in `nodes`, if
/// any, is ignored: `my_end` is fresher.
pub fn campaign_turn(
    my_id: u32,
    my_end: u64,
    nodes: &[NodeInfo],
    insync: Option<&InsyncSet>,
) -> CampaignTurn {
    let eligible = |id: u32| insync.is_none_or(|set| set.contains(id));
    if !eligible(my_id) {
        return CampaignTurn::Never;
    }
    let rank = |end: u64, id: u32| (end, Reverse(id));
    let best_other = nodes
        .iter()
        .filter(|n| n.node_id != my_id && eligible(n.node_id))
        .map(|n| rank(n.log_end, n.node_id))
        .max();
    match best_other {
        Some(other) if other > rank(my_end, my_id) => CampaignTurn::AfterGrace,
        _ => CampaignTurn::Now,
    }
}

/// Whether node `my_id` campaigns now (it is first in line).
pub fn should_campaign(
    my_id: u32,
    my_end: u64,
    nodes: &[NodeInfo],
    insync: Option<&InsyncSet>,
) -> bool {
    campaign_turn(my_id, my_end, nodes, insync) == CampaignTurn::Now
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(node_id: u32, log_end: u64) -> NodeInfo {
        NodeInfo {
            node_id,
            http: "h:1".into(),
            kafka: "h:2".into(),
            replication: "h:3".into(),
            log_end,
            epoch: 1,
        }
    }

    fn set(nodes: &[u32]) -> InsyncSet {
        InsyncSet {
            epoch: 1,
            nodes: nodes.to_vec(),
        }
    }

    #[test]
    fn the_longest_log_in_the_insync_set_goes_first() {
        let nodes = [node(1, 100), node(2, 300), node(3, 200)];
        let insync = set(&[1, 2, 3]);
        assert!(should_campaign(2, 300, &nodes, Some(&insync)));
        assert!(!should_campaign(1, 100, &nodes, Some(&insync)));
        assert_eq!(
            campaign_turn(3, 200, &nodes, Some(&insync)),
            CampaignTurn::AfterGrace
        );
    }

    #[test]
    fn ties_go_to_the_lower_node_id() {
        let nodes = [node(4, 500), node(2, 500), node(3, 500)];
        let insync = set(&[2, 3, 4]);
        assert!(should_campaign(2, 500, &nodes, Some(&insync)));
        assert!(!should_campaign(3, 500, &nodes, Some(&insync)));
        assert!(!should_campaign(4, 500, &nodes, Some(&insync)));
    }

    #[test]
    fn a_node_outside_the_insync_set_never_campaigns_and_does_not_count() {
        // Node 9 has the longest log but left the in-sync set: it may hold
        // bytes never acknowledged, or miss acknowledged ones.
        let nodes = [node(1, 100), node(9, 900)];
        let insync = set(&[1, 2]);
        assert_eq!(
            campaign_turn(9, 900, &nodes, Some(&insync)),
            CampaignTurn::Never
        );
        assert!(should_campaign(1, 100, &nodes, Some(&insync)));
    }

    #[test]
    fn dead_members_do_not_hold_the_line() {
        // Node 2 is in the set with no entry (its session is gone).
        let nodes = [node(1, 100)];
        assert!(should_campaign(1, 100, &nodes, Some(&set(&[1, 2]))));
    }

    #[test]
    fn my_own_fresher_end_counts_over_my_published_entry() {
        let nodes = [node(1, 100), node(2, 150)];
        let insync = set(&[1, 2]);
        assert!(should_campaign(1, 200, &nodes, Some(&insync)));
        // Node 2 sees only node 1's published 100, so it goes first too:
        // a stale entry can put two nodes first, and the campaign's txn
        // lets only one of them win.
        assert!(should_campaign(2, 150, &nodes, Some(&insync)));
    }

    #[test]
    fn with_no_insync_set_yet_every_node_is_eligible() {
        let nodes = [node(1, 0), node(2, 0)];
        assert!(should_campaign(1, 0, &nodes, None));
        assert_eq!(campaign_turn(2, 0, &nodes, None), CampaignTurn::AfterGrace);
        assert!(should_campaign(3, 0, &[], None));
    }
}
