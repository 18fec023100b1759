//! What the config APIs share: Kafka's resource types and config
//! sources, and one resource's alter (DescribeConfigs,
//! IncrementalAlterConfigs, AlterConfigs).
//!
//! A topic's configs are the HTTP admin API's (`topic_config`): the same
//! names, values, validation and persistence (`Broker::alter_topic`, all
//! or nothing per topic). The broker's dynamic configs (resource `"0"`, a
//! cluster's node its own id as Metadata names it, or
//! `""` for the cluster-wide default) and a group's (KIP-848's) are
//! `dynamic_configs`' (`Door::alter_dynamic_configs`), all or nothing per
//! resource too. What the request asks ([`Asked`]) becomes changes from
//! the resource's values as they are under its lock, so two alters at
//! once (an APPEND and a SUBTRACT) never lose one.

use std::collections::BTreeMap;

use kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig;
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::dynamic_configs::{Scope, Source, Values};
use tidelog_broker::error::ConfigOperationProblem;
use tidelog_broker::registry::{ChangesOf, Topic};
use tidelog_broker::topic_config::ValueSource;
use tidelog_broker::{BrokerError, Door};

use super::admin;
use crate::context::Context;
use crate::error::Refusal;

/// Kafka's `ConfigResource.Type`.
pub const TOPIC: i8 = 2;
pub const BROKER: i8 = 4;
pub const GROUP: i8 = 32;

/// Kafka's `ConfigSource`.
pub const SOURCE_TOPIC: i8 = 1;
pub const SOURCE_DYNAMIC_BROKER: i8 = 2;
pub const SOURCE_DYNAMIC_DEFAULT_BROKER: i8 = 3;
pub const SOURCE_STATIC_BROKER: i8 = 4;
pub const SOURCE_DEFAULT: i8 = 5;
pub const SOURCE_GROUP: i8 = 8;

/// The `ConfigSource` of a topic config's value.
pub fn source_code(source: ValueSource) -> i8 {
    match source {
        ValueSource::DynamicTopicConfig => SOURCE_TOPIC,
        ValueSource::DynamicBrokerConfig => SOURCE_DYNAMIC_BROKER,
        ValueSource::DynamicDefaultBrokerConfig => SOURCE_DYNAMIC_DEFAULT_BROKER,
        ValueSource::DefaultConfig => SOURCE_DEFAULT,
    }
}

/// The `ConfigSource` of a broker or group config's value.
pub fn dynamic_source_code(source: Source) -> i8 {
    match source {
        Source::DynamicBroker => SOURCE_DYNAMIC_BROKER,
        Source::DynamicDefaultBroker => SOURCE_DYNAMIC_DEFAULT_BROKER,
        Source::StaticBroker => SOURCE_STATIC_BROKER,
        Source::Default => SOURCE_DEFAULT,
        Source::Group => SOURCE_GROUP,
    }
}

/// IncrementalAlterConfigs' operations.
const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

/// What one resource's alter asks.
#[derive(Debug, Clone)]
pub enum Asked {
    /// AlterConfigs: these values (a null one removes it) and no others.
    Replace(Vec<(String, Option<String>)>),
    /// IncrementalAlterConfigs: SET, DELETE, APPEND, SUBTRACT.
    Incremental(Vec<AlterableConfig>),
}

/// A resource's answer's error code and message (0 and none for success).
pub fn error_parts(outcome: Result<(), Refusal>) -> (i16, Option<StrBytes>) {
    match outcome {
        Ok(()) => (0, None),
        Err(refusal) => (
            refusal.code(),
            Some(StrBytes::from_string(refusal.to_string())),
        ),
    }
}

/// The broker or group configs a resource names; `None` for a topic. A
/// broker is this node, by its Kafka broker id (`own_id`: 0 alone, its
/// node id in a cluster, as Metadata names it).
pub fn dynamic_scope(resource_type: i8, name: &str, own_id: i32) -> Result<Option<Scope>, Refusal> {
    match resource_type {
        TOPIC => Ok(None),
        BROKER if name.is_empty() => Ok(Some(Scope::ClusterDefault)),
        BROKER if name.parse::<i32>() == Ok(own_id) => Ok(Some(Scope::Broker)),
        BROKER => Err(Refusal::UnknownBroker {
            name: name.to_owned(),
        }),
        GROUP => Ok(Some(Scope::Group(name.to_owned()))),
        other => Err(Refusal::UnknownResourceType {
            resource_type: other,
        }),
    }
}

/// Alters one resource as `asked`, all or nothing, or only checks it when
/// `validate_only`: a topic's configs (`Door::alter_topic`) or a broker's
/// or group's (`Door::alter_dynamic_configs`). The changes are computed
/// again from the values under the resource's lock; the first
/// computation, on the values as they are now, answers a malformed
/// request's refusal with its own code.
pub async fn alter(
    ctx: &Context,
    gate: admin::Gate,
    resource_type: i8,
    name: &str,
    validate_only: bool,
    asked: Asked,
) -> Result<(), Refusal> {
    let own_id = super::cluster::Nodes::of(ctx.door().as_ref()).own_id();
    let scope = dynamic_scope(resource_type, name, own_id)?;
    let admin_resource = match &scope {
        None => admin::TOPIC,
        Some(Scope::Group(_)) => admin::GROUP,
        Some(_) => admin::CLUSTER,
    };
    if let Some(refusal) = gate.refusal(admin_resource) {
        return Err(refusal);
    }
    let door: Door = ctx.door().ok_or(Refusal::NotReady)?;
    match scope {
        None => alter_topic(&door, name, validate_only, asked).await,
        Some(scope) => {
            let list = match scope {
                Scope::Group(_) => None,
                _ => Some(BROKER_LIST_CONFIG),
            };
            let current = door.dynamic_values(&scope)?;
            // The value an APPEND or SUBTRACT of the list config starts
            // from when the resource has none: the cleanup policy topics
            // follow now.
            let defaults = door.topic_defaults();
            let policy_now = defaults
                .get(TOPIC_LIST_CONFIG)
                .cloned()
                .unwrap_or_else(|| "delete".to_owned());
            let changes_of = move |values: &Values| {
                changes(&asked, values, list.map(|l| (l, policy_now.clone())))
            };
            changes_of(&current)?;
            door.alter_dynamic_configs(scope, Box::new(changes_of), validate_only)
                .await?;
            Ok(())
        }
    }
}

async fn alter_topic(
    door: &Door,
    name: &str,
    validate_only: bool,
    asked: Asked,
) -> Result<(), Refusal> {
    // DESCRIBE_CONFIGS, which ALTER_CONFIGS implies: the alter's own
    // check follows in `alter_topic`.
    let topic = door.topic_configs(name)?;
    let changes_of = move |topic: &Topic| {
        let policy_now = topic.config.cleanup_policy.as_str().to_owned();
        changes(
            &asked,
            &topic.overrides,
            Some((TOPIC_LIST_CONFIG, policy_now)),
        )
    };
    let now = changes_of(&topic)?;
    let changes_of: Box<ChangesOf<'static>> = if validate_only {
        Box::new(move |_| Ok(now.clone()))
    } else {
        // What fails here failed above already (a malformed request fails
        // whatever the topic holds).
        Box::new(changes_of)
    };
    door.alter_topic(name, changes_of, validate_only).await?;
    if !validate_only {
        tracing::info!(topic = %name, "altered topic configs over Kafka");
    }
    Ok(())
}

/// The one list config of a topic, and its broker-wide default.
const TOPIC_LIST_CONFIG: &str = "cleanup.policy";
const BROKER_LIST_CONFIG: &str = "log.cleanup.policy";

/// The changes `asked` makes to a resource whose own values are `own`
/// (`None` removes one). AlterConfigs' replacement removes every value it
/// does not name. APPEND and SUBTRACT work on `list`, the resource's one
/// list config (with the value it has when `own` has none); on any other
/// config they are INVALID_REQUEST, as Kafka answers them for a non-list
/// config.
fn changes(
    asked: &Asked,
    own: &BTreeMap<String, String>,
    list: Option<(&'static str, String)>,
) -> Result<Vec<(String, Option<String>)>, BrokerError> {
    let configs = match asked {
        Asked::Replace(named) => {
            let mut changes: Vec<(String, Option<String>)> = own
                .keys()
                .filter(|k| !named.iter().any(|(n, _)| n == *k))
                .map(|k| (k.clone(), None))
                .collect();
            changes.extend(named.iter().cloned());
            return Ok(changes);
        }
        Asked::Incremental(configs) => configs,
    };
    let mut changes: Vec<(String, Option<String>)> = Vec::with_capacity(configs.len());
    for c in configs {
        let name = c.name.to_string();
        let value = c.value.as_ref().map(|v| v.to_string());
        let change = match c.config_operation {
            SET => Some(value.ok_or_else(|| BrokerError::InvalidConfigOperation {
                name: name.clone(),
                problem: ConfigOperationProblem::SetWithoutValue,
            })?),
            DELETE => None,
            APPEND | SUBTRACT => {
                let Some((list_config, now)) = list.as_ref().filter(|(l, _)| *l == name) else {
                    return Err(BrokerError::InvalidConfigOperation {
                        name,
                        problem: ConfigOperationProblem::NotAList {
                            list_config: list.as_ref().map_or(TOPIC_LIST_CONFIG, |(l, _)| l),
                        },
                    });
                };
                // The value so far in this request, else the resource's.
                let current = changes
                    .iter()
                    .rev()
                    .find(|(n, _)| n == list_config)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_else(|| own.get(*list_config).cloned());
                let current = current.unwrap_or_else(|| now.clone());
                Some(edit_list(
                    &current,
                    value.as_deref().unwrap_or(""),
                    c.config_operation == APPEND,
                ))
            }
            other => {
                return Err(BrokerError::InvalidConfigOperation {
                    name,
                    problem: ConfigOperationProblem::UnknownOperation { operation: other },
                })
            }
        };
        changes.push((name, change));
    }
    Ok(changes)
}

/// `current`'s comma-separated items with `items`' appended (each once)
/// or removed; the result is validated by the alter like any value.
fn edit_list(current: &str, items: &str, append: bool) -> String {
    let mut list: Vec<&str> = current
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    for item in items.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if append {
            if !list.contains(&item) {
                list.push(item);
            }
        } else {
            list.retain(|s| *s != item);
        }
    }
    list.join(",")
}
