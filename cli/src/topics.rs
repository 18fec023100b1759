//! `tidelog topics list|create|describe|alter|delete`: the v3 topic and
//! config routes, and each partition's offsets for `describe`.

use clap::Subcommand;
use hyper::Method;
use serde_json::{json, Value};

use crate::error::CliError;
use crate::http::{encode, Client};
use crate::output::{cell, print, print_json, table};
use crate::spec::parse_key_value;
use crate::Connection;

#[derive(Debug, Subcommand)]
pub enum TopicsCommand {
    /// Every topic, internal ones marked.
    List,
    /// Create a topic.
    Create {
        topic: String,
        /// Number of partitions (default: the server's default_partitions).
        #[arg(short, long)]
        partitions: Option<u32>,
        /// A topic config, NAME=VALUE (repeat for more), e.g.
        /// cleanup.policy=compact.
        #[arg(long = "config", value_name = "NAME=VALUE", value_parser = parse_key_value)]
        configs: Vec<(String, String)>,
    },
    /// Policy, partitions with their beginning and end offsets, and every
    /// config (defaults marked).
    Describe { topic: String },
    /// Grow the partition count, and/or change configs (all of them or
    /// none).
    Alter {
        topic: String,
        /// The partition count the topic is to have: more than it has
        /// (partitions are never removed). Keyed records produced from
        /// now on may map to other partitions than before.
        #[arg(short, long)]
        partitions: Option<u32>,
        /// Set a config, NAME=VALUE (repeat for more).
        #[arg(long = "set", value_name = "NAME=VALUE", value_parser = parse_key_value)]
        set: Vec<(String, String)>,
        /// Put a config back to its default (repeat for more).
        #[arg(long = "delete", value_name = "NAME")]
        delete: Vec<String>,
    },
    /// Delete a topic (its records become unreachable at once).
    Delete { topic: String },
}

pub async fn run(connection: &Connection, command: TopicsCommand) -> Result<(), CliError> {
    let mut client = connection.client()?;
    let cluster = client.cluster_id().await?;
    let topics = format!("/v3/clusters/{}/topics", encode(&cluster));
    match command {
        TopicsCommand::List => {
            let list = client.get_json(&topics).await?;
            let items = list["data"].as_array().cloned().unwrap_or_default();
            let summary: Vec<Value> = items
                .iter()
                .map(|t| {
                    json!({
                        "name": t["topic_name"],
                        "partitions": t["partitions_count"],
                        "internal": t["is_internal"],
                    })
                })
                .collect();
            if connection.json {
                return print_json(&Value::Array(summary));
            }
            let rows: Vec<Vec<String>> = summary
                .iter()
                .map(|t| {
                    let internal = if t["internal"] == true { "yes" } else { "" };
                    vec![cell(&t["name"]), cell(&t["partitions"]), internal.into()]
                })
                .collect();
            print(&table(&["TOPIC", "PARTITIONS", "INTERNAL"], &rows))
        }
        TopicsCommand::Create {
            topic,
            partitions,
            configs,
        } => {
            let mut body = json!({
                "topic_name": topic,
                "configs": configs
                    .iter()
                    .map(|(name, value)| json!({"name": name, "value": value}))
                    .collect::<Vec<_>>(),
            });
            if let Some(partitions) = partitions {
                body["partitions_count"] = json!(partitions);
            }
            let created = client.send_json(Method::POST, &topics, &body).await?;
            if connection.json {
                return print_json(&created);
            }
            print(&format!(
                "created topic {} with {} partitions\n",
                cell(&created["topic_name"]),
                cell(&created["partitions_count"])
            ))
        }
        TopicsCommand::Describe { topic } => {
            describe(connection, &mut client, &topics, &topic).await
        }
        TopicsCommand::Alter {
            topic,
            partitions,
            set,
            delete,
        } => {
            if partitions.is_none() && set.is_empty() && delete.is_empty() {
                return Err(CliError::usage(
                    "topics alter: nothing to change (give --partitions N, --set NAME=VALUE or --delete NAME)",
                ));
            }
            let path = format!("{topics}/{}", encode(&topic));
            // Partitions first: a refused count changes nothing, and the
            // configs then go as one all-or-nothing change.
            let grown = match partitions {
                Some(count) => Some(
                    client
                        .send_json(Method::PATCH, &path, &json!({ "partitions_count": count }))
                        .await?,
                ),
                None => None,
            };
            if set.is_empty() && delete.is_empty() {
                if connection.json {
                    return print_json(&json!({"topic": topic, "partitions": partitions}));
                }
                return print(&format!(
                    "topic {topic} now has {} partitions\n",
                    grown
                        .as_ref()
                        .map_or_else(String::new, |g| cell(&g["partitions_count"]))
                ));
            }
            let data = alter_entries(&set, &delete);
            let path = format!("{topics}/{}/configs:alter", encode(&topic));
            client
                .send_json(Method::POST, &path, &json!({ "data": data }))
                .await?;
            if connection.json {
                return print_json(
                    &json!({"topic": topic, "partitions": partitions, "altered": data}),
                );
            }
            if let Some(count) = partitions {
                print(&format!("topic {topic} now has {count} partitions\n"))?;
            }
            print(&format!(
                "altered {} config(s) of topic {topic}\n",
                data.len()
            ))
        }
        TopicsCommand::Delete { topic } => {
            let path = format!("{topics}/{}", encode(&topic));
            client
                .send_json(Method::DELETE, &path, &Value::Null)
                .await?;
            if connection.json {
                return print_json(&json!({"topic": topic, "deleted": true}));
            }
            print(&format!("deleted topic {topic}\n"))
        }
    }
}

/// The `data` of a `configs:alter` body (a topic's or the broker's): every
/// `--set NAME=VALUE`, then every `--delete NAME`.
pub(crate) fn alter_entries(set: &[(String, String)], delete: &[String]) -> Vec<Value> {
    set.iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .chain(
            delete
                .iter()
                .map(|name| json!({"name": name, "operation": "DELETE"})),
        )
        .collect()
}

async fn describe(
    connection: &Connection,
    client: &mut Client,
    topics: &str,
    topic: &str,
) -> Result<(), CliError> {
    let base = format!("{topics}/{}", encode(topic));
    let info = client.get_json(&base).await?;
    let configs = client.get_json(&format!("{base}/configs")).await?;
    let configs = configs["data"].as_array().cloned().unwrap_or_default();
    let count = info["partitions_count"].as_u64().unwrap_or(0);
    let mut partitions = Vec::new();
    for p in 0..count {
        let offsets = client
            .get_json(&format!("/topics/{}/partitions/{p}/offsets", encode(topic)))
            .await?;
        partitions.push(json!({
            "partition": p,
            "beginning_offset": offsets["beginning_offset"],
            "end_offset": offsets["end_offset"],
        }));
    }
    let policy = configs
        .iter()
        .find(|c| c["name"] == "cleanup.policy")
        .map(|c| c["value"].clone())
        .unwrap_or(Value::Null);
    let configs: Vec<Value> = configs
        .iter()
        .map(|c| json!({"name": c["name"], "value": c["value"], "is_default": c["is_default"]}))
        .collect();
    if connection.json {
        return print_json(&json!({
            "topic": topic,
            "internal": info["is_internal"],
            "policy": policy,
            "partitions": partitions,
            "configs": configs,
        }));
    }
    let partition_rows: Vec<Vec<String>> = partitions
        .iter()
        .map(|p| {
            vec![
                cell(&p["partition"]),
                cell(&p["beginning_offset"]),
                cell(&p["end_offset"]),
            ]
        })
        .collect();
    let config_rows: Vec<Vec<String>> = configs
        .iter()
        .map(|c| {
            let default = if c["is_default"] == true {
                "(default)"
            } else {
                ""
            };
            vec![cell(&c["name"]), cell(&c["value"]), default.into()]
        })
        .collect();
    print(&format!(
        "Topic: {topic}  Policy: {}  Partitions: {count}\n\n{}\n{}",
        cell(&policy),
        table(&["PARTITION", "BEGINNING", "END"], &partition_rows),
        table(&["CONFIG", "VALUE", "DEFAULT"], &config_rows),
    ))
}
