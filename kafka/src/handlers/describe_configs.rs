//! DescribeConfigs (32): a topic's configs (`topic_config::entries`, the
//! list HTTP's `GET .../configs` answers) with each one's source (the
//! topic's own, the cluster-wide default, Kafka's default); the broker's
//! read-only configs from broker.yaml and its dynamic ones
//! (`dynamic_configs`: this broker's, the cluster-wide default's,
//! Kafka's); a group's two KIP-848 configs. `configuration_keys` filters (an unknown name is left
//! out, as Kafka does); synonyms when asked (v1+): a topic's own value
//! then the default; config types from v3, and, asked for, the reason a
//! config accepted without effect has none as its documentation.

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::dynamic_configs::catalogue::ValueKind;
use tidelog_broker::dynamic_configs::{self, DescribedKind, Scope};
use tidelog_broker::topic_config::{self, ConfigKind, Effect, ValueSource};

use super::configs::{dynamic_scope, dynamic_source_code, source_code, SOURCE_DEFAULT};
use crate::context::Context;
use crate::error::Refusal;

/// Kafka's `ConfigType`.
const TYPE_BOOLEAN: i8 = 1;
const TYPE_STRING: i8 = 2;
const TYPE_INT: i8 = 3;
const TYPE_LONG: i8 = 5;
const TYPE_DOUBLE: i8 = 6;
const TYPE_LIST: i8 = 7;

/// One config as described: name, value, source, type, the values
/// beneath it (Kafka's synonyms, most precedent first, itself included),
/// and why it has no effect if so.
struct Described {
    name: String,
    value: String,
    source: i8,
    read_only: bool,
    config_type: i8,
    synonyms: Vec<(String, String, i8)>,
    /// Why a config accepted here has no effect.
    without_effect: Option<&'static str>,
}

pub fn handle(
    ctx: &Context,
    version: i16,
    request: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let results = request
        .resources
        .into_iter()
        .map(|resource| {
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            match describe(ctx, resource.resource_type, resource.resource_name.as_str()) {
                Ok(configs) => {
                    let wanted = |name: &str| {
                        resource
                            .configuration_keys
                            .as_ref()
                            .is_none_or(|keys| keys.iter().any(|k| k.as_str() == name))
                    };
                    let configs = configs
                        .into_iter()
                        .filter(|c| wanted(&c.name))
                        .map(|c| {
                            entry(
                                version,
                                request.include_synonyms,
                                request.include_documentation,
                                c,
                            )
                        })
                        .collect();
                    result.with_configs(configs)
                }
                Err(refusal) => result
                    .with_error_code(refusal.code())
                    .with_error_message(Some(StrBytes::from_string(refusal.to_string()))),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

fn describe(ctx: &Context, resource_type: i8, name: &str) -> Result<Vec<Described>, Refusal> {
    let door = ctx.door().ok_or(Refusal::NotReady)?;
    let own_id = super::cluster::Nodes::of(Some(&door)).own_id();
    let Some(scope) = dynamic_scope(resource_type, name, own_id)? else {
        let topic = door.topic_configs(name)?;
        let defaults = door.topic_defaults();
        return Ok(topic_config::entries(&defaults, &topic.overrides)
            .into_iter()
            .map(|e| {
                let spec = topic_config::spec(e.name);
                let source = source_code(e.source);
                let mut synonyms = vec![(e.name.to_owned(), e.value.clone(), source)];
                if e.source == ValueSource::DynamicTopicConfig {
                    if let (Some(value), Some(from)) =
                        (defaults.get(e.name), defaults.source(e.name))
                    {
                        synonyms.push((e.name.to_owned(), value.clone(), source_code(from)));
                    }
                }
                if let Some(spec) = spec.filter(|_| e.source != ValueSource::DefaultConfig) {
                    synonyms.push((e.name.to_owned(), spec.default.to_owned(), SOURCE_DEFAULT));
                }
                Described {
                    name: e.name.to_owned(),
                    value: e.value,
                    source,
                    read_only: false,
                    config_type: spec.map_or(0, |s| topic_type(s.kind)),
                    synonyms,
                    without_effect: spec.and_then(|s| match s.effect {
                        Effect::Accepted { why } => Some(why),
                        Effect::Applied => None,
                    }),
                }
            })
            .collect());
    };
    let statics = match scope {
        Scope::Broker => {
            let mut statics = dynamic_configs::broker_statics(door.settings()?);
            // The Kafka listener's own, which only this front-end knows.
            statics.push(dynamic_configs::static_config(
                "socket.request.max.bytes",
                ctx.max_request_bytes.to_string(),
                DescribedKind::Value(ValueKind::Integer {
                    min: 0,
                    max: i32::MAX.into(),
                }),
            ));
            statics
        }
        _ => Vec::new(),
    };
    Ok(door
        .dynamic_configs(&scope, statics)?
        .into_iter()
        .map(|d| Described {
            name: d.name,
            value: d.value,
            source: dynamic_source_code(d.source),
            read_only: d.read_only,
            config_type: match d.kind {
                DescribedKind::Topic(spec) => topic_type(spec.kind),
                DescribedKind::Boolean => TYPE_BOOLEAN,
                DescribedKind::Value(ValueKind::Integer { max, .. }) if max <= i32::MAX.into() => {
                    TYPE_INT
                }
                DescribedKind::Value(ValueKind::Integer { .. }) => TYPE_LONG,
                DescribedKind::Value(ValueKind::Decimal) => TYPE_DOUBLE,
                DescribedKind::Value(ValueKind::Text) => TYPE_STRING,
            },
            synonyms: d
                .synonyms
                .into_iter()
                .map(|(n, v, s)| (n, v, dynamic_source_code(s)))
                .collect(),
            without_effect: d.without_effect,
        })
        .collect())
}

/// Kafka's type of a topic config.
fn topic_type(kind: ConfigKind) -> i8 {
    match kind {
        ConfigKind::Policy | ConfigKind::ReplicaList => TYPE_LIST,
        ConfigKind::Choice(_) | ConfigKind::Version => TYPE_STRING,
        ConfigKind::IntegerOr { .. } => TYPE_INT,
        ConfigKind::Integer { max, .. } if max <= i64::from(i32::MAX) => TYPE_INT,
        ConfigKind::Integer { .. } => TYPE_LONG,
        ConfigKind::Ratio => TYPE_DOUBLE,
        ConfigKind::Boolean => TYPE_BOOLEAN,
    }
}

fn entry(
    version: i16,
    synonyms: bool,
    documentation: bool,
    c: Described,
) -> DescribeConfigsResourceResult {
    let synonyms = if synonyms {
        c.synonyms
            .into_iter()
            .map(|(name, value, source)| {
                DescribeConfigsSynonym::default()
                    .with_name(StrBytes::from_string(name))
                    .with_value(Some(StrBytes::from_string(value)))
                    .with_source(source)
            })
            .collect()
    } else {
        Vec::new()
    };
    let result = DescribeConfigsResourceResult::default()
        .with_name(StrBytes::from_string(c.name))
        .with_value(Some(StrBytes::from_string(c.value)))
        .with_read_only(c.read_only)
        .with_config_source(c.source)
        .with_synonyms(synonyms);
    if version >= 3 {
        let documentation = c.without_effect.filter(|_| documentation).map(|why| {
            StrBytes::from_string(format!("Accepted without effect on tidelog: {why}."))
        });
        result
            .with_config_type(c.config_type)
            .with_documentation(documentation)
    } else {
        result
    }
}
