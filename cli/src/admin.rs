//! `tidelog compact TOPIC [--wait]` and `tidelog stats`: the compaction
//! and stats routes of API.md, "Operations".

use hyper::Method;
use serde_json::{json, Value};

use crate::error::CliError;
use crate::http::encode;
use crate::output::{cell, print, print_json, table};
use crate::Connection;

#[derive(Debug, clap::Args)]
pub struct CompactArgs {
    #[command(flatten)]
    pub connection: Connection,
    /// A topic whose cleanup.policy compacts.
    pub topic: String,
    /// Wait for the pass to finish (at most the server's 60 s) and print
    /// its result per partition.
    #[arg(long)]
    pub wait: bool,
    /// Roll the active segments first, so every record written so far can
    /// be cleaned (the active segment never is).
    #[arg(long)]
    pub roll_active: bool,
}

pub async fn compact(args: CompactArgs) -> Result<(), CliError> {
    let connection = &args.connection;
    let mut client = connection.client()?;
    let cluster = client.cluster_id().await?;
    let path = format!(
        "/v3/clusters/{}/topics/{}/compaction",
        encode(&cluster),
        encode(&args.topic)
    );
    let answer = client
        .send_json(
            Method::POST,
            &path,
            &json!({"wait": args.wait, "roll_active": args.roll_active}),
        )
        .await?;
    if connection.json {
        print_json(&answer)?;
    } else if args.wait {
        print(&compaction_text(&args.topic, &answer))?;
    } else {
        let partitions: Vec<String> = answer["partitions"]
            .as_array()
            .map(|a| a.iter().map(cell).collect())
            .unwrap_or_default();
        print(&format!(
            "compaction {} started on partitions {} (--wait waits for its result)\n",
            cell(&answer["task_id"]),
            partitions.join(",")
        ))?;
    }
    if answer["timed_out"] == true {
        return Err(CliError::TimedOut {
            what: format!("POST {path}"),
        });
    }
    Ok(())
}

/// A waited pass, one row per partition.
fn compaction_text(topic: &str, answer: &Value) -> String {
    let partitions = answer["partitions"].as_array().cloned().unwrap_or_default();
    let rows: Vec<Vec<String>> = partitions
        .iter()
        .map(|p| {
            let run = &p["last_run"];
            vec![
                cell(&p["partition"]),
                cell(&p["completed"]),
                cell(&p["state"]),
                cell(&run["records_kept"]),
                cell(&run["records_removed"]),
                cell(&run["segments_cleaned"]),
                cell(&run["duration_ms"]),
            ]
        })
        .collect();
    format!(
        "compaction {} of {topic}:\n{}",
        cell(&answer["task_id"]),
        table(
            &[
                "PARTITION",
                "COMPLETED",
                "STATE",
                "KEPT",
                "REMOVED",
                "SEGMENTS",
                "MS"
            ],
            &rows
        )
    )
}

pub async fn stats(connection: &Connection) -> Result<(), CliError> {
    let mut client = connection.client()?;
    let cluster = client.cluster_id().await?;
    let stats = client
        .get_json(&format!("/v3/clusters/{}/stats", encode(&cluster)))
        .await?;
    if connection.json {
        return print_json(&stats);
    }
    let rows: Vec<Vec<String>> = stats
        .as_object()
        .map(|o| o.iter().map(|(k, v)| vec![k.clone(), cell(v)]).collect())
        .unwrap_or_default();
    print(&table(&["STAT", "VALUE"], &rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waited_pass_prints_one_row_per_partition() {
        let text = compaction_text(
            "users",
            &json!({"task_id": "users:2", "timed_out": false, "partitions": [
                {"partition": 0, "completed": true, "state": "idle", "last_run":
                    {"records_kept": 3, "records_removed": 9, "segments_cleaned": 1, "duration_ms": 4}},
                {"partition": 1, "completed": false, "state": "in_progress", "last_run": null},
            ]}),
        );
        let lines: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(lines[0], ["compaction", "users:2", "of", "users:"]);
        assert_eq!(lines[2], ["0", "true", "idle", "3", "9", "1", "4"]);
        assert_eq!(lines[3], ["1", "false", "in_progress", "-", "-", "-", "-"]);
    }
}
