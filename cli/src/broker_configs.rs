//! `tidelog broker-configs list|alter`: the broker's configs over the v3
//! routes (`/brokers/0/configs`, `/broker-configs` for the cluster-wide
//! defaults), what kafka-configs.sh `--entity-type brokers` changes.

use clap::Subcommand;
use hyper::Method;
use serde_json::{json, Value};

use crate::error::CliError;
use crate::http::encode;
use crate::output::{cell, print, print_json, table};
use crate::spec::parse_key_value;
use crate::Connection;

#[derive(Debug, Subcommand)]
pub enum BrokerConfigsCommand {
    /// Every config of the broker with its value and where it comes from
    /// (with --cluster-default: only the cluster-wide defaults set).
    List {
        /// The cluster-wide defaults (Kafka's --entity-default).
        #[arg(long)]
        cluster_default: bool,
    },
    /// Set or delete configs, all of them or none.
    Alter {
        /// Change the cluster-wide defaults instead of this broker's own
        /// values (which win over them).
        #[arg(long)]
        cluster_default: bool,
        /// Set a config, NAME=VALUE (repeat for more), e.g.
        /// log.retention.ms=86400000.
        #[arg(long = "set", value_name = "NAME=VALUE", value_parser = parse_key_value)]
        set: Vec<(String, String)>,
        /// Remove a value (repeat for more): back to the default.
        #[arg(long = "delete", value_name = "NAME")]
        delete: Vec<String>,
    },
}

pub async fn run(connection: &Connection, command: BrokerConfigsCommand) -> Result<(), CliError> {
    let mut client = connection.client()?;
    let cluster = client.cluster_id().await?;
    let base = |cluster_default: bool| {
        if cluster_default {
            format!("/v3/clusters/{}/broker-configs", encode(&cluster))
        } else {
            format!("/v3/clusters/{}/brokers/0/configs", encode(&cluster))
        }
    };
    match command {
        BrokerConfigsCommand::List { cluster_default } => {
            let list = client.get_json(&base(cluster_default)).await?;
            let items = list["data"].as_array().cloned().unwrap_or_default();
            let rows: Vec<Value> = items
                .iter()
                .map(|c| {
                    json!({
                        "name": c["name"],
                        "value": c["value"],
                        "source": c["source"],
                        "read_only": c["is_read_only"],
                        "without_effect": c.get("without_effect").cloned().unwrap_or(Value::Null),
                    })
                })
                .collect();
            if connection.json {
                return print_json(&Value::Array(rows));
            }
            let cells: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    let note = if r["read_only"] == true {
                        "read-only (broker.yaml)"
                    } else if r["without_effect"].is_string() {
                        "no effect here"
                    } else {
                        ""
                    };
                    vec![
                        cell(&r["name"]),
                        cell(&r["value"]),
                        cell(&r["source"]),
                        note.into(),
                    ]
                })
                .collect();
            print(&table(&["CONFIG", "VALUE", "SOURCE", ""], &cells))
        }
        BrokerConfigsCommand::Alter {
            cluster_default,
            set,
            delete,
        } => {
            if set.is_empty() && delete.is_empty() {
                return Err(CliError::usage(
                    "broker-configs alter: nothing to change (give --set NAME=VALUE or --delete NAME)",
                ));
            }
            let data = crate::topics::alter_entries(&set, &delete);
            let path = format!("{}:alter", base(cluster_default));
            client
                .send_json(Method::POST, &path, &json!({ "data": data }))
                .await?;
            let whose = if cluster_default {
                "the cluster-wide defaults"
            } else {
                "broker 0"
            };
            if connection.json {
                return print_json(&json!({"altered": data, "cluster_default": cluster_default}));
            }
            print(&format!("altered {} config(s) of {whose}\n", data.len()))
        }
    }
}
