//! What a group is asked and what it answers: the typed requests and
//! outcomes of JoinGroup and SyncGroup, who commits, why a member left,
//! the changes a group reports, and the snapshots describe and list read.
//! Plain data: every rule about them is in the group's other files.

use bytes::Bytes;

use crate::coordinator::member::{MemberAssignment, MemberProtocol, ProtocolKind};

/// Kafka's group states (DescribeGroups spells them this way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
    /// KIP-848 groups: the target assignment is behind the group epoch.
    Assigning,
    /// KIP-848 groups: a member has not reached its target yet.
    Reconciling,
}

impl GroupState {
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
            GroupState::Assigning => "Assigning",
            GroupState::Reconciling => "Reconciling",
        }
    }
}

/// A JoinGroup, from an HTTP instance or a Kafka member.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    /// `None` for a new member (the coordinator makes one up).
    pub member_id: Option<String>,
    /// `group.instance.id` of a static member.
    pub instance_id: Option<String>,
    pub client_id: String,
    pub host: String,
    pub session_timeout_ms: u64,
    /// How long a rebalance waits for this member to rejoin; 0 means the
    /// session timeout (JoinGroup v0 has none).
    pub rebalance_timeout_ms: u64,
    pub protocol: MemberProtocol,
    /// JoinGroup v4+: a new dynamic member is answered MEMBER_ID_REQUIRED
    /// with its id and must join again with it.
    pub require_known_member_id: bool,
    /// A member the server runs itself (an HTTP consumer instance,
    /// `crate::consumers`; HTTP protocol only): it rejoins on its own
    /// behalf whenever a rebalance starts, and its session timeout is the
    /// server's, not bounded by `groups.min/max_session_timeout_ms`.
    pub server_side: bool,
}

/// A member and its metadata for the selected protocol, as the leader sees
/// it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub metadata: Bytes,
}

/// What a completed join answers one member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinResponse {
    pub generation: u32,
    /// The selected protocol: the assignor's name in an HTTP group.
    pub protocol_name: String,
    pub leader_id: String,
    pub member_id: String,
    /// Every member, for the leader of a Kafka group; empty otherwise.
    pub members: Vec<JoinedMember>,
    /// HTTP groups are assigned when the window closes: this member's part.
    pub assignment: Option<MemberAssignment>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JoinOutcome {
    Joined(JoinResponse),
    /// The join window is open: wait for a change of the group, then poll.
    Pending {
        member_id: String,
    },
}

/// A SyncGroup of a Kafka member: the leader's carries every member's
/// assignment, a follower's none.
#[derive(Debug, Clone)]
pub struct SyncRequest {
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub instance_id: Option<String>,
    pub generation: u32,
    /// `(member id, assignment)` of every member, from the leader.
    pub assignments: Option<Vec<(String, Bytes)>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncOutcome {
    Synced(MemberAssignment),
    /// A follower of a Kafka group waiting for the leader's assignment.
    Pending,
}

/// Who commits offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitOrigin<'a> {
    /// A member of the group (HTTP instance, Kafka OffsetCommit with a
    /// generation).
    Member {
        member_id: &'a str,
        instance_id: Option<&'a str>,
        generation: u32,
    },
    /// The ext offsets route, or a Kafka commit with generation −1: only
    /// while the group has no members.
    Stateless,
}

/// Why a member left the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    Left,
    SessionExpired,
    /// Did not rejoin before the join window closed.
    MissedRebalance,
    /// Did not sync before the rebalance timeout (Kafka groups).
    MissedSync,
    /// A static member replaced by a new member with the same instance id.
    Fenced,
}

/// What changed in a group, for metrics, logs and waking waiters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    MemberRemoved {
        member_id: String,
        reason: Removal,
    },
    RebalanceStarted,
    /// The join window closed; HTTP groups are Stable at once.
    JoinCompleted {
        generation: u32,
    },
    Stable {
        generation: u32,
    },
    Empty {
        generation: u32,
    },
}

/// Which protocol a group speaks: one group id is one or the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupType {
    /// JoinGroup and SyncGroup (Kafka members), or HTTP instances.
    Classic,
    /// KIP-848's ConsumerGroupHeartbeat.
    Consumer,
}

impl GroupType {
    /// ListGroups v5's spelling.
    pub fn name(self) -> &'static str {
        match self {
            GroupType::Classic => "classic",
            GroupType::Consumer => "consumer",
        }
    }
}

/// A group as describe and list answer it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSnapshot {
    pub group: String,
    pub group_type: GroupType,
    pub state: GroupState,
    /// `None` without members.
    pub kind: Option<ProtocolKind>,
    /// The selected protocol of the current generation (a KIP-848
    /// group's: its assignor).
    pub protocol: Option<String>,
    /// A KIP-848 group's: its group epoch.
    pub generation: u32,
    pub leader: Option<String>,
    pub members: Vec<MemberSnapshot>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSnapshot {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub host: String,
    /// An HTTP member's topics (a Kafka member's are inside its metadata).
    pub subscription: Vec<String>,
    /// `None` while the group rebalances.
    pub assignment: Option<MemberAssignment>,
    /// What it joined with (a Kafka member's protocol type and each
    /// protocol's metadata, which DescribeGroups answers).
    pub protocol: MemberProtocol,
}
