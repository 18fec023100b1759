//! `tidelog cluster status`: the cluster as the node asked sees it
//! (API.md, `GET /v1/cluster`), one row per node; a single node answers
//! as the one master of epoch 0.

use clap::Subcommand;
use serde_json::Value;

use crate::error::CliError;
use crate::output::{cell, print, print_json, table};
use crate::Connection;

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// The epoch, the master, and every live node with its role, whether
    /// it is in sync and how far behind the master's log it is.
    Status,
}

pub async fn run(connection: &Connection, command: ClusterCommand) -> Result<(), CliError> {
    let mut client = connection.client()?;
    match command {
        ClusterCommand::Status => {
            let cluster = client.get_json("/v1/cluster").await?;
            if connection.json {
                return print_json(&cluster);
            }
            print(&status_text(&cluster))
        }
    }
}

/// A summary line, then one row per node (`*` marks the node asked).
fn status_text(cluster: &Value) -> String {
    let nodes = cluster["nodes"].as_array().cloned().unwrap_or_default();
    let asked = &cluster["node_id"];
    let rows: Vec<Vec<String>> = nodes
        .iter()
        .map(|n| {
            let mut id = cell(&n["node_id"]);
            if &n["node_id"] == asked {
                id.push('*');
            }
            vec![
                id,
                cell(&n["role"]),
                cell(&n["in_sync"]),
                cell(&n["lag_bytes"]),
                cell(&n["http"]),
                cell(&n["kafka"]),
            ]
        })
        .collect();
    let master = match &cluster["master"] {
        Value::Null => "no master known".to_string(),
        m => format!("master node {}", cell(m)),
    };
    format!(
        "epoch {}, {master}, {} node(s); * is the node asked\n{}",
        cell(&cluster["epoch"]),
        nodes.len(),
        table(
            &["NODE", "ROLE", "IN_SYNC", "LAG_BYTES", "HTTP", "KAFKA"],
            &rows
        )
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn one_row_per_node_the_asked_one_marked() {
        let text = status_text(&json!({"epoch": 7, "master": 1, "node_id": 2, "nodes": [
            {"node_id": 1, "http": "10.0.0.1:8080", "kafka": "10.0.0.1:9092",
             "role": "master", "in_sync": true, "lag_bytes": 0},
            {"node_id": 2, "http": "10.0.0.2:8080", "kafka": null,
             "role": "replica", "in_sync": false, "lag_bytes": 4096},
        ]}));
        let lines: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            lines[0],
            [
                "epoch", "7,", "master", "node", "1,", "2", "node(s);", "*", "is", "the", "node",
                "asked"
            ]
        );
        assert_eq!(
            lines[1],
            ["NODE", "ROLE", "IN_SYNC", "LAG_BYTES", "HTTP", "KAFKA"]
        );
        assert_eq!(
            lines[2],
            ["1", "master", "true", "0", "10.0.0.1:8080", "10.0.0.1:9092"]
        );
        assert_eq!(
            lines[3],
            ["2*", "replica", "false", "4096", "10.0.0.2:8080", "-"]
        );
        let text = status_text(&json!({"epoch": 2, "master": null, "node_id": 2, "nodes": []}));
        assert!(
            text.starts_with("epoch 2, no master known, 0 node(s)"),
            "{text}"
        );
    }
}
