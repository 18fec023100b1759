//! The broker's configs over HTTP, in Confluent REST Proxy's v3 shape: the
//! same configs and rules as Kafka's DescribeConfigs and alters of a
//! BROKER resource (docs/KAFKA.md "Broker and group configs"), through the
//! same door (`Door::dynamic_configs`, `Door::alter_dynamic_configs`).
//!
//! * `GET /v3/clusters/{c}/broker-configs`: the cluster-wide defaults set
//!   (Kafka's resource `""`); `POST .../broker-configs:alter` changes them.
//! * `GET /v3/clusters/{c}/brokers/{b}/configs`: every config of broker
//!   `b` (only `0` exists) with its value and source; `POST
//!   .../configs:alter` changes this broker's own values.
//!
//! An alter is all or nothing, `SET` or `DELETE` per entry as for a
//! topic's configs; the broker's refusals answer 40002 naming the config.

use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{json as json_value, Value};
use tidelog_broker::dynamic_configs::{self, Described, Scope, Source};

use super::topics::alter_request;
use super::{json, ClusterPath};
use crate::error::ApiError;
use crate::extract::ApiPath;
use crate::state::AppState;

/// Confluent's name of a config source.
fn source_name(source: Source) -> &'static str {
    match source {
        Source::DynamicBroker => "DYNAMIC_BROKER_CONFIG",
        Source::DynamicDefaultBroker => "DYNAMIC_DEFAULT_BROKER_CONFIG",
        Source::StaticBroker => "STATIC_BROKER_CONFIG",
        Source::Default => "DEFAULT_CONFIG",
        Source::Group => "GROUP_CONFIG",
    }
}

/// One config row: Confluent's fields, and (ext) why a config accepted
/// here has no effect.
fn row(kind: &str, cluster_id: &str, broker: Option<u32>, d: Described) -> Value {
    let synonyms: Vec<Value> = d
        .synonyms
        .into_iter()
        .map(|(name, value, source)| {
            json_value!({"name": name, "value": value, "source": source_name(source)})
        })
        .collect();
    let mut row = json_value!({
        "kind": kind,
        "cluster_id": cluster_id,
        "name": d.name,
        "value": d.value,
        "is_default": d.source == Source::Default,
        "is_read_only": d.read_only,
        "is_sensitive": false,
        "source": source_name(d.source),
        "synonyms": synonyms,
    });
    if let (Some(b), Some(map)) = (broker, row.as_object_mut()) {
        map.insert("broker_id".into(), json_value!(b));
    }
    if let (Some(why), Some(map)) = (d.without_effect, row.as_object_mut()) {
        map.insert("without_effect".into(), json_value!(why));
    }
    row
}

/// The broker id of a `/brokers/{broker}/...` route: 0, the one broker,
/// else 404/40400.
fn this_broker(broker: &str) -> Result<u32, ApiError> {
    match broker {
        "0" => Ok(0),
        other => Err(ApiError::NotFound {
            message: format!("broker {other:?} not found; this is broker 0"),
        }),
    }
}

/// `GET /v3/clusters/{c}/broker-configs`
pub async fn cluster_configs(
    State(state): State<AppState>,
    _: ClusterPath,
) -> Result<Response, ApiError> {
    let door = state.door()?;
    let cluster_id = &state.settings().broker.cluster_id;
    let data: Vec<Value> = door
        .dynamic_configs(&Scope::ClusterDefault, Vec::new())?
        .into_iter()
        .map(|d| row("KafkaClusterConfig", cluster_id, None, d))
        .collect();
    json(
        StatusCode::OK,
        &json_value!({"kind": "KafkaClusterConfigList", "data": data}),
    )
}

/// `GET /v3/clusters/{c}/brokers/{b}/configs`
pub async fn broker_configs(
    State(state): State<AppState>,
    _: ClusterPath,
    ApiPath((_, broker)): ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    let broker = this_broker(&broker)?;
    let door = state.door()?;
    let statics = dynamic_configs::broker_statics(door.settings()?);
    let cluster_id = &state.settings().broker.cluster_id;
    let data: Vec<Value> = door
        .dynamic_configs(&Scope::Broker, statics)?
        .into_iter()
        .map(|d| row("KafkaBrokerConfig", cluster_id, Some(broker), d))
        .collect();
    json(
        StatusCode::OK,
        &json_value!({"kind": "KafkaBrokerConfigList", "data": data}),
    )
}

/// `POST /v3/clusters/{c}/broker-configs:alter`
pub async fn alter_cluster_configs(
    State(state): State<AppState>,
    _: ClusterPath,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    alter(&state, Scope::ClusterDefault, alter_request(&body?)?).await
}

/// `POST /v3/clusters/{c}/brokers/{b}/configs:alter`
pub async fn alter_broker_configs(
    State(state): State<AppState>,
    _: ClusterPath,
    ApiPath((_, broker)): ApiPath<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    this_broker(&broker)?;
    alter(&state, Scope::Broker, alter_request(&body?)?).await
}

async fn alter(
    state: &AppState,
    scope: Scope,
    changes: Vec<(String, Option<String>)>,
) -> Result<Response, ApiError> {
    let door = state.door()?;
    door.alter_dynamic_configs(scope, Box::new(move |_| Ok(changes.clone())), false)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
