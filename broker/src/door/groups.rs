//! The group coordinator's calls behind the door: Kafka's JoinGroup,
//! SyncGroup, Heartbeat, LeaveGroup, DescribeGroups and ListGroups, and
//! KIP-848's ConsumerGroupHeartbeat and ConsumerGroupDescribe (which
//! never wait: a member learns of a change at its next heartbeat).
//!
//! A join or a sync may have to wait for other members (the join window
//! is open; a follower arrived before the leader's assignments). The
//! wait is the broker's, written once here: take the group's listener
//! (`Coordinator::listen`) *before* polling again, then await it, the
//! deadline or shutdown, whichever is first; a change between the poll
//! and the wait wakes it at once, and no task polls on a timer or holds
//! a thread. The coordinator itself never waits: it answers `Pending`,
//! and its deadlines (rebalance and session timeouts, applied by
//! `tidelog-groups`) normally end a wait before the bound here does.
//!
//! What a wait that ends without an answer comes to is typed
//! ([`JoinAnswer::NotJoined`], [`SyncAnswer::TimedOut`],
//! [`SyncAnswer::Stopping`]), so Kafka answers REBALANCE_IN_PROGRESS
//! (the client joins again) or COORDINATOR_NOT_AVAILABLE (it looks for
//! the coordinator again) as it did when the wait was its own.

use std::time::Duration;

use event_listener::EventListener;
use tokio::sync::watch;
use tokio::time::Instant;

use super::Door;
use tidelog_security::acl::{Operation, Resource};

use crate::coordinator::consumer::assignors::TopicShape;
use crate::coordinator::{
    ConsumerGroupSnapshot, GroupSnapshot, Heartbeat, HeartbeatAnswer, JoinOutcome, JoinRequest,
    JoinResponse, MemberAssignment, ProtocolKind, SyncOutcome, SyncRequest, TopicCatalog,
};
use crate::error::BrokerError;
use crate::group_admin::GroupSummary;
use crate::long_poll::shutdown;

/// How long a join or sync waits beyond its bound (the member's rebalance
/// timeout; the coordinator's longest session) before it gives up: the
/// coordinator's own deadlines normally end the wait first.
const WAIT_MARGIN: Duration = Duration::from_secs(5);
/// The longest wait, whatever rebalance timeout a client asks for.
const WAIT_MAX: Duration = Duration::from_secs(300);

/// What a JoinGroup came to ([`Door::join_group`]).
#[derive(Debug)]
pub enum JoinAnswer {
    /// The join window closed with the member in the generation.
    Joined(JoinResponse),
    /// The member waited for the window to close under `member_id` (this
    /// join may have handed it out: the answer names it) and no
    /// generation came.
    NotJoined { member_id: String, why: NotJoined },
}

/// Why a waiting join ended without a generation.
#[derive(Debug)]
pub enum NotJoined {
    /// The wait outlived its bound: the member joins again.
    TimedOut,
    /// Shutdown began: the member looks for the coordinator again.
    Stopping,
    /// The group refused the member while it waited (it was removed, the
    /// group was deleted, ...).
    Refused(BrokerError),
}

/// What a SyncGroup came to ([`Door::sync_group`]).
#[derive(Debug)]
pub enum SyncAnswer {
    /// The member's assignment, and the group's selected protocol.
    Synced {
        assignment: MemberAssignment,
        protocol: Option<String>,
    },
    /// The leader's assignments did not come within the bound: the member
    /// joins again.
    TimedOut,
    /// Shutdown began: the member looks for the coordinator again.
    Stopping,
}

/// Why a wait for a group's change ended.
enum Waited {
    Changed,
    Deadline,
    Stopping,
}

impl Door {
    /// JoinGroup into `group` (created if new): answers once the join
    /// window closes, waiting for it at most the longer of the member's
    /// rebalance and session timeouts (plus `WAIT_MARGIN`, at most
    /// `WAIT_MAX`) and until `stop` turns true (shutdown). A refusal of
    /// the join itself is `Err` (MEMBER_ID_REQUIRED carries the id handed
    /// out); one that comes while the member waits is
    /// [`NotJoined::Refused`], with the id it waited under.
    pub async fn join_group(
        &self,
        group: &str,
        request: JoinRequest,
        mut stop: watch::Receiver<bool>,
    ) -> Result<JoinAnswer, BrokerError> {
        self.broker.check_master()?;
        self.allow(Operation::Read, Resource::group(group))?;
        let broker = self.broker();
        let coordinator = &broker.coordinator;
        let partitions = |topic: &str| broker.partition_count(topic);
        let bound_ms = request.rebalance_timeout_ms.max(request.session_timeout_ms);
        let member_id = match coordinator.join(group, request, &partitions)? {
            JoinOutcome::Joined(joined) => return Ok(JoinAnswer::Joined(joined)),
            JoinOutcome::Pending { member_id } => member_id,
        };
        let deadline = deadline(bound_ms);
        loop {
            // Taken before the poll: a change in between wakes the wait.
            let listener = coordinator.listen(group);
            let why = match coordinator.poll_join(group, &member_id) {
                Ok(JoinOutcome::Joined(joined)) => return Ok(JoinAnswer::Joined(joined)),
                Ok(JoinOutcome::Pending { .. }) => {
                    match wait(listener, deadline, &mut stop).await {
                        Waited::Changed => continue,
                        Waited::Deadline => NotJoined::TimedOut,
                        Waited::Stopping => NotJoined::Stopping,
                    }
                }
                Err(e) => NotJoined::Refused(e),
            };
            return Ok(JoinAnswer::NotJoined { member_id, why });
        }
    }

    /// SyncGroup of a Kafka member of `group`: the leader's assignments
    /// are kept and every member gets its own. A follower that arrives
    /// before the leader waits for them at most the coordinator's longest
    /// session timeout (plus `WAIT_MARGIN`, at most `WAIT_MAX`) and
    /// until `stop` turns true (shutdown).
    pub async fn sync_group(
        &self,
        group: &str,
        request: SyncRequest,
        mut stop: watch::Receiver<bool>,
    ) -> Result<SyncAnswer, BrokerError> {
        self.broker.check_master()?;
        self.allow(Operation::Read, Resource::group(group))?;
        let coordinator = &self.broker().coordinator;
        let SyncRequest {
            member_id,
            instance_id,
            generation,
            assignments,
        } = request;
        let mut outcome = coordinator.sync(
            group,
            &member_id,
            instance_id.as_deref(),
            generation,
            assignments,
        );
        let deadline = deadline(coordinator.config().max_session_timeout_ms);
        loop {
            let listener = match outcome? {
                SyncOutcome::Synced(assignment) => {
                    let protocol = coordinator.describe(group).and_then(|g| g.protocol);
                    return Ok(SyncAnswer::Synced {
                        assignment,
                        protocol,
                    });
                }
                SyncOutcome::Pending => coordinator.listen(group),
            };
            // Polled after the listener is taken: a change in between
            // wakes the wait at once.
            outcome = coordinator.poll_sync(group, &member_id, generation);
            if matches!(outcome, Ok(SyncOutcome::Pending)) {
                match wait(listener, deadline, &mut stop).await {
                    Waited::Changed => {
                        outcome = coordinator.poll_sync(group, &member_id, generation);
                    }
                    Waited::Deadline => return Ok(SyncAnswer::TimedOut),
                    Waited::Stopping => return Ok(SyncAnswer::Stopping),
                }
            }
        }
    }

    /// Heartbeat: keeps a member's session (REBALANCE_IN_PROGRESS while its
    /// group rebalances). In memory, on the caller's task.
    pub fn heartbeat(
        &self,
        group: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: u32,
    ) -> Result<(), BrokerError> {
        self.broker.check_master()?;
        self.allow(Operation::Read, Resource::group(group))?;
        self.broker()
            .coordinator
            .heartbeat(group, member_id, instance_id, generation)
    }

    /// ConsumerGroupHeartbeat (KIP-848): joins, keeps, moves or ends a
    /// member of `group`. READ on the group, DESCRIBE on every topic it
    /// names (a pattern matches only the topics the principal may
    /// describe). In memory, on the caller's task.
    pub fn consumer_group_heartbeat(
        &self,
        group: &str,
        heartbeat: Heartbeat,
    ) -> Result<HeartbeatAnswer, BrokerError> {
        self.broker.check_master()?;
        self.allow(Operation::Read, Resource::group(group))?;
        for topic in heartbeat.topic_names.iter().flatten() {
            self.allow(Operation::Describe, Resource::topic(topic))?;
        }
        self.broker()
            .coordinator
            .consumer_heartbeat(group, heartbeat, &Catalog { door: self })
    }

    /// A KIP-848 group as ConsumerGroupDescribe answers it; `None` if
    /// `group` is no such group. DESCRIBE on the group.
    pub fn consumer_group_snapshot(
        &self,
        group: &str,
    ) -> Result<Option<ConsumerGroupSnapshot>, BrokerError> {
        self.allow(Operation::Describe, Resource::group(group))?;
        Ok(self.broker().coordinator.describe_consumer(group))
    }

    /// OffsetFetch v9 of a KIP-848 member: it must be in `group` at
    /// `epoch` (STALE_MEMBER_EPOCH otherwise). Other groups are not
    /// checked (a classic member names none). DESCRIBE on the group.
    pub fn check_member_epoch(
        &self,
        group: &str,
        member_id: &str,
        epoch: i32,
    ) -> Result<(), BrokerError> {
        self.allow(Operation::Describe, Resource::group(group))?;
        self.broker()
            .coordinator
            .check_member_epoch(group, member_id, epoch)
    }

    /// LeaveGroup of one member, by id or `group.instance.id`; the group
    /// rebalances without it.
    pub fn leave_group(
        &self,
        group: &str,
        member_id: Option<&str>,
        instance_id: Option<&str>,
    ) -> Result<(), BrokerError> {
        self.broker.check_master()?;
        self.allow(Operation::Read, Resource::group(group))?;
        let broker = self.broker();
        let partitions = |topic: &str| broker.partition_count(topic);
        broker
            .coordinator
            .leave(group, member_id, instance_id, &partitions)
    }

    /// The membership of `group` as the coordinator holds it now; `None`
    /// if it holds no such group (it may still have committed offsets:
    /// [`Door::committed_offsets`]). DESCRIBE on the group.
    pub fn group_snapshot(&self, group: &str) -> Result<Option<GroupSnapshot>, BrokerError> {
        self.allow(Operation::Describe, Resource::group(group))?;
        Ok(self.broker().coordinator.describe(group))
    }

    /// The protocol of `group` without members: that of its latest commit
    /// by a member, as Kafka keeps an emptied group's protocol type
    /// (DescribeGroups of an Empty group).
    pub fn committed_protocol(&self, group: &str) -> Result<Option<ProtocolKind>, BrokerError> {
        self.allow(Operation::Describe, Resource::group(group))?;
        Ok(self.broker().groups.protocol_of(group))
    }

    /// Every group with members or committed offsets that the principal
    /// may describe (Kafka's ListGroups: all of them with DESCRIBE on the
    /// cluster, else those with DESCRIBE on the group).
    pub fn list_groups(&self) -> Vec<GroupSummary> {
        let mut groups = self.broker().list_groups();
        if !self.may(Operation::Describe, Resource::cluster()) {
            groups.retain(|g| self.may(Operation::Describe, Resource::group(&g.group)));
        }
        groups
    }
}

/// The topics a KIP-848 group sees through one member's door: any topic
/// by name (the heartbeat checked the names it brings), and for patterns
/// the names the member's principal may describe, internal topics left
/// out (Kafka's consumers exclude them).
struct Catalog<'a> {
    door: &'a Door,
}

impl TopicCatalog for Catalog<'_> {
    fn topic(&self, name: &str) -> Option<TopicShape> {
        self.door.broker().registry.get(name).map(|t| TopicShape {
            id: t.id,
            partitions: t.partitions.get(),
        })
    }

    fn principal(&self) -> String {
        self.door.who.to_string()
    }

    fn names(&self) -> Vec<String> {
        self.door
            .list_topics()
            .into_iter()
            .filter(|t| !t.is_internal())
            .map(|t| t.name.to_string())
            .collect()
    }
}

/// When a wait bounded by `bound_ms` gives up.
fn deadline(bound_ms: u64) -> Instant {
    Instant::now() + (Duration::from_millis(bound_ms) + WAIT_MARGIN).min(WAIT_MAX)
}

/// Awaits `listener` (the group's next change), `deadline` or shutdown.
async fn wait(
    listener: Option<EventListener>,
    deadline: Instant,
    stop: &mut watch::Receiver<bool>,
) -> Waited {
    if *stop.borrow() {
        return Waited::Stopping;
    }
    let Some(listener) = listener else {
        // The group is gone: the next poll answers why.
        return Waited::Changed;
    };
    tokio::select! {
        _ = listener => Waited::Changed,
        _ = tokio::time::sleep_until(deadline) => Waited::Deadline,
        // Never, once no shutdown can be signalled: the others end it.
        _ = shutdown(stop) => Waited::Stopping,
    }
}

#[cfg(test)]
#[path = "groups_tests.rs"]
mod tests;
