//! What the broker is configured with ([`BrokerConfig`]): the cluster id,
//! auto-create and its partition count, and the topics declared in the
//! config file. OPERATIONS.md's defaults are written here once, in `Default`,
//! and [`BrokerConfig::validate`] is their one check.
//!
//! These are top-level keys of broker.yaml (`cluster_id`,
//! `auto_create_topics`, `default_partitions`, `topics`), not a section of
//! their own: the server lists them in its file schema (serde's `flatten`
//! cannot be combined with `deny_unknown_fields` and loses the key paths of
//! its errors) and hands them here. A declared topic entry ([`TopicDecl`])
//! deserializes as OPERATIONS.md writes it. The `groups:` section is the
//! coordinator's own type ([`GroupsConfig`], its defaults and its check),
//! carried here so the broker gets it the way it gets the other keys.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

use crate::coordinator::GroupsConfig;
use crate::error::BrokerError;
use crate::names;
use crate::registry::check_partitions;
use crate::settings::DeclaredTopic;
use crate::topic_config::{self, Overrides, TopicConfig};

/// The broker's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerConfig {
    /// The cluster id of the v3 API (`/v3/clusters/<id>`).
    pub cluster_id: String,
    /// Produce to an unknown topic creates it with `default_partitions`
    /// instead of answering 40401.
    pub auto_create_topics: bool,
    /// Partitions of a topic created without a count (auto-create, a v3
    /// create without `partitions_count`, a declared topic without
    /// `partitions`).
    pub default_partitions: u32,
    /// Created at start if absent; their configs applied if present.
    pub topics: Vec<TopicDecl>,
    /// `groups:`, the group coordinator's section (checked by its own
    /// [`GroupsConfig::validate`], from [`BrokerConfig::validate`]).
    pub groups: GroupsConfig,
    /// `tiered:`, the remote tier's section (tidelog-tiered's own type and
    /// check, carried here like `groups:`); off unless `url` is set.
    pub tiered: tidelog_tiered::TieredConfig,
    /// `security:`, access control's section (tidelog-security's own type
    /// and check, carried here like `groups:`): logins, ACLs, users.
    pub security: tidelog_security::config::SecurityConfig,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            cluster_id: "tidelog".into(),
            auto_create_topics: false,
            default_partitions: 4,
            topics: Vec::new(),
            groups: GroupsConfig::default(),
            tiered: tidelog_tiered::TieredConfig::default(),
            security: tidelog_security::config::SecurityConfig::default(),
        }
    }
}

/// A topic declared in the config file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicDecl {
    pub name: String,
    /// `None` in the file: `default_partitions` (filled in by
    /// [`BrokerConfig::validate`]).
    #[serde(default)]
    pub partitions: Option<u32>,
    /// Kafka topic config name → value, canonical after validation.
    #[serde(default)]
    pub configs: BTreeMap<String, ConfigValue>,
}

impl TopicDecl {
    /// The declared configs as an overrides map.
    pub fn overrides(&self) -> Overrides {
        self.configs
            .iter()
            .map(|(name, value)| (name.clone(), value.0.clone()))
            .collect()
    }
}

/// A topic config value as a string, the form the API and storage use.
/// YAML numbers and booleans are accepted (`delete.retention.ms: 86400000`)
/// and turned into their text; lists and maps are type errors that serde
/// reports at the value's own path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct ConfigValue(pub String);

impl<'de> Deserialize<'de> for ConfigValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = ConfigValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or a number")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ConfigValue, E> {
                Ok(ConfigValue(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<ConfigValue, E> {
                Ok(ConfigValue(v.to_string()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<ConfigValue, E> {
                Ok(ConfigValue(v.to_string()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<ConfigValue, E> {
                Ok(ConfigValue(v.to_string()))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<ConfigValue, E> {
                Ok(ConfigValue(v.to_string()))
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl BrokerConfig {
    /// Range, name and topic config checks, with the rules the broker
    /// applies to the same values over the API (`names`, `check_partitions`,
    /// `topic_config`). Fills in each declared topic's partitions and puts
    /// its config values in canonical form. The error is
    /// [`BrokerError::InvalidConfig`] naming the key as a dotted path
    /// (`topics[1].configs.cleanup.policy`; indices count from 0).
    pub fn validate(&mut self) -> Result<(), BrokerError> {
        let bad = |key: String, reason: String| BrokerError::InvalidConfig { key, reason };
        if self.cluster_id.is_empty()
            || self
                .cluster_id
                .chars()
                .any(|c| c.is_control() || c.is_whitespace())
        {
            return Err(bad(
                "cluster_id".into(),
                format!(
                    "{:?} must be non-empty, without spaces or control characters",
                    self.cluster_id
                ),
            ));
        }
        check_partitions(self.default_partitions)
            .map_err(|e| bad("default_partitions".into(), reason(e)))?;
        self.security
            .validate()
            .map_err(|e| bad(format!("security.{}", e.key), e.reason))?;
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for (i, topic) in self.topics.iter_mut().enumerate() {
            let key = |field: &str| format!("topics[{i}].{field}");
            names::validate_topic_name(&topic.name).map_err(|e| bad(key("name"), reason(e)))?;
            if let Some(first) = seen.insert(topic.name.clone(), i) {
                return Err(bad(
                    key("name"),
                    format!(
                        "topic {:?} is already declared at topics[{first}]",
                        topic.name
                    ),
                ));
            }
            let partitions = topic.partitions.unwrap_or(self.default_partitions);
            check_partitions(partitions).map_err(|e| bad(key("partitions"), reason(e)))?;
            topic.partitions = Some(partitions);

            for (name, value) in topic.configs.iter_mut() {
                value.0 = topic_config::validate(name, &value.0)
                    .map_err(|e| bad(key(&format!("configs.{name}")), reason(e)))?;
            }
            if let Err(e) = TopicConfig::from_overrides(&topic.overrides()) {
                let name = match &e {
                    BrokerError::InvalidTopicConfig { name, .. } => name.clone(),
                    _ => String::new(),
                };
                return Err(bad(key(&format!("configs.{name}")), reason(e)));
            }
            if let Err(e) = check_tiered_allowed(&topic.overrides(), self.tiered.enabled()) {
                return Err(bad(key("configs.remote.storage.enable"), reason(e)));
            }
        }
        self.groups.validate()?;
        self.tiered
            .validate()
            .map_err(|e| bad("tiered".into(), e.to_string()))?;
        Ok(())
    }

    /// The declared topics as the broker opens them (after
    /// [`BrokerConfig::validate`]; a topic without a count gets
    /// `default_partitions`).
    pub fn declared_topics(&self) -> Vec<DeclaredTopic> {
        self.topics
            .iter()
            .map(|t| DeclaredTopic {
                name: t.name.clone(),
                partitions: t.partitions.unwrap_or(self.default_partitions),
                overrides: t.overrides(),
            })
            .collect()
    }
}

/// 40002 for `remote.storage.enable=true` on a server without a remote
/// tier (Kafka refuses it while `remote.log.storage.system.enable` is off).
pub fn check_tiered_allowed(overrides: &Overrides, tiered: bool) -> Result<(), BrokerError> {
    if !tiered
        && overrides
            .get("remote.storage.enable")
            .is_some_and(|v| v == "true")
    {
        return Err(BrokerError::InvalidTopicConfig {
            name: "remote.storage.enable".into(),
            reason: "tiered storage is off on this server: set tiered.url in the config file to enable remote storage".into(),
        });
    }
    Ok(())
}

/// The reason part of a validation error (the key is the caller's to name).
fn reason(e: BrokerError) -> String {
    match e {
        BrokerError::InvalidName { reason, .. }
        | BrokerError::InvalidTopicConfig { reason, .. }
        | BrokerError::InvalidConfig { reason, .. } => reason,
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(config: &mut BrokerConfig) -> (String, String) {
        match config.validate() {
            Err(BrokerError::InvalidConfig { key, reason }) => (key, reason),
            other => panic!("expected InvalidConfig, got {other:?}"),
        }
    }

    fn topic(name: &str, configs: &[(&str, &str)]) -> TopicDecl {
        TopicDecl {
            name: name.into(),
            partitions: None,
            configs: configs
                .iter()
                .map(|(k, v)| (k.to_string(), ConfigValue(v.to_string())))
                .collect(),
        }
    }

    /// The rules are the broker's own: a name the registry refuses, a
    /// partition count `check_partitions` refuses, a config value
    /// `topic_config::validate` refuses, each named by its key.
    #[test]
    fn validate_names_the_key_and_uses_the_brokers_rules() {
        let mut c = BrokerConfig {
            cluster_id: "a b".into(),
            ..BrokerConfig::default()
        };
        assert_eq!(refused(&mut c).0, "cluster_id");
        let mut c = BrokerConfig {
            default_partitions: 0,
            ..BrokerConfig::default()
        };
        let (key, why) = refused(&mut c);
        assert_eq!(key, "default_partitions");
        assert_eq!(why, reason(check_partitions(0).unwrap_err()));
        let mut c = BrokerConfig {
            topics: vec![topic("a", &[]), topic("../x", &[])],
            ..BrokerConfig::default()
        };
        let (key, why) = refused(&mut c);
        assert_eq!(key, "topics[1].name");
        assert_eq!(why, reason(names::validate_topic_name("../x").unwrap_err()));
        let mut c = BrokerConfig {
            topics: vec![topic("a", &[]), topic("a", &[])],
            ..BrokerConfig::default()
        };
        assert_eq!(refused(&mut c).0, "topics[1].name");
        let mut c = BrokerConfig {
            topics: vec![topic("a", &[("cleanup.policy", "purge")])],
            ..BrokerConfig::default()
        };
        let (key, why) = refused(&mut c);
        assert_eq!(key, "topics[0].configs.cleanup.policy");
        assert_eq!(
            why,
            reason(topic_config::validate("cleanup.policy", "purge").unwrap_err())
        );
    }

    #[test]
    fn validate_fills_partitions_and_canonicalizes() {
        let mut c = BrokerConfig {
            default_partitions: 3,
            topics: vec![topic("t", &[("cleanup.policy", "delete, compact")])],
            ..BrokerConfig::default()
        };
        c.validate().unwrap();
        assert_eq!(c.topics[0].partitions, Some(3));
        assert_eq!(c.topics[0].configs["cleanup.policy"].0, "compact,delete");
        let declared = c.declared_topics();
        assert_eq!(declared[0].partitions, 3);
        assert_eq!(
            declared[0]
                .overrides
                .get("cleanup.policy")
                .map(String::as_str),
            Some("compact,delete")
        );
    }
}
