//! `GET /v1/cluster` (ext, issue 39): the cluster as this node sees it,
//! from the cluster gate's status; a single node answers as the one
//! master of a cluster of one (API.md "Cluster").

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json as json_value, Value};
use tidelog_broker::cluster::{ClusterNode, ClusterStatus, Role};

use super::json;
use crate::error::ApiError;
use crate::settings::ApiSettings;
use crate::state::AppState;

/// The node id a single node answers with: cluster nodes are numbered
/// from 1 (`cluster.node_id`), so 0 is no cluster's.
pub const SINGLE_NODE_ID: u32 = 0;

/// `GET /v1/cluster`: DESCRIBE on the cluster (the door's check).
pub async fn describe(State(state): State<AppState>) -> Result<Response, ApiError> {
    let status = state
        .door()?
        .describe_cluster()?
        .unwrap_or_else(|| single_node(state.settings()));
    json(StatusCode::OK, &render(&status))
}

/// A single node as a cluster of one: epoch 0, itself the master, in
/// sync, no lag, at its own HTTP and Kafka addresses.
pub fn single_node(settings: &ApiSettings) -> ClusterStatus {
    ClusterStatus {
        epoch: 0,
        node_id: SINGLE_NODE_ID,
        master: Some(SINGLE_NODE_ID),
        nodes: vec![ClusterNode {
            node_id: SINGLE_NODE_ID,
            http: settings.http_address.clone(),
            kafka: settings.kafka_address.clone(),
            role: Role::Master,
            in_sync: true,
            lag_bytes: 0,
        }],
    }
}

/// The answer's JSON: the contract's fields, and `node_id`, the node
/// that answered (ext).
pub fn render(status: &ClusterStatus) -> Value {
    let nodes: Vec<Value> = status
        .nodes
        .iter()
        .map(|n| {
            json_value!({
                "node_id": n.node_id,
                "http": n.http,
                "kafka": n.kafka,
                "role": n.role.as_str(),
                "in_sync": n.in_sync,
                "lag_bytes": n.lag_bytes,
            })
        })
        .collect();
    json_value!({
        "epoch": status.epoch,
        "master": status.master,
        "node_id": status.node_id,
        "nodes": nodes,
    })
}
