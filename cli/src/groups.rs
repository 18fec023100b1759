//! `tidelog groups list|describe|reset-offsets`: the operator's group
//! routes (API.md, "Consumer groups, the operator's routes"), shown as
//! `kafka-consumer-groups.sh` shows them.

use clap::{ArgGroup, Subcommand};
use hyper::Method;
use serde_json::{json, Value};

use crate::error::CliError;
use crate::http::encode;
use crate::output::{cell, print, print_json, table};
use crate::spec::parse_datetime_ms;
use crate::Connection;

#[derive(Debug, Subcommand)]
pub enum GroupsCommand {
    /// Every group with its state, protocol and member count.
    List,
    /// A group's members, and its committed offsets with the lag of each
    /// partition.
    Describe { group: String },
    /// Move a group's committed offsets (the group must have no members:
    /// stop its consumers first).
    #[command(group(ArgGroup::new("to").required(true).args(
        ["to_earliest", "to_latest", "to_offset", "to_datetime", "to_timestamp"]
    )))]
    ResetOffsets {
        group: String,
        /// Only this topic (default: every topic the group has offsets
        /// for).
        #[arg(long)]
        topic: Option<String>,
        /// Only this partition of --topic (repeat for more).
        #[arg(long = "partition", requires = "topic")]
        partitions: Vec<u32>,
        /// To each partition's first record.
        #[arg(long)]
        to_earliest: bool,
        /// To each partition's end.
        #[arg(long)]
        to_latest: bool,
        /// To this offset (clamped into each partition's range).
        #[arg(long, value_name = "N")]
        to_offset: Option<u64>,
        /// To the first record at or after this time,
        /// YYYY-MM-DDTHH:MM:SS[.fff][Z|+HH:MM] (UTC without a zone).
        #[arg(long, value_name = "DATETIME", value_parser = parse_datetime_ms)]
        to_datetime: Option<i64>,
        /// To the first record at or after this timestamp (ms since the
        /// epoch).
        #[arg(long, value_name = "MS")]
        to_timestamp: Option<i64>,
    },
}

pub async fn run(connection: &Connection, command: GroupsCommand) -> Result<(), CliError> {
    let mut client = connection.client()?;
    match command {
        GroupsCommand::List => {
            let list = client.get_json("/consumer-groups").await?;
            if connection.json {
                return print_json(&list["groups"]);
            }
            let groups = list["groups"].as_array().cloned().unwrap_or_default();
            let rows: Vec<Vec<String>> = groups
                .iter()
                .map(|g| {
                    vec![
                        cell(&g["group"]),
                        cell(&g["state"]),
                        cell(&g["protocol"]),
                        cell(&g["members"]),
                    ]
                })
                .collect();
            print(&table(&["GROUP", "STATE", "PROTOCOL", "MEMBERS"], &rows))
        }
        GroupsCommand::Describe { group } => {
            let described = client
                .get_json(&format!("/consumer-groups/{}", encode(&group)))
                .await?;
            if connection.json {
                return print_json(&described);
            }
            print(&describe_text(&described))
        }
        GroupsCommand::ResetOffsets {
            group,
            topic,
            partitions,
            to_earliest,
            to_latest,
            to_offset,
            to_datetime,
            to_timestamp,
        } => {
            let to = if to_earliest {
                json!("beginning")
            } else if to_latest {
                json!("end")
            } else if let Some(offset) = to_offset {
                json!({ "offset": offset })
            } else if let Some(ms) = to_datetime.or(to_timestamp) {
                json!({ "timestamp": ms })
            } else {
                return Err(CliError::usage("reset-offsets: say where to (--to-...)"));
            };
            let mut body = json!({ "to": to });
            if let Some(topic) = topic {
                body["topic"] = json!(topic);
            }
            if !partitions.is_empty() {
                body["partitions"] = json!(partitions);
            }
            let path = format!("/consumer-groups/{}/offsets:reset", encode(&group));
            let answer = client.send_json(Method::POST, &path, &body).await?;
            if connection.json {
                return print_json(&answer);
            }
            let offsets = answer["offsets"].as_array().cloned().unwrap_or_default();
            let rows: Vec<Vec<String>> = offsets
                .iter()
                .map(|o| vec![cell(&o["topic"]), cell(&o["partition"]), cell(&o["offset"])])
                .collect();
            print(&format!(
                "reset group {group}:\n{}",
                table(&["TOPIC", "PARTITION", "NEW-OFFSET"], &rows)
            ))
        }
    }
}

/// The describe answer as `kafka-consumer-groups.sh --describe` lays it
/// out: one row per committed offset, with the member holding it.
fn describe_text(group: &Value) -> String {
    let members = group["members"].as_array().cloned().unwrap_or_default();
    let holder = |topic: &Value, partition: &Value| -> String {
        members
            .iter()
            .find(|m| {
                m["assignments"].as_array().is_some_and(|a| {
                    a.iter()
                        .any(|x| x["topic"] == *topic && x["partition"] == *partition)
                })
            })
            .map_or("-".to_string(), |m| cell(&m["member_id"]))
    };
    let offsets = group["offsets"].as_array().cloned().unwrap_or_default();
    let rows: Vec<Vec<String>> = offsets
        .iter()
        .map(|o| {
            vec![
                cell(&o["topic"]),
                cell(&o["partition"]),
                cell(&o["offset"]),
                cell(&o["end_offset"]),
                cell(&o["lag"]),
                holder(&o["topic"], &o["partition"]),
            ]
        })
        .collect();
    let member_rows: Vec<Vec<String>> = members
        .iter()
        .map(|m| {
            let held: Vec<String> = m["assignments"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|x| format!("{}:{}", cell(&x["topic"]), cell(&x["partition"])))
                        .collect()
                })
                .unwrap_or_default();
            vec![
                cell(&m["member_id"]),
                cell(&m["client_id"]),
                cell(&m["host"]),
                held.join(","),
            ]
        })
        .collect();
    let mut text = format!(
        "Group: {}  State: {}  Generation: {}  Protocol: {}  Members: {}\n\n{}",
        cell(&group["group"]),
        cell(&group["state"]),
        cell(&group["generation"]),
        cell(&group["protocol"]),
        members.len(),
        table(
            &[
                "TOPIC",
                "PARTITION",
                "CURRENT-OFFSET",
                "LOG-END-OFFSET",
                "LAG",
                "CONSUMER-ID"
            ],
            &rows
        ),
    );
    if !member_rows.is_empty() {
        text.push('\n');
        text.push_str(&table(
            &["MEMBER-ID", "CLIENT-ID", "HOST", "PARTITIONS"],
            &member_rows,
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_shows_lag_and_holder() {
        let text = describe_text(&json!({
            "group": "g", "state": "Stable", "generation": 2, "protocol": "http",
            "members": [{"member_id": "m1", "client_id": "c1", "host": "/127.0.0.1",
                         "assignments": [{"topic": "t", "partition": 0}]}],
            "offsets": [
                {"topic": "t", "partition": 0, "offset": 3, "end_offset": 10, "lag": 7},
                {"topic": "gone", "partition": 0, "offset": 1, "end_offset": null, "lag": null},
            ],
        }));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "Group: g  State: Stable  Generation: 2  Protocol: http  Members: 1"
        );
        assert!(lines[2].starts_with("TOPIC"), "{text}");
        let row: Vec<&str> = lines[3].split_whitespace().collect();
        assert_eq!(row, ["t", "0", "3", "10", "7", "m1"]);
        let row: Vec<&str> = lines[4].split_whitespace().collect();
        assert_eq!(row, ["gone", "0", "1", "-", "-", "-"]);
        assert!(text.contains("t:0"), "{text}");
    }
}
