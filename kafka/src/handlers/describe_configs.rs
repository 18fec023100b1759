//! DescribeConfigs (32): a topic's configs (`topic_config::entries`, the
//! list HTTP's `GET .../configs` answers) with each one's source (the
//! topic's own or the default), and the broker's read-only configs from
//! broker.yaml. `configuration_keys` filters (an unknown name is left
//! out, as Kafka does); synonyms when asked (v1+): a topic's own value
//! then the default; config types from v3, and, asked for, the reason a
//! config accepted without effect has none as its documentation.

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use tidelog_broker::topic_config::{self, ConfigKind, Effect};

use super::configs::{
    check_broker_name, BROKER, SOURCE_DEFAULT, SOURCE_STATIC_BROKER, SOURCE_TOPIC, TOPIC,
};
use crate::context::Context;
use crate::error::Refusal;

/// Kafka's `ConfigType`.
const TYPE_BOOLEAN: i8 = 1;
const TYPE_STRING: i8 = 2;
const TYPE_INT: i8 = 3;
const TYPE_LONG: i8 = 5;
const TYPE_DOUBLE: i8 = 6;
const TYPE_LIST: i8 = 7;

/// One config as described: name, value, source, type, and the default
/// (for a synonym) when the value is the topic's own.
struct Described {
    name: String,
    value: String,
    source: i8,
    config_type: i8,
    default: Option<&'static str>,
    /// Why a config accepted here has no effect (`Effect::Accepted`).
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
    match resource_type {
        TOPIC => {
            let topic = door.topic_configs(name)?;
            Ok(topic_config::entries(&topic.overrides)
                .into_iter()
                .map(|e| {
                    let spec = topic_config::spec(e.name);
                    Described {
                        name: e.name.to_owned(),
                        value: e.value,
                        source: if e.is_default {
                            SOURCE_DEFAULT
                        } else {
                            SOURCE_TOPIC
                        },
                        config_type: spec.map_or(0, |s| match s.kind {
                            ConfigKind::Policy | ConfigKind::ReplicaList => TYPE_LIST,
                            ConfigKind::Choice(_) | ConfigKind::Version => TYPE_STRING,
                            ConfigKind::IntegerOr { .. } => TYPE_INT,
                            ConfigKind::Integer { max, .. } if max <= i64::from(i32::MAX) => {
                                TYPE_INT
                            }
                            ConfigKind::Integer { .. } => TYPE_LONG,
                            ConfigKind::Ratio => TYPE_DOUBLE,
                            ConfigKind::Boolean => TYPE_BOOLEAN,
                        }),
                        default: (!e.is_default).then(|| spec.map(|s| s.default)).flatten(),
                        without_effect: spec.and_then(|s| match s.effect {
                            Effect::Accepted { why } => Some(why),
                            Effect::Applied => None,
                        }),
                    }
                })
                .collect())
        }
        BROKER => {
            check_broker_name(name)?;
            let config = door.settings()?;
            let fixed = |name: &str, value: String, config_type: i8| Described {
                name: name.to_owned(),
                value,
                source: SOURCE_STATIC_BROKER,
                config_type,
                default: None,
                without_effect: None,
            };
            Ok(vec![
                fixed(
                    "auto.create.topics.enable",
                    config.auto_create_topics.to_string(),
                    TYPE_BOOLEAN,
                ),
                fixed("default.replication.factor", "1".into(), TYPE_INT),
                fixed(
                    "num.partitions",
                    config.default_partitions.to_string(),
                    TYPE_INT,
                ),
                fixed(
                    "socket.request.max.bytes",
                    ctx.max_request_bytes.to_string(),
                    TYPE_INT,
                ),
            ])
        }
        other => Err(Refusal::UnknownResourceType {
            resource_type: other,
        }),
    }
}

fn entry(
    version: i16,
    synonyms: bool,
    documentation: bool,
    c: Described,
) -> DescribeConfigsResourceResult {
    let synonyms = if synonyms {
        let mut list = vec![DescribeConfigsSynonym::default()
            .with_name(StrBytes::from_string(c.name.clone()))
            .with_value(Some(StrBytes::from_string(c.value.clone())))
            .with_source(c.source)];
        if let Some(default) = c.default {
            list.push(
                DescribeConfigsSynonym::default()
                    .with_name(StrBytes::from_string(c.name.clone()))
                    .with_value(Some(StrBytes::from_static_str(default)))
                    .with_source(SOURCE_DEFAULT),
            );
        }
        list
    } else {
        Vec::new()
    };
    let result = DescribeConfigsResourceResult::default()
        .with_name(StrBytes::from_string(c.name))
        .with_value(Some(StrBytes::from_string(c.value)))
        .with_read_only(c.source == SOURCE_STATIC_BROKER)
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
