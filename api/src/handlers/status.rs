//! `/status/ready`, `/metrics`, `GET /v3/clusters`,
//! `GET /v3/clusters/{c}/stats` and `GET /v3/clusters/{c}/stats/history`.

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json as json_value;

use super::{json, ClusterPath};
use crate::error::ApiError;
use crate::state::AppState;

/// `GET /status/ready`: 200 once recovery is done, 503/50301 before;
/// while the store refuses writes, what produce is answered now, so a load
/// balancer sends writes elsewhere: 503/50302 (dispatch stalled), 507/50701
/// (disk full, or the next CommitLog segment cannot be made), 503/50301 (a
/// failed write or flush: writes refused until a restart). In a cluster,
/// first 503/50301 with the gate's reason unless it says the node serves
/// its part (a master holding its lease, a replica copying its master).
/// A cheap in-memory check: it answers while the store's threads are busy.
pub async fn ready(State(state): State<AppState>) -> Result<Response, ApiError> {
    // The node's own health, not a request's operation: no door.
    let ready = state.ready()?;
    if let Some(gate) = ready.cluster() {
        gate.ready().map_err(|reason| ApiError::NotReady {
            message: format!("this node does not serve its part of the cluster now: {reason}"),
        })?;
    }
    if let Some(refused) = ready.write_refusal() {
        return Err(refused.into());
    }
    json(StatusCode::OK, &json_value!({"ready": true}))
}

/// `GET /metrics`: Prometheus text format 0.0.4. Answers during recovery
/// too (`tidelog_ready 0`), so a scraper sees the server come up.
pub async fn metrics(State(state): State<AppState>) -> Response {
    let text = state.shared().metrics.render(&state.snapshot());
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        text,
    )
        .into_response()
}

/// `GET /v3/clusters`
pub async fn clusters(State(state): State<AppState>) -> Result<Response, ApiError> {
    let cluster_id = &state.settings().broker.cluster_id;
    json(
        StatusCode::OK,
        &json_value!({
            "kind": "KafkaClusterList",
            "data": [{"kind": "KafkaCluster", "cluster_id": cluster_id}],
        }),
    )
}

/// `GET /v3/clusters/{c}/stats`: the store's counters, disk usage and
/// retention totals, the registry's size, and the group coordinator's
/// counts with every committed offset's lag. Everything here is a cheap
/// in-memory read; the disk figures are the store's last measurement.
pub async fn stats(State(state): State<AppState>, _: ClusterPath) -> Result<Response, ApiError> {
    let door = state.door()?;
    let stats = door.stats()?;
    let (lag, tiered) = (door.consumer_lag()?, door.tiering_stats()?);
    let (s, retention, groups) = (&stats.store, &stats.retention, &stats.coordinator);
    json(
        StatusCode::OK,
        &json_value!({
            "commitlog_segments": s.commitlog_segments,
            "commitlog_min_offset": s.commitlog_min_offset,
            "commitlog_max_offset": s.commitlog_max_offset,
            "commitlog_flushed_offset": s.commitlog_flushed_offset,
            "dispatched_offset": s.dispatched_offset,
            "dispatch_lag_bytes": s.dispatch_lag_bytes,
            "dispatch_errors": s.dispatch_errors,
            "dispatch_stalled": s.dispatch_stalled,
            "dispatch_stalls": s.dispatch_stalls,
            "dispatch_lag_waits": s.dispatch_lag_waits,
            "sync_flush_waiters": s.sync_flush_waiters,
            "disk_used_ratio": s.disk_used_ratio,
            "disk_full": s.disk_full,
            "disk_full_ratio": retention.disk_full_ratio,
            "disk_available_bytes": s.disk_available_bytes,
            "disk_reserve_bytes": s.disk_reserve_bytes,
            "segment_create_failures": s.segment_create_failures,
            "writes_refused": s.writes_refused,
            "disk_max_used_ratio": retention.disk_max_used_ratio,
            "disk_force_clean_ratio": retention.disk_force_clean_ratio,
            "retention_segments_deleted": s.retention_segments_deleted,
            "retention_bytes_freed": s.retention_bytes_freed,
            "retention_failures": s.retention_failures,
            "retention_last_pass_ms": s.retention_last_pass_ms,
            "index_files": s.index_files,
            "partitions": s.partitions,
            "consume_queue_files": s.consume_queue_files,
            "thread_restarts": s.thread_restarts,
            "topics": stats.topics,
            "consumer_groups": stats.consumer_groups,
            "consumer_group_states": groups.groups_by_state,
            "consumer_group_members": groups.members,
            "consumer_group_rebalances": groups.rebalances_total,
            "consumer_group_lag": lag,
            "consumer_instances": state.consumers().map_or(0, |c| c.instance_count()),
            "retention_held_passes": s.retention_held_passes,
            // Tiered storage (null without a remote tier): uploads, remote
            // reads, the read cache and each tiered partition's lag.
            "tiered": tiered,
        }),
    )
}

/// `GET /v3/clusters/{c}/stats/history` (ext): the last ten minutes of
/// produce and fetch rates, dispatch lag and disk use, one sample every
/// two seconds ([`crate::history`]), oldest first, with the retention
/// tiers the disk use is drawn against.
pub async fn stats_history(
    State(state): State<AppState>,
    _: ClusterPath,
) -> Result<Response, ApiError> {
    let retention = state.door()?.stats()?.retention;
    json(
        StatusCode::OK,
        &json_value!({
            "interval_ms": crate::history::INTERVAL.as_millis() as u64,
            "capacity": crate::history::CAPACITY,
            "disk_max_used_ratio": retention.disk_max_used_ratio,
            "disk_force_clean_ratio": retention.disk_force_clean_ratio,
            "disk_full_ratio": retention.disk_full_ratio,
            "samples": state.shared().history.points(),
        }),
    )
}
