//! Configs set at run time over Kafka's config APIs, as Kafka keeps them in
//! its metadata: a broker's dynamic configs, for this broker (resource
//! `"0"`) or as the cluster-wide default (resource `""`), and the group
//! configs of KIP-848 groups (Kafka 4.0's `GROUP` resource).
//!
//! What each broker config does is the catalogue's ([`catalogue`]): the
//! `log.*` topic defaults become the value of every topic without one of
//! its own, live (`TopicRegistry::set_defaults`); the rest are accepted
//! without effect, or refused where tidelog reads its counterpart from
//! broker.yaml. A group's `consumer.session.timeout.ms` and
//! `consumer.heartbeat.interval.ms` replace the broker's for that group
//! (`Coordinator::set_group_timeouts`), within the broker's session bounds.
//! Kafka's precedence: this broker's value, else the cluster-wide
//! default, else broker.yaml or Kafka's default.
//!
//! Persisted as one JSON file, `<data_dir>/config/dynamic.json`, replaced
//! atomically like the topic registry, durable before an alter answers and
//! before the change takes effect: what a client was told is set is what
//! the next start reads. Every value in it is checked again at load.
//!
//! Locks: `state` serialises alters and is taken before the registry's
//! write lock (a change of topic defaults re-resolves every topic under
//! it); nothing that holds the registry's lock takes `state`.

pub mod catalogue;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use crate::coordinator::config::{GroupTimeouts, GroupsConfig, GROUPS_MAX};
use crate::error::{BrokerError, DynamicConfigProblem};
use crate::names;
use crate::topic_config::{self, Defaults};
use catalogue::{
    broker_spec, topic_default_of, BrokerEffect, ValueKind, BROKER_CONFIGS, GROUP_CONFIGS,
    GROUP_HEARTBEAT_INTERVAL, GROUP_SESSION_TIMEOUT,
};

/// The file, in the config directory beside `topics.json`.
pub const DYNAMIC_FILE: &str = "dynamic.json";
const VERSION: u32 = 1;
/// Far above what any real set of configs takes; refuses a damaged file
/// before parsing it.
const FILE_MAX_BYTES: u64 = 64 << 20;
/// Groups with configs of their own: as many as the coordinator holds.
pub const CONFIGURED_GROUPS_MAX: usize = GROUPS_MAX;
/// One value, at most (a principal-mapping rule list is the longest).
const VALUE_MAX_BYTES: usize = 4096;

/// Config name → canonical value.
pub type Values = BTreeMap<String, String>;

/// The changes an alter makes (`None` removes a value), computed from the
/// resource's values as they are under the lock.
pub type ChangesOfValues<'a> =
    dyn Fn(&Values) -> Result<Vec<(String, Option<String>)>, BrokerError> + Send + Sync + 'a;

/// Makes an alter take effect: what changes, and the call that makes it
/// durable ([`DynamicConfigs::alter`]).
pub type Apply<'a> = dyn FnMut(&Altered, &mut Persist<'_>) -> Result<(), BrokerError> + 'a;

/// Makes a change durable.
pub type Persist<'a> = dyn FnMut() -> Result<(), BrokerError> + 'a;

/// Whose configs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every broker's (Kafka's resource name `""`).
    ClusterDefault,
    /// This broker's (resource name `"0"`).
    Broker,
    /// A consumer group's.
    Group(String),
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scope::ClusterDefault => f.write_str("the cluster-wide broker default"),
            Scope::Broker => f.write_str("broker 0"),
            Scope::Group(g) => write!(f, "group {g:?}"),
        }
    }
}

/// Where a described value comes from (Kafka's `ConfigSource`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    DynamicBroker,
    DynamicDefaultBroker,
    StaticBroker,
    Default,
    Group,
}

/// One described config.
#[derive(Debug, Clone, PartialEq)]
pub struct Described {
    pub name: String,
    pub value: String,
    pub source: Source,
    pub read_only: bool,
    /// The values beneath it, most precedent first (Kafka's synonyms).
    pub synonyms: Vec<(String, String, Source)>,
    /// Why a config accepted here has no effect.
    pub without_effect: Option<&'static str>,
    /// Kafka's type: `Integer`, `Decimal` or `Text` for the accepted ones;
    /// a topic default's is its topic config's.
    pub kind: DescribedKind,
}

/// The type DescribeConfigs answers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DescribedKind {
    Topic(&'static topic_config::ConfigSpec),
    Value(ValueKind),
    Boolean,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    version: u32,
    #[serde(default)]
    cluster_default: Values,
    #[serde(default)]
    broker: Values,
    #[serde(default)]
    groups: BTreeMap<String, Values>,
}

impl Stored {
    fn values(&self, scope: &Scope) -> Values {
        match scope {
            Scope::ClusterDefault => self.cluster_default.clone(),
            Scope::Broker => self.broker.clone(),
            Scope::Group(g) => self.groups.get(g).cloned().unwrap_or_default(),
        }
    }

    /// The topic defaults the broker configs make: this broker's over the
    /// cluster-wide ones, keyed by topic config.
    fn topic_defaults(&self) -> Defaults {
        let mut out = Defaults::new();
        for (values, this_broker) in [(&self.cluster_default, false), (&self.broker, true)] {
            for (name, value) in values {
                if let Some(BrokerEffect::TopicDefault { topic_config }) =
                    broker_spec(name).map(|s| s.effect)
                {
                    out.values.insert(topic_config.to_owned(), value.clone());
                    if this_broker {
                        out.this_broker.insert(topic_config.to_owned());
                    }
                }
            }
        }
        out
    }
}

/// What an alter changes, handed to the caller to make it take effect.
#[derive(Debug, Clone, PartialEq)]
pub struct Altered {
    /// The topic defaults after the alter, when they change.
    pub topic_defaults: Option<Defaults>,
    /// The group and its timeouts after the alter (a group alter).
    pub group: Option<(String, GroupTimeouts)>,
}

/// The dynamic configs and their file.
pub struct DynamicConfigs {
    path: PathBuf,
    state: Mutex<Stored>,
    /// Hands the file's next bytes to the cluster's metadata log before
    /// they are written (`crate::cluster_metadata`).
    publish: crate::cluster_metadata::hook::Hook,
}

impl std::fmt::Debug for DynamicConfigs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamicConfigs")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl DynamicConfigs {
    /// Loads `<config_dir>/dynamic.json` (none: nothing set), every value
    /// checked as an alter checks it against `groups`. Blocking.
    pub fn load(config_dir: &Path, groups: &GroupsConfig) -> Result<Self, BrokerError> {
        let path = config_dir.join(DYNAMIC_FILE);
        let file_err = |reason: String| BrokerError::DynamicConfigsFile {
            path: path.clone(),
            reason,
        };
        tidelog_storage::fs_util::create_dir_durable(config_dir)
            .map_err(|e| file_err(e.to_string()))?;
        let bytes = tidelog_storage::fs_util::read_small(&path, FILE_MAX_BYTES)
            .map_err(|e| file_err(e.to_string()))?;
        let stored = match bytes {
            None => Stored {
                version: VERSION,
                ..Stored::default()
            },
            Some(bytes) => {
                let stored: Stored = serde_json::from_slice(&bytes)
                    .map_err(|e| file_err(format!("not a dynamic config file: {e}")))?;
                if stored.version != VERSION {
                    return Err(file_err(format!(
                        "version {} is not the supported {VERSION}",
                        stored.version
                    )));
                }
                check_stored(&stored, groups).map_err(|e| file_err(e.to_string()))?;
                stored
            }
        };
        Ok(DynamicConfigs {
            path,
            state: Mutex::new(stored),
            publish: crate::cluster_metadata::hook::Hook::default(),
        })
    }

    /// From now on every change hands the file's whole next bytes to
    /// `publish` before writing them, and is refused if it fails. Set
    /// once.
    pub(crate) fn set_publisher(
        &self,
        publish: std::sync::Arc<crate::cluster_metadata::hook::Publish>,
    ) {
        self.publish.set(publish);
    }

    /// Replaces the configs with a dynamic config file's `bytes` from the
    /// cluster's master (`crate::cluster_metadata`), checked as
    /// [`DynamicConfigs::load`] checks the file against `groups`, written
    /// as an alter writes it (not published). Returns the topic defaults
    /// they make, for the registry to follow. Blocking.
    pub(crate) fn install(
        &self,
        bytes: &[u8],
        groups: &GroupsConfig,
    ) -> Result<Defaults, BrokerError> {
        let file_err = |reason: String| BrokerError::DynamicConfigsFile {
            path: self.path.clone(),
            reason,
        };
        if bytes.len() as u64 > FILE_MAX_BYTES {
            return Err(file_err(format!(
                "{} bytes, more than the {FILE_MAX_BYTES} read",
                bytes.len()
            )));
        }
        let stored: Stored = serde_json::from_slice(bytes)
            .map_err(|e| file_err(format!("not a dynamic config file: {e}")))?;
        if stored.version != VERSION {
            return Err(file_err(format!(
                "version {} is not the supported {VERSION}",
                stored.version
            )));
        }
        check_stored(&stored, groups).map_err(|e| file_err(e.to_string()))?;
        let mut state = self.lock();
        tidelog_storage::fs_util::write_atomic(&self.path, bytes)
            .map_err(|source| BrokerError::DynamicConfigsWrite { source })?;
        let defaults = stored.topic_defaults();
        *state = stored;
        Ok(defaults)
    }

    fn lock(&self) -> MutexGuard<'_, Stored> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The values set for `scope`.
    pub fn values(&self, scope: &Scope) -> Values {
        self.lock().values(scope)
    }

    /// The topic defaults in force.
    pub fn topic_defaults(&self) -> Defaults {
        self.lock().topic_defaults()
    }

    /// Every group with timeouts of its own.
    pub fn group_timeouts(&self) -> Vec<(String, GroupTimeouts)> {
        self.lock()
            .groups
            .iter()
            .map(|(g, v)| (g.clone(), timeouts_of(v)))
            .collect()
    }

    /// Applies the changes `changes_of` computes from `scope`'s values, all
    /// or nothing, each checked (broker configs by the catalogue, group
    /// configs against `groups`' bounds). `apply` makes it take effect: it
    /// gets what changes and `persist`, which it calls once, when the
    /// change may become durable, and not at all under `validate_only`
    /// (nothing is kept then either). Blocking (`persist` fsyncs).
    pub fn alter(
        &self,
        scope: &Scope,
        changes_of: &ChangesOfValues<'_>,
        groups: &GroupsConfig,
        validate_only: bool,
        apply: &mut Apply<'_>,
    ) -> Result<(), BrokerError> {
        if let Scope::Group(group) = scope {
            names::validate_group_name(group)?;
        }
        let mut state = self.lock();
        let current = state.values(scope);
        let changes = changes_of(&current)?;
        let mut values = current.clone();
        for (name, value) in changes {
            let bad = |problem| BrokerError::DynamicConfig {
                resource: scope.to_string(),
                name: name.clone(),
                problem,
            };
            match value {
                Some(value) => {
                    let canonical = check_value(scope, &name, &value).map_err(bad)?;
                    values.insert(name.clone(), canonical);
                }
                None => {
                    check_name(scope, &name).map_err(bad)?;
                    values.remove(&name);
                }
            }
        }
        let mut next = state.clone();
        let mut altered = Altered {
            topic_defaults: None,
            group: None,
        };
        match scope {
            Scope::ClusterDefault => next.cluster_default = values,
            Scope::Broker => next.broker = values,
            Scope::Group(group) => {
                let timeouts = timeouts_of(&values);
                check_timeouts(scope, timeouts, groups)?;
                if values.is_empty() {
                    next.groups.remove(group);
                } else {
                    if !next.groups.contains_key(group)
                        && next.groups.len() >= CONFIGURED_GROUPS_MAX
                    {
                        return Err(BrokerError::DynamicConfig {
                            resource: scope.to_string(),
                            name: String::new(),
                            problem: DynamicConfigProblem::TooManyGroups {
                                max: CONFIGURED_GROUPS_MAX,
                            },
                        });
                    }
                    next.groups.insert(group.clone(), values);
                }
                altered.group = Some((group.clone(), timeouts));
            }
        }
        let defaults = next.topic_defaults();
        if defaults != state.topic_defaults() {
            altered.topic_defaults = Some(defaults);
        }
        let mut persisted = false;
        let mut persist = || -> Result<(), BrokerError> {
            if validate_only {
                return Ok(());
            }
            let bytes =
                serde_json::to_vec_pretty(&next).map_err(|e| BrokerError::DynamicConfigsFile {
                    path: self.path.clone(),
                    reason: format!("cannot encode: {e}"),
                })?;
            self.publish.publish(&bytes)?;
            tidelog_storage::fs_util::write_atomic(&self.path, &bytes)
                .map_err(|source| BrokerError::DynamicConfigsWrite { source })?;
            persisted = true;
            Ok(())
        };
        let applied = apply(&altered, &mut persist);
        // What is durable is what the next start reads: memory follows it
        // even if `apply` failed after making it so.
        if persisted {
            *state = next;
        }
        applied
    }

    /// The configs of `scope` as DescribeConfigs answers them: for this
    /// broker every config with its value and where it comes from,
    /// `statics` (broker.yaml's) first; for the cluster-wide default only
    /// the values set there (Kafka's answer); for a group its two configs,
    /// its own or the broker's.
    pub fn describe(
        &self,
        scope: &Scope,
        statics: Vec<Described>,
        groups: &GroupsConfig,
    ) -> Vec<Described> {
        let state = self.lock();
        match scope {
            Scope::Group(group) => {
                let own = state.groups.get(group);
                let broker_value = |name: &str| {
                    if name == GROUP_SESSION_TIMEOUT {
                        groups.consumer_session_timeout_ms
                    } else {
                        groups.consumer_heartbeat_interval_ms
                    }
                };
                GROUP_CONFIGS
                    .iter()
                    .map(|name| {
                        let default = broker_value(name).to_string();
                        let (value, source) = match own.and_then(|v| v.get(*name)) {
                            Some(v) => (v.clone(), Source::Group),
                            None => (default.clone(), Source::Default),
                        };
                        let mut synonyms = vec![(name.to_string(), value.clone(), source)];
                        if source == Source::Group {
                            synonyms.push((name.to_string(), default, Source::Default));
                        }
                        Described {
                            name: name.to_string(),
                            value,
                            source,
                            read_only: false,
                            synonyms,
                            without_effect: None,
                            kind: DescribedKind::Value(ValueKind::Integer {
                                min: 1,
                                max: i32::MAX.into(),
                            }),
                        }
                    })
                    .collect()
            }
            Scope::ClusterDefault => state
                .cluster_default
                .iter()
                .filter_map(|(name, value)| {
                    let spec = broker_spec(name)?;
                    Some(described(
                        spec,
                        vec![(name.clone(), value.clone(), Source::DynamicDefaultBroker)],
                    ))
                })
                .collect(),
            Scope::Broker => {
                let mut out = statics;
                for spec in BROKER_CONFIGS {
                    let Some(default) = default_of(spec) else {
                        continue;
                    };
                    let mut layers = Vec::new();
                    if let Some(v) = state.broker.get(spec.name) {
                        layers.push((spec.name.to_owned(), v.clone(), Source::DynamicBroker));
                    }
                    if let Some(v) = state.cluster_default.get(spec.name) {
                        layers.push((
                            spec.name.to_owned(),
                            v.clone(),
                            Source::DynamicDefaultBroker,
                        ));
                    }
                    layers.push((spec.name.to_owned(), default.to_owned(), Source::Default));
                    out.push(described(spec, layers));
                }
                out
            }
        }
    }
}

/// A broker config read from broker.yaml at start-up, as described:
/// read-only, source STATIC_BROKER_CONFIG.
pub fn static_config(name: &str, value: String, kind: DescribedKind) -> Described {
    Described {
        name: name.to_owned(),
        value: value.clone(),
        source: Source::StaticBroker,
        read_only: true,
        synonyms: vec![(name.to_owned(), value, Source::StaticBroker)],
        without_effect: None,
        kind,
    }
}

/// The broker's own static configs both front-ends describe first:
/// auto-creation, the default replication factor and partition count.
pub fn broker_statics(config: &crate::config::BrokerConfig) -> Vec<Described> {
    let int = DescribedKind::Value(ValueKind::Integer {
        min: 0,
        max: i32::MAX.into(),
    });
    vec![
        static_config(
            "auto.create.topics.enable",
            config.auto_create_topics.to_string(),
            DescribedKind::Boolean,
        ),
        static_config("default.replication.factor", "1".into(), int),
        static_config("num.partitions", config.default_partitions.to_string(), int),
    ]
}

/// A described broker config from its layers, most precedent first.
fn described(
    spec: &'static catalogue::BrokerConfigSpec,
    layers: Vec<(String, String, Source)>,
) -> Described {
    let (value, source) = layers
        .first()
        .map_or((String::new(), Source::Default), |(_, v, s)| {
            (v.clone(), *s)
        });
    let (kind, without_effect) = match spec.effect {
        BrokerEffect::Accepted { kind, why, .. } => (DescribedKind::Value(kind), Some(why)),
        _ => match topic_default_of(spec) {
            Some(t) => (DescribedKind::Topic(t), topic_effect_why(t)),
            None => (DescribedKind::Value(ValueKind::Text), None),
        },
    };
    Described {
        name: spec.name.to_owned(),
        value,
        source,
        read_only: false,
        synonyms: layers,
        without_effect,
        kind,
    }
}

fn topic_effect_why(spec: &topic_config::ConfigSpec) -> Option<&'static str> {
    match spec.effect {
        topic_config::Effect::Accepted { why } => Some(why),
        topic_config::Effect::Applied => None,
    }
}

/// The default a described config shows: Kafka's, or its topic config's;
/// `None` for a config refused here (not described).
fn default_of(spec: &catalogue::BrokerConfigSpec) -> Option<&'static str> {
    match spec.effect {
        BrokerEffect::Accepted { default, .. } => Some(default),
        BrokerEffect::TopicDefault { .. } => topic_default_of(spec).map(|t| t.default),
        BrokerEffect::ReadOnly { .. } => None,
    }
}

/// Config `name` may be set or removed in `scope`.
fn check_name(scope: &Scope, name: &str) -> Result<(), DynamicConfigProblem> {
    match scope {
        Scope::Group(_) => {
            if GROUP_CONFIGS.contains(&name) {
                Ok(())
            } else {
                Err(DynamicConfigProblem::Unknown {
                    hint: format!(" of a group (known: {})", GROUP_CONFIGS.join(", ")),
                })
            }
        }
        Scope::Broker | Scope::ClusterDefault => match broker_spec(name).map(|s| s.effect) {
            None => Err(DynamicConfigProblem::Unknown {
                hint: " of a broker (docs/KAFKA.md lists the dynamic ones tidelog takes)".into(),
            }),
            Some(BrokerEffect::ReadOnly { where_set }) => Err(DynamicConfigProblem::ReadOnly {
                where_set: format!("broker.yaml: {where_set}"),
            }),
            Some(_) => Ok(()),
        },
    }
}

/// Checks `value` for config `name` of `scope`; its canonical text.
fn check_value(scope: &Scope, name: &str, value: &str) -> Result<String, DynamicConfigProblem> {
    check_name(scope, name)?;
    let invalid = |reason: String| DynamicConfigProblem::InvalidValue { reason };
    if value.len() > VALUE_MAX_BYTES {
        return Err(invalid(format!(
            "a value of {} bytes is longer than the {VALUE_MAX_BYTES} allowed",
            value.len()
        )));
    }
    if let Scope::Group(_) = scope {
        return parse_integer(value, 1, i64::from(i32::MAX))
            .map(|n| n.to_string())
            .map_err(invalid);
    }
    // `check_name` passed: the spec exists and is not read-only.
    let spec = broker_spec(name).ok_or_else(|| invalid("unknown".into()))?;
    match spec.effect {
        BrokerEffect::TopicDefault { topic_config } => topic_config::validate(topic_config, value)
            .map_err(|e| match e {
                BrokerError::InvalidTopicConfig { reason, .. } => invalid(reason),
                other => invalid(other.to_string()),
            }),
        BrokerEffect::Accepted { kind, .. } => match kind {
            ValueKind::Integer { min, max } => parse_integer(value, min, max)
                .map(|n| n.to_string())
                .map_err(invalid),
            ValueKind::Decimal => match value.parse::<f64>() {
                Ok(x) if x.is_finite() && x >= 0.0 => Ok(value.to_owned()),
                _ => Err(invalid(format!("{value:?} is not a decimal of at least 0"))),
            },
            ValueKind::Text => {
                if value.chars().any(char::is_control) {
                    Err(invalid("control characters are not allowed".into()))
                } else {
                    Ok(value.to_owned())
                }
            }
        },
        BrokerEffect::ReadOnly { .. } => Err(invalid("read at start-up".into())),
    }
}

fn parse_integer(value: &str, min: i64, max: i64) -> Result<i64, String> {
    match value.parse::<i64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        Ok(n) => Err(format!("{n} is outside [{min}, {max}]")),
        Err(_) => Err(format!("{value:?} is not an integer")),
    }
}

/// A group's timeouts from its (checked) values.
fn timeouts_of(values: &Values) -> GroupTimeouts {
    let get = |name: &str| values.get(name).and_then(|v| v.parse::<u64>().ok());
    GroupTimeouts {
        session_timeout_ms: get(GROUP_SESSION_TIMEOUT),
        heartbeat_interval_ms: get(GROUP_HEARTBEAT_INTERVAL),
    }
}

/// A group's timeouts within the broker's bounds: the session within
/// `groups.min_session_timeout_ms` and `max_session_timeout_ms`, the
/// heartbeat interval below the session (the group's or the broker's), as
/// broker.yaml's own pair must be.
fn check_timeouts(
    scope: &Scope,
    timeouts: GroupTimeouts,
    groups: &GroupsConfig,
) -> Result<(), BrokerError> {
    let bad = |name: &str, reason: String| BrokerError::DynamicConfig {
        resource: scope.to_string(),
        name: name.to_owned(),
        problem: DynamicConfigProblem::InvalidValue { reason },
    };
    let config = timeouts.over(groups);
    if let Some(session) = timeouts.session_timeout_ms {
        if session < groups.min_session_timeout_ms || session > groups.max_session_timeout_ms {
            return Err(bad(
                GROUP_SESSION_TIMEOUT,
                format!(
                    "{session} is outside the broker's bounds [{}, {}] (groups.min_session_timeout_ms, max_session_timeout_ms)",
                    groups.min_session_timeout_ms, groups.max_session_timeout_ms
                ),
            ));
        }
    }
    if config.consumer_heartbeat_interval_ms >= config.consumer_session_timeout_ms {
        return Err(bad(
            GROUP_HEARTBEAT_INTERVAL,
            format!(
                "{} is not below the group's session timeout {}",
                config.consumer_heartbeat_interval_ms, config.consumer_session_timeout_ms
            ),
        ));
    }
    Ok(())
}

/// Every value of a loaded file passes what an alter checks.
fn check_stored(stored: &Stored, groups: &GroupsConfig) -> Result<(), BrokerError> {
    let scoped = [
        (Scope::ClusterDefault, &stored.cluster_default),
        (Scope::Broker, &stored.broker),
    ];
    let group_scopes: Vec<(Scope, &Values)> = stored
        .groups
        .iter()
        .map(|(g, v)| (Scope::Group(g.clone()), v))
        .collect();
    if group_scopes.len() > CONFIGURED_GROUPS_MAX {
        return Err(BrokerError::DynamicConfig {
            resource: "groups".into(),
            name: String::new(),
            problem: DynamicConfigProblem::TooManyGroups {
                max: CONFIGURED_GROUPS_MAX,
            },
        });
    }
    for (scope, values) in scoped.into_iter().chain(group_scopes) {
        if let Scope::Group(g) = &scope {
            names::validate_group_name(g)?;
            check_timeouts(&scope, timeouts_of(values), groups)?;
        }
        for (name, value) in values {
            let canonical =
                check_value(&scope, name, value).map_err(|problem| BrokerError::DynamicConfig {
                    resource: scope.to_string(),
                    name: name.clone(),
                    problem,
                })?;
            if canonical != *value {
                return Err(BrokerError::DynamicConfig {
                    resource: scope.to_string(),
                    name: name.clone(),
                    problem: DynamicConfigProblem::InvalidValue {
                        reason: format!("{value:?} is not in canonical form ({canonical:?})"),
                    },
                });
            }
        }
    }
    // Together the defaults must make a valid topic config.
    topic_config::TopicConfig::from_overrides(&stored.topic_defaults().values)?;
    Ok(())
}
