//! What a join must satisfy before anything of it is stored: every bound
//! on what a client controls (`coordinator::config`), a server-side
//! member's rules, that the joiner is of the group's kind and agrees with
//! the other members (one HTTP assignor; a Kafka protocol type and at least
//! one protocol every member supports), and the protocol a generation
//! selects (Kafka's `selectProtocol`: each member votes for its first
//! shared protocol; ties go to the earlier candidate).

use std::collections::BTreeSet;

use bytes::Bytes;

use super::messages::JoinRequest;
use super::Group;
use crate::coordinator::config::{
    check_len, GroupsConfig, CLIENT_TEXT_MAX_BYTES, INSTANCE_ID_MAX_BYTES, MEMBER_ID_MAX_BYTES,
    MEMBER_METADATA_MAX_BYTES, PROTOCOLS_PER_MEMBER_MAX, PROTOCOL_METADATA_MAX_BYTES,
    SUBSCRIPTION_TOPICS_MAX,
};
use crate::coordinator::member::{Member, MemberProtocol, ProtocolKind};
use crate::error::BrokerError;
use crate::names;

impl Group {
    /// Every bound of a join request, before anything is stored.
    pub(super) fn validate_join(
        &self,
        req: &JoinRequest,
        config: &GroupsConfig,
    ) -> Result<(), BrokerError> {
        check_len(
            "client id length",
            req.client_id.len(),
            CLIENT_TEXT_MAX_BYTES,
        )?;
        check_len("host length", req.host.len(), CLIENT_TEXT_MAX_BYTES)?;
        if let Some(id) = &req.member_id {
            check_len("member id length", id.len(), MEMBER_ID_MAX_BYTES)?;
        }
        if let Some(id) = &req.instance_id {
            check_len("group instance id length", id.len(), INSTANCE_ID_MAX_BYTES)?;
            if id.is_empty() {
                return Err(BrokerError::GroupInstanceIdEmpty);
            }
        }
        // The bounds are on what clients ask for; a server-side member's
        // session is the server's `http.consumer_instance_timeout_ms`
        // (plus a grace, `crate::consumers`), which its own check bounds.
        if req.server_side && req.protocol.kind() != ProtocolKind::Http {
            return Err(BrokerError::ServerSideMemberNotHttp);
        }
        let bounds = if req.server_side {
            1..=u64::MAX
        } else {
            config.min_session_timeout_ms..=config.max_session_timeout_ms
        };
        if !bounds.contains(&req.session_timeout_ms) {
            return Err(BrokerError::InvalidSessionTimeout {
                timeout_ms: req.session_timeout_ms,
                min_ms: config.min_session_timeout_ms,
                max_ms: config.max_session_timeout_ms,
            });
        }
        match &req.protocol {
            MemberProtocol::Http { topics, .. } => {
                check_len("subscription size", topics.len(), SUBSCRIPTION_TOPICS_MAX)?;
                for topic in topics {
                    names::validate_topic_name(topic)?;
                }
            }
            MemberProtocol::Kafka {
                protocol_type,
                protocols,
            } => {
                check_len(
                    "protocol type length",
                    protocol_type.len(),
                    CLIENT_TEXT_MAX_BYTES,
                )?;
                check_len(
                    "protocols of a member",
                    protocols.len(),
                    PROTOCOLS_PER_MEMBER_MAX,
                )?;
                if protocol_type.is_empty() || protocols.is_empty() {
                    return Err(self.inconsistent(
                        "a Kafka member must name a protocol type and at least one protocol".into(),
                    ));
                }
                for (name, metadata) in protocols {
                    check_len("protocol name length", name.len(), CLIENT_TEXT_MAX_BYTES)?;
                    check_len(
                        "protocol metadata bytes",
                        metadata.len(),
                        PROTOCOL_METADATA_MAX_BYTES,
                    )?;
                }
                check_len(
                    "protocol bytes of a member",
                    req.protocol.held_bytes(),
                    MEMBER_METADATA_MAX_BYTES,
                )?;
            }
        }
        self.check_consistent(req)
    }

    /// A joiner must be of the group's kind, and agree with the other
    /// members on the assignor (HTTP) or share a protocol with all of them
    /// (Kafka).
    fn check_consistent(&self, req: &JoinRequest) -> Result<(), BrokerError> {
        let others: Vec<&Member> = self
            .members
            .values()
            .filter(|m| Some(&m.id) != req.member_id.as_ref())
            .collect();
        let Some(first) = others.first() else {
            return Ok(());
        };
        match (&first.protocol, &req.protocol) {
            (
                MemberProtocol::Http { assignor, .. },
                MemberProtocol::Http {
                    assignor: wanted, ..
                },
            ) => {
                if assignor != wanted {
                    return Err(self.inconsistent(format!(
                        "the group's members use the {} assignor, not {}",
                        assignor.name(),
                        wanted.name()
                    )));
                }
            }
            (
                MemberProtocol::Kafka { protocol_type, .. },
                MemberProtocol::Kafka {
                    protocol_type: wanted,
                    protocols,
                },
            ) => {
                if protocol_type != wanted {
                    return Err(self.inconsistent(format!(
                        "the group's protocol type is {protocol_type:?}, not {wanted:?}"
                    )));
                }
                let offered: BTreeSet<&str> = protocols.iter().map(|(n, _)| n.as_str()).collect();
                let shared = others.iter().all(|m| match &m.protocol {
                    MemberProtocol::Kafka { protocols, .. } => {
                        protocols.iter().any(|(n, _)| offered.contains(n.as_str()))
                    }
                    MemberProtocol::Http { .. } => false,
                });
                if !shared || self.candidates(Some(req)).is_empty() {
                    return Err(self.inconsistent(
                        "none of the offered protocols is supported by every member".into(),
                    ));
                }
            }
            (existing, _) => {
                return Err(self.inconsistent(format!(
                    "the group's members are {} consumers; a {} consumer cannot join it",
                    existing.kind().name(),
                    req.protocol.kind().name()
                )));
            }
        }
        Ok(())
    }

    /// Protocol names every Kafka member supports (with `joiner` counted
    /// in place of its old self), in the first member's order.
    fn candidates(&self, joiner: Option<&JoinRequest>) -> Vec<String> {
        let mut sets: Vec<&[(String, Bytes)]> = Vec::new();
        for m in self.members.values() {
            if joiner.is_some_and(|j| j.member_id.as_ref() == Some(&m.id)) {
                continue;
            }
            if let MemberProtocol::Kafka { protocols, .. } = &m.protocol {
                sets.push(protocols);
            }
        }
        if let Some(JoinRequest {
            protocol: MemberProtocol::Kafka { protocols, .. },
            ..
        }) = joiner
        {
            sets.push(protocols);
        }
        let Some(first) = sets.first() else {
            return Vec::new();
        };
        first
            .iter()
            .map(|(n, _)| n.clone())
            .filter(|n| sets.iter().all(|s| s.iter().any(|(m, _)| m == n)))
            .collect()
    }

    /// Kafka's `selectProtocol`: each member votes for the first of its
    /// protocols that all support; most votes wins, ties to the earlier
    /// candidate.
    pub(super) fn select_protocol(&self) -> Option<String> {
        let first = self.members.values().next()?;
        match &first.protocol {
            MemberProtocol::Http { assignor, .. } => Some(assignor.name().to_string()),
            MemberProtocol::Kafka { .. } => {
                let candidates = self.candidates(None);
                let mut votes = vec![0usize; candidates.len()];
                for m in self.members.values() {
                    if let MemberProtocol::Kafka { protocols, .. } = &m.protocol {
                        if let Some(i) = protocols
                            .iter()
                            .find_map(|(n, _)| candidates.iter().position(|c| c == n))
                        {
                            votes[i] += 1;
                        }
                    }
                }
                let best = votes
                    .iter()
                    .enumerate()
                    .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0)))?
                    .0;
                candidates.into_iter().nth(best)
            }
        }
    }
}
