//! The `groups:` section of broker.yaml ([`GroupsConfig`], OPERATIONS.md's
//! defaults written once) and the bounds on everything a client controls in
//! a group, which are constants rather than settings.

use serde::{Deserialize, Serialize};

use crate::error::BrokerError;

/// Members per group (Kafka's `group.max.size` is unbounded by default; the
/// same number as `http.max_consumer_instances`' default, so one group can
/// hold every instance a server allows).
pub const GROUP_MEMBERS_MAX: usize = 1000;
/// Groups the coordinator holds at once (with members or kept empty).
pub const GROUPS_MAX: usize = 10_000;
/// Topics in one member's subscription.
pub const SUBSCRIPTION_TOPICS_MAX: usize = 1000;
/// Protocols one Kafka member offers in a JoinGroup.
pub const PROTOCOLS_PER_MEMBER_MAX: usize = 16;
/// A Kafka member's metadata for one protocol (its subscription, encoded).
pub const PROTOCOL_METADATA_MAX_BYTES: usize = 64 * 1024;
/// A Kafka member's protocol names and metadata together: a consumer
/// offers one protocol per assignor (librdkafka and the Java client two
/// or three), each a subscription plus the sticky assignors' previous
/// assignment, a few KiB; 16 protocols of 64 KiB each (1 MiB a member)
/// is no client's, only a way to make the server hold memory.
pub const MEMBER_METADATA_MAX_BYTES: usize = 256 * 1024;
/// `groups.max_member_metadata_bytes` default: 128 MiB, room for the
/// 1000 members of a full group at 128 KiB each.
pub const MAX_MEMBER_METADATA_BYTES_DEFAULT: u64 = 128 << 20;
/// One member's assignment relayed from the leader.
pub const ASSIGNMENT_MAX_BYTES: usize = 1 << 20;
/// `client.id`, host, protocol type and protocol names.
pub const CLIENT_TEXT_MAX_BYTES: usize = 255;
/// `group.instance.id`: Kafka bounds it as a topic name.
pub const INSTANCE_ID_MAX_BYTES: usize = 249;
/// Partitions one KIP-848 heartbeat may say its member owns.
pub const OWNED_PARTITIONS_MAX: usize = 100_000;
/// A member id a client sends back: `<client id>-<36-character suffix>`.
pub const MEMBER_ID_MAX_BYTES: usize = CLIENT_TEXT_MAX_BYTES + 1 + 36;

/// A KIP-848 group's own timeouts (its group configs,
/// `crate::dynamic_configs`), each in place of the broker's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupTimeouts {
    pub session_timeout_ms: Option<u64>,
    pub heartbeat_interval_ms: Option<u64>,
}

impl GroupTimeouts {
    /// Whether the group has neither of its own.
    pub fn is_empty(&self) -> bool {
        self.session_timeout_ms.is_none() && self.heartbeat_interval_ms.is_none()
    }

    /// The broker's `config` with the group's own timeouts in place.
    pub fn over(&self, config: &GroupsConfig) -> GroupsConfig {
        let mut out = config.clone();
        if let Some(ms) = self.session_timeout_ms {
            out.consumer_session_timeout_ms = ms;
        }
        if let Some(ms) = self.heartbeat_interval_ms {
            out.consumer_heartbeat_interval_ms = ms;
        }
        out
    }
}

/// `groups:` in broker.yaml.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GroupsConfig {
    /// Offsets of a group without members expire this long after its last
    /// commit (or after it became empty, whichever is later).
    pub offsets_retention_minutes: u64,
    /// The first rebalance of an empty group waits this long for more
    /// members (Kafka's `group.initial.rebalance.delay.ms`).
    pub initial_rebalance_delay_ms: u64,
    pub min_session_timeout_ms: u64,
    /// Kafka's `group.max.session.timeout.ms` default (30 min since Kafka
    /// 2.3): clients that ask for long sessions (Kafka Streams) keep
    /// working; what a member holds meanwhile is bounded by
    /// `max_member_metadata_bytes`, not by time.
    pub max_session_timeout_ms: u64,
    /// Bytes of member metadata held in all groups together (Kafka
    /// members' protocols, HTTP instances' subscriptions, the leaders'
    /// relayed assignments). A join or sync that would pass it is refused
    /// (Kafka: GROUP_MAX_SIZE_REACHED; HTTP: 429/42901).
    pub max_member_metadata_bytes: u64,
    /// KIP-848 groups: a member without a heartbeat for this long is
    /// removed (Kafka's `group.consumer.session.timeout.ms`).
    pub consumer_session_timeout_ms: u64,
    /// KIP-848 groups: how often members heartbeat, and so how soon they
    /// learn of a new assignment (Kafka's
    /// `group.consumer.heartbeat.interval.ms`).
    pub consumer_heartbeat_interval_ms: u64,
}

impl Default for GroupsConfig {
    fn default() -> Self {
        GroupsConfig {
            offsets_retention_minutes: 10_080,
            initial_rebalance_delay_ms: 3000,
            min_session_timeout_ms: 6000,
            max_session_timeout_ms: 1_800_000,
            max_member_metadata_bytes: MAX_MEMBER_METADATA_BYTES_DEFAULT,
            consumer_session_timeout_ms: 45_000,
            consumer_heartbeat_interval_ms: 5_000,
        }
    }
}

impl GroupsConfig {
    /// The one check of these settings; `key` of the error is the path in
    /// broker.yaml.
    pub fn validate(&self) -> Result<(), BrokerError> {
        let bad = |key: &str, reason: String| BrokerError::InvalidConfig {
            key: format!("groups.{key}"),
            reason,
        };
        if self.offsets_retention_minutes == 0 {
            return Err(bad(
                "offsets_retention_minutes",
                "must be at least 1".into(),
            ));
        }
        // Minutes to milliseconds must not overflow.
        if self.offsets_retention_minutes > u64::MAX / 60_000 {
            return Err(bad(
                "offsets_retention_minutes",
                format!("must be at most {}", u64::MAX / 60_000),
            ));
        }
        if self.min_session_timeout_ms == 0 {
            return Err(bad("min_session_timeout_ms", "must be at least 1".into()));
        }
        if self.max_session_timeout_ms < self.min_session_timeout_ms {
            return Err(bad(
                "max_session_timeout_ms",
                format!(
                    "{} is below min_session_timeout_ms ({})",
                    self.max_session_timeout_ms, self.min_session_timeout_ms
                ),
            ));
        }
        // At least one member of the largest size fits.
        if self.consumer_heartbeat_interval_ms == 0
            || self.consumer_heartbeat_interval_ms >= self.consumer_session_timeout_ms
        {
            return Err(bad(
                "consumer_heartbeat_interval_ms",
                format!(
                    "must be at least 1 and below consumer_session_timeout_ms ({})",
                    self.consumer_session_timeout_ms
                ),
            ));
        }
        if self.consumer_session_timeout_ms > i32::MAX as u64 {
            return Err(bad(
                "consumer_session_timeout_ms",
                format!("must be at most {}", i32::MAX),
            ));
        }
        let least = MEMBER_METADATA_MAX_BYTES as u64;
        if self.max_member_metadata_bytes < least {
            return Err(bad(
                "max_member_metadata_bytes",
                format!("must be at least {least} (one member's largest metadata)"),
            ));
        }
        Ok(())
    }

    pub fn offsets_retention_ms(&self) -> u64 {
        self.offsets_retention_minutes.saturating_mul(60_000)
    }
}

/// Refuses a client-controlled size over its bound.
pub(crate) fn check_len(what: &'static str, len: usize, max: usize) -> Result<(), BrokerError> {
    if len > max {
        return Err(BrokerError::GroupLimit { what, len, max });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_config_md_and_valid() {
        let config = GroupsConfig::default();
        assert_eq!(config.offsets_retention_minutes, 10_080);
        assert_eq!(config.initial_rebalance_delay_ms, 3000);
        config.validate().unwrap();
        assert_eq!(config.offsets_retention_ms(), 7 * 24 * 3600 * 1000);
    }

    #[test]
    fn refuses_inverted_session_bounds_and_zero_retention() {
        let config = GroupsConfig {
            max_session_timeout_ms: 10,
            ..GroupsConfig::default()
        };
        assert!(
            matches!(config.validate(), Err(BrokerError::InvalidConfig { key, .. }) if key == "groups.max_session_timeout_ms")
        );
        let config = GroupsConfig {
            offsets_retention_minutes: 0,
            ..GroupsConfig::default()
        };
        assert!(
            matches!(config.validate(), Err(BrokerError::InvalidConfig { key, .. }) if key == "groups.offsets_retention_minutes")
        );
    }
}
