//! What `tidelog-consumers` runs ([`Consumers::tick`]): expiry of idle
//! instances (their uncommitted offsets are not committed: a client that
//! went away), auto commits that are due, and subscriptions whose topics
//! changed (a pattern matching a new topic, a topic created or gaining
//! partitions), which rebalance the group.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::instance::GroupInstances;
use super::membership::{partition_count, resolve_topics, topics_changed};
use super::offsets::commit_uncommitted;
use super::{lock, Consumers};

impl Consumers {
    /// Expiry, auto commits that are due, and subscriptions whose topics
    /// changed (a pattern matching a new topic, a topic created or gaining
    /// partitions): what `tidelog-consumers` runs. Blocking.
    pub fn tick(&self) {
        let Ok(broker) = self.broker() else { return };
        let slots: Vec<(String, Arc<Mutex<GroupInstances>>)> = lock(&self.groups)
            .iter()
            .map(|(g, s)| (g.clone(), Arc::clone(s)))
            .collect();
        let mut emptied = Vec::new();
        for (group, slot) in &slots {
            let group = group.as_str();
            let mut gi = lock(slot);
            let now_ms = self.coordinator.now_ms();
            let timeout_ms = self.config.instance_timeout_ms;
            let expired: Vec<String> = gi
                .instances
                .iter()
                .filter(|(_, i)| now_ms >= i.last_used_ms.saturating_add(timeout_ms))
                .map(|(n, _)| n.clone())
                .collect();
            if !expired.is_empty() {
                for name in &expired {
                    // A client that went away: what it was handed is not
                    // committed for it; the others commit theirs before
                    // the rebalance.
                    if let Some(inst) = gi.instances.remove(name) {
                        self.instances.fetch_sub(1, Ordering::AcqRel);
                        self.commit_group_auto(&broker, group, &mut gi, None);
                        self.leave(&broker, group, &inst);
                        inst.gone.notify(usize::MAX);
                        tracing::info!(
                            group,
                            instance = name,
                            idle_ms = now_ms.saturating_sub(inst.last_used_ms),
                            "consumer instance expired (http.consumer_instance_timeout_ms)"
                        );
                    }
                }
            }
            for (name, inst) in gi.instances.iter_mut() {
                if inst.auto_commit_due_ms.is_some_and(|due| due <= now_ms) {
                    commit_uncommitted(&broker, group, name, inst);
                }
            }
            let changed: Vec<String> = gi
                .instances
                .iter()
                .filter(|(_, i)| i.member.is_some() && topics_changed(&broker, i))
                .map(|(n, _)| n.clone())
                .collect();
            for name in changed {
                self.commit_group_auto(&broker, group, &mut gi, None);
                if let Some(inst) = gi.instances.get_mut(&name) {
                    let before: Vec<String> = inst.joined.iter().map(|(t, _)| t.clone()).collect();
                    let after = resolve_topics(&broker, &inst.mode);
                    let result = if before == after {
                        // Same topics, more partitions: the subscription is
                        // unchanged, so ask for the rebalance.
                        let partitions = |t: &str| partition_count(&broker, t);
                        self.coordinator.request_rebalance(group, &partitions);
                        inst.joined = after.iter().map(|t| (t.clone(), partitions(t))).collect();
                        Ok(())
                    } else {
                        self.join(&broker, group, &name, inst)
                    };
                    match result {
                        Ok(()) => tracing::info!(
                            group,
                            instance = name,
                            topics = ?after,
                            "subscribed topics changed: rebalancing"
                        ),
                        Err(e) => tracing::warn!(
                            group,
                            instance = name,
                            error = %e,
                            "cannot rejoin after the subscribed topics changed"
                        ),
                    }
                }
            }
            if gi.instances.is_empty() {
                emptied.push(group.to_string());
            }
        }
        drop(slots);
        for group in emptied {
            self.forget_if_empty(&group);
        }
    }
}
