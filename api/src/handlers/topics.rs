//! Topics and configs: v2 `GET /topics`, `GET /topics/{topic}`, and the v3
//! topic and config admin routes.
//!
//! Decisions where API.md is silent:
//! * An unknown `{cluster}` is 404/40400 (there is one cluster and its id is
//!   the configured `cluster_id`).
//! * v2 `GET /topics` lists user topics only, as Kafka's `listTopics` does;
//!   v3 lists every topic with `is_internal`.
//! * `partitions_count` of a create defaults to `default_partitions`;
//!   `replication_factor`, if sent, must be 1 or -1 (single node).
//! * A create or alter body that is not JSON or has the wrong shape is 42206;
//!   bad values (name, partition count, configs) are 40002.
//! * `configs:alter` with `operation` `DELETE` removes the override; `SET`
//!   (the default) needs a `value`. Only these upper-case spellings, as
//!   Confluent's REST Proxy reads them. The whole alter applies or none of
//!   it.
//! * The internal topic `__consumer_offsets` cannot be deleted and its
//!   configs cannot be changed (40002).
//! * A deleted topic's records stay in the CommitLog until retention
//!   removes them but are never served again, also not to a new topic of
//!   the same name (see `registry.rs`). Its ConsumeQueue files (and a
//!   compact topic's compacted logs and cleaner checkpoint entries) are
//!   removed at once (`Store::delete_topic`).
//! * `cleanup.policy` may change between `delete` and a compacting policy
//!   only while the topic has no records (40002 otherwise, saying why);
//!   `compact` ↔ `compact,delete` always (docs/compaction.md).
//!
//! Compacted logs follow the registry: a create or alter that makes a
//! topic compact declares it to them *before* the registry publishes it, so
//! a record produced the moment the topic exists is copied; a create or
//! alter that then fails brings them back in line with the registry.

use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{json as json_value, Value};

use super::{json, v2_json, ClusterPath, TopicPath};
use crate::error::ApiError;
use crate::extract::{json_body, ApiPath};
use crate::names;
use crate::registry::Topic;
use crate::state::AppState;
use crate::topic_config::{self, entries};

/// `GET /topics` (v2)
pub async fn list_v2(State(state): State<AppState>) -> Result<Response, ApiError> {
    let door = state.door()?;
    let names: Vec<String> = door
        .list_topics()
        .iter()
        .filter(|t| !t.is_internal())
        .map(|t| t.name.to_string())
        .collect();
    v2_json(StatusCode::OK, &names)
}

/// `GET /topics/{topic}` (v2)
pub async fn get_v2(
    State(state): State<AppState>,
    ApiPath(topic): ApiPath<String>,
) -> Result<Response, ApiError> {
    names::validate_topic_name(&topic)?;
    let door = state.door()?;
    let topic = door.describe_topic(&topic)?;
    let configs: serde_json::Map<String, Value> = entries(&door.topic_defaults(), &topic.overrides)
        .into_iter()
        .map(|e| (e.name.to_string(), Value::String(e.value)))
        .collect();
    let partitions: Vec<Value> = (0..topic.partitions.get())
        .map(|p| {
            json_value!({
                "partition": p,
                "leader": 0,
                "replicas": [{"broker": 0, "leader": true, "in_sync": true}],
            })
        })
        .collect();
    v2_json(
        StatusCode::OK,
        &json_value!({"name": &*topic.name, "configs": configs, "partitions": partitions}),
    )
}

/// The v3 shape of a topic.
#[derive(Debug, Serialize)]
struct TopicData<'a> {
    kind: &'static str,
    cluster_id: &'a str,
    topic_name: &'a str,
    is_internal: bool,
    replication_factor: u32,
    partitions_count: u32,
}

fn topic_data<'a>(cluster_id: &'a str, topic: &'a Topic) -> TopicData<'a> {
    TopicData {
        kind: "KafkaTopic",
        cluster_id,
        topic_name: &topic.name,
        is_internal: topic.is_internal(),
        replication_factor: 1,
        partitions_count: topic.partitions.get(),
    }
}

/// `GET /v3/clusters/{c}/topics`
pub async fn list_v3(State(state): State<AppState>, _: ClusterPath) -> Result<Response, ApiError> {
    let door = state.door()?;
    let topics = door.list_topics();
    let cluster_id = &state.settings().broker.cluster_id;
    let data: Vec<TopicData<'_>> = topics.iter().map(|t| topic_data(cluster_id, t)).collect();
    json(
        StatusCode::OK,
        &json_value!({"kind": "KafkaTopicList", "data": data}),
    )
}

#[derive(Debug, Deserialize)]
struct CreateTopic {
    topic_name: String,
    #[serde(default)]
    partitions_count: Option<i64>,
    #[serde(default)]
    replication_factor: Option<i64>,
    #[serde(default)]
    configs: Vec<ConfigSet>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigSet {
    name: String,
    value: ConfigText,
}

/// A config value sent as a JSON string or number (Kafka sends strings;
/// people type numbers).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ConfigText {
    Text(String),
    Number(serde_json::Number),
}

impl ConfigText {
    fn into_string(self) -> String {
        match self {
            ConfigText::Text(s) => s,
            ConfigText::Number(n) => n.to_string(),
        }
    }
}

/// `POST /v3/clusters/{c}/topics`
pub async fn create_v3(
    State(state): State<AppState>,
    _: ClusterPath,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body?;
    let request: CreateTopic = json_body(&body)?;
    let request = tidelog_broker::topics::CreateTopic {
        name: request.topic_name,
        partitions: request.partitions_count,
        replication_factor: request.replication_factor,
        assignment: Vec::new(),
        configs: request
            .configs
            .into_iter()
            .map(|c| (c.name, Some(c.value.into_string())))
            .collect(),
    };
    let door = state.door()?;
    let created = door.create_topic(request, false).await?;
    tracing::info!(topic = %created.name, partitions = created.partitions, "created topic");
    // From what the create answered, not a describe: CREATE does not
    // imply DESCRIBE, and the creator is owed its answer.
    json(
        StatusCode::CREATED,
        &TopicData {
            kind: "KafkaTopic",
            cluster_id: &state.settings().broker.cluster_id,
            topic_name: &created.name,
            is_internal: false,
            replication_factor: 1,
            partitions_count: created.partitions,
        },
    )
}

/// One partition's usage in the v3 topic answer (ext).
#[derive(Debug, Serialize)]
struct PartitionUsageData {
    partition: u32,
    beginning_offset: u64,
    end_offset: u64,
    records: u64,
    bytes_on_disk: u64,
}

/// The v3 shape of one topic with its usage (ext).
#[derive(Debug, Serialize)]
struct TopicDetail<'a> {
    #[serde(flatten)]
    topic: TopicData<'a>,
    cleanup_policy: &'static str,
    records: u64,
    bytes_on_disk: u64,
    bytes_on_disk_estimated: bool,
    partition_usage: Vec<PartitionUsageData>,
}

/// `GET /v3/clusters/{c}/topics/{topic}`: Confluent's topic, plus (ext)
/// its `cleanup_policy`, its `records` and `bytes_on_disk` and each
/// partition's (`partition_usage`, [`tidelog_broker::usage`]).
pub async fn get_v3(
    State(state): State<AppState>,
    TopicPath(topic): TopicPath,
) -> Result<Response, ApiError> {
    let door = state.door()?;
    let topic = door.describe_topic(&topic)?;
    let usage = (0..topic.partitions.get())
        .map(|p| door.partition_usage(&topic.name, p))
        .collect::<Result<Vec<_>, _>>()?;
    let partitions: Vec<PartitionUsageData> = usage
        .iter()
        .map(|u| PartitionUsageData {
            partition: u.partition,
            beginning_offset: u.beginning_offset,
            end_offset: u.end_offset,
            records: u.records,
            bytes_on_disk: u.bytes_on_disk,
        })
        .collect();
    json(
        StatusCode::OK,
        &TopicDetail {
            topic: topic_data(&state.settings().broker.cluster_id, &topic),
            cleanup_policy: topic.config.cleanup_policy.as_str(),
            records: usage.iter().map(|u| u.records).sum(),
            bytes_on_disk: usage.iter().map(|u| u.bytes_on_disk).sum(),
            bytes_on_disk_estimated: usage.iter().any(|u| u.estimated),
            partition_usage: partitions,
        },
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchTopic {
    partitions_count: i64,
}

/// `PATCH /v3/clusters/{c}/topics/{topic}` `{"partitions_count": n}`:
/// grows the topic to `n` partitions (Confluent's shape; Kafka's
/// CreatePartitions, the same rules: 40002 unless `n` is more than it
/// has, 40401 for an unknown topic). 200 with the topic as it is now.
pub async fn patch_v3(
    State(state): State<AppState>,
    TopicPath(topic): TopicPath,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body?;
    let request: PatchTopic = json_body(&body)?;
    let door = state.door()?;
    let partitions = door
        .add_partitions(
            tidelog_broker::topics::AddPartitions {
                topic: topic.clone(),
                count: request.partitions_count,
                assignment: None,
            },
            false,
        )
        .await?;
    tracing::info!(%topic, partitions, "added partitions");
    json(
        StatusCode::OK,
        &TopicData {
            kind: "KafkaTopic",
            cluster_id: &state.settings().broker.cluster_id,
            topic_name: &topic,
            is_internal: false,
            replication_factor: 1,
            partitions_count: partitions,
        },
    )
}

/// `DELETE /v3/clusters/{c}/topics/{topic}`
pub async fn delete_v3(
    State(state): State<AppState>,
    TopicPath(topic): TopicPath,
) -> Result<Response, ApiError> {
    state.door()?.delete_topic(&topic).await?;
    tracing::info!(%topic, "deleted topic");
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `GET /v3/clusters/{c}/topics/{topic}/configs`
pub async fn configs_v3(
    State(state): State<AppState>,
    TopicPath(topic): TopicPath,
) -> Result<Response, ApiError> {
    let door = state.door()?;
    let topic = door.topic_configs(&topic)?;
    json(
        StatusCode::OK,
        &json_value!({"kind": "KafkaTopicConfigList", "data": entries(&door.topic_defaults(), &topic.overrides)}),
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PutConfig {
    value: ConfigText,
}

/// `PUT /v3/clusters/{c}/topics/{topic}/configs/{name}`
pub async fn put_config_v3(
    State(state): State<AppState>,
    TopicPath(topic): TopicPath,
    ApiPath((_, _, name)): ApiPath<(String, String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body?;
    let request: PutConfig = json_body(&body)?;
    // Name and value are checked before the topic, so a typo is reported
    // as such even for a topic that does not exist.
    let value = request.value.into_string();
    topic_config::validate(&name, &value)?;
    alter(&state, topic, vec![(name, Some(value))]).await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AlterConfigs {
    data: Vec<AlterEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AlterEntry {
    name: String,
    #[serde(default)]
    value: Option<ConfigText>,
    #[serde(default)]
    operation: Option<String>,
}

/// `POST /v3/clusters/{c}/topics/{topic}/configs:alter`
pub async fn alter_configs_v3(
    State(state): State<AppState>,
    TopicPath(topic): TopicPath,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let changes = alter_request(&body?)?;
    alter(&state, topic, changes).await
}

/// A `configs:alter` body (Confluent's `{"data":[{"name","value",
/// "operation"}]}`, a topic's or a broker's) as changes: `None` removes.
pub(super) fn alter_request(body: &Bytes) -> Result<Vec<(String, Option<String>)>, ApiError> {
    let request: AlterConfigs = json_body(body)?;
    let mut changes = Vec::with_capacity(request.data.len());
    for (i, e) in request.data.into_iter().enumerate() {
        let op = e.operation.as_deref().unwrap_or("SET");
        // Exactly Confluent's spellings: its REST Proxy reads `operation`
        // as a case-sensitive enum, so `set` is a mistake, not a SET.
        let change = match (op, e.value) {
            ("SET", Some(value)) => Some(value.into_string()),
            ("SET", None) => {
                return Err(ApiError::BadRequest {
                    message: format!("data[{i}] ({}): SET needs a value", e.name),
                })
            }
            ("DELETE", _) => None,
            (other, _) => {
                return Err(ApiError::BadRequest {
                    message: format!(
                        "data[{i}].operation ({}): {other:?} is not SET or DELETE (upper case)",
                        e.name
                    ),
                })
            }
        };
        changes.push((e.name, change));
    }
    Ok(changes)
}

async fn alter(
    state: &AppState,
    topic: String,
    changes: Vec<(String, Option<String>)>,
) -> Result<Response, ApiError> {
    let door = state.door()?;
    door.alter_topic(&topic, Box::new(move |_| Ok(changes.clone())), false)
        .await?;
    tracing::info!(%topic, "altered topic configs");
    Ok(StatusCode::NO_CONTENT.into_response())
}
