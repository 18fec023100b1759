//! `tidelog users list|create|delete|passwd` and `tidelog acls
//! list|create|delete`: the users routes (`/v1/security/users`) and the v3
//! ACL routes of docs/SECURITY.md. Passwords are read from a file or
//! `TIDELOG_NEW_PASSWORD`, never taken on the command line.

use clap::Subcommand;
use hyper::Method;
use serde_json::{json, Value};

use crate::error::CliError;
use crate::http::encode;
use crate::output::{cell, print, print_json, table};
use crate::Connection;

#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// Every user's name.
    List,
    /// Create a user with a password (409 if it exists).
    Create(PasswordArgs),
    /// Delete a user: its open connections fail their next request.
    Delete { name: String },
    /// Set a user's password (the old one is then valid under no
    /// mechanism).
    Passwd(PasswordArgs),
}

#[derive(Debug, clap::Args)]
pub struct PasswordArgs {
    pub name: String,
    /// The file whose content (one trailing newline dropped) is the new
    /// password; without it, `TIDELOG_NEW_PASSWORD`.
    #[arg(long)]
    pub new_password_file: Option<std::path::PathBuf>,
    /// SCRAM-SHA-256 or SCRAM-SHA-512.
    #[arg(long, default_value = "SCRAM-SHA-256")]
    pub algorithm: String,
}

impl PasswordArgs {
    fn password(&self) -> Result<String, CliError> {
        if let Some(path) = &self.new_password_file {
            let text = std::fs::read_to_string(path).map_err(|e| {
                CliError::usage(format!("--new-password-file {}: {e}", path.display()))
            })?;
            let text = text.strip_suffix('\n').unwrap_or(&text);
            return Ok(text.strip_suffix('\r').unwrap_or(text).to_owned());
        }
        std::env::var("TIDELOG_NEW_PASSWORD").map_err(|_| {
            CliError::usage(
                "a password is needed: --new-password-file FILE or TIDELOG_NEW_PASSWORD",
            )
        })
    }
}

pub async fn users(connection: &Connection, command: UsersCommand) -> Result<(), CliError> {
    let mut client = connection.client()?;
    match command {
        UsersCommand::List => {
            let names = client.get_json("/v1/security/users").await?;
            if connection.json {
                return print_json(&names);
            }
            let rows: Vec<Vec<String>> = names
                .as_array()
                .map(|a| a.iter().map(|n| vec![cell(n)]).collect())
                .unwrap_or_default();
            print(&table(&["USER"], &rows))
        }
        UsersCommand::Create(args) => {
            let body = json!({"username": args.name, "password": args.password()?, "algorithm": args.algorithm});
            let answer = client
                .send_json(Method::POST, "/v1/security/users", &body)
                .await?;
            done(connection, &answer, &format!("user {} created", args.name))
        }
        UsersCommand::Passwd(args) => {
            let body = json!({"password": args.password()?, "algorithm": args.algorithm});
            let path = format!("/v1/security/users/{}", encode(&args.name));
            let answer = client.send_json(Method::PUT, &path, &body).await?;
            done(
                connection,
                &answer,
                &format!("password of {} set", args.name),
            )
        }
        UsersCommand::Delete { name } => {
            let path = format!("/v1/security/users/{}", encode(&name));
            let answer = client
                .send_json(Method::DELETE, &path, &Value::Null)
                .await?;
            done(connection, &answer, &format!("user {name} deleted"))
        }
    }
}

fn done(connection: &Connection, answer: &Value, text: &str) -> Result<(), CliError> {
    if connection.json {
        print_json(answer)
    } else {
        print(&format!("{text}\n"))
    }
}

#[derive(Debug, Subcommand)]
pub enum AclsCommand {
    /// The ACLs the filter flags match (each left out matches all).
    List(AclFilterArgs),
    /// Create one ACL.
    Create(AclArgs),
    /// Delete the ACLs the filter flags match; prints them.
    Delete(AclFilterArgs),
}

/// An ACL's fields, as Kafka names them.
#[derive(Debug, clap::Args)]
pub struct AclArgs {
    /// TOPIC, GROUP, CLUSTER or TRANSACTIONAL_ID.
    #[arg(long)]
    pub resource_type: String,
    /// The resource's name (`kafka-cluster` for CLUSTER; `*` for all).
    #[arg(long)]
    pub resource_name: String,
    /// LITERAL or PREFIXED.
    #[arg(long, default_value = "LITERAL")]
    pub pattern_type: String,
    /// `User:<name>`, or `User:*` for every user.
    #[arg(long)]
    pub principal: String,
    /// An IP address, or `*`.
    #[arg(long, default_value = "*")]
    pub host: String,
    /// READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS,
    /// ALTER_CONFIGS, IDEMPOTENT_WRITE, ALL, ...
    #[arg(long)]
    pub operation: String,
    /// ALLOW or DENY.
    #[arg(long, default_value = "ALLOW")]
    pub permission: String,
}

/// A filter: each flag left out matches every value.
#[derive(Debug, clap::Args)]
pub struct AclFilterArgs {
    #[arg(long)]
    pub resource_type: Option<String>,
    #[arg(long)]
    pub resource_name: Option<String>,
    /// LITERAL, PREFIXED, MATCH or ANY.
    #[arg(long)]
    pub pattern_type: Option<String>,
    #[arg(long)]
    pub principal: Option<String>,
    #[arg(long)]
    pub host: Option<String>,
    #[arg(long)]
    pub operation: Option<String>,
    #[arg(long)]
    pub permission: Option<String>,
}

impl AclFilterArgs {
    /// The query string; a delete names at least a resource type (ANY by
    /// default, so `acls delete --principal User:x` deletes all of x's).
    fn query(&self, delete: bool) -> String {
        let resource_type = match (&self.resource_type, delete) {
            (Some(t), _) => Some(t.as_str()),
            (None, true) => Some("ANY"),
            (None, false) => None,
        };
        let fields = [
            ("resource_type", resource_type),
            ("resource_name", self.resource_name.as_deref()),
            ("pattern_type", self.pattern_type.as_deref()),
            ("principal", self.principal.as_deref()),
            ("host", self.host.as_deref()),
            ("operation", self.operation.as_deref()),
            ("permission", self.permission.as_deref()),
        ];
        let pairs: Vec<String> = fields
            .iter()
            .filter_map(|(k, v)| v.map(|v| format!("{k}={}", encode(v))))
            .collect();
        if pairs.is_empty() {
            String::new()
        } else {
            format!("?{}", pairs.join("&"))
        }
    }
}

pub async fn acls(connection: &Connection, command: AclsCommand) -> Result<(), CliError> {
    let mut client = connection.client()?;
    let cluster = client.cluster_id().await?;
    let base = format!("/v3/clusters/{}/acls", encode(&cluster));
    let answer = match &command {
        AclsCommand::List(filter) => {
            client
                .get_json(&format!("{base}{}", filter.query(false)))
                .await?
        }
        AclsCommand::Delete(filter) => {
            let path = format!("{base}{}", filter.query(true));
            client
                .send_json(Method::DELETE, &path, &Value::Null)
                .await?
        }
        AclsCommand::Create(acl) => {
            let body = json!({
                "resource_type": acl.resource_type, "resource_name": acl.resource_name,
                "pattern_type": acl.pattern_type, "principal": acl.principal, "host": acl.host,
                "operation": acl.operation, "permission": acl.permission,
            });
            let answer = client.send_json(Method::POST, &base, &body).await?;
            json!({"data": [answer]})
        }
    };
    if connection.json {
        return print_json(&answer);
    }
    let rows: Vec<Vec<String>> = answer["data"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|acl| {
                    [
                        "principal",
                        "host",
                        "operation",
                        "permission",
                        "resource_type",
                        "pattern_type",
                        "resource_name",
                    ]
                    .iter()
                    .map(|k| cell(&acl[*k]))
                    .collect()
                })
                .collect()
        })
        .unwrap_or_default();
    print(&table(
        &[
            "PRINCIPAL",
            "HOST",
            "OPERATION",
            "PERMISSION",
            "RESOURCE",
            "PATTERN",
            "NAME",
        ],
        &rows,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_is_a_query_and_a_delete_names_a_type() {
        let filter = AclFilterArgs {
            resource_type: None,
            resource_name: None,
            pattern_type: None,
            principal: Some("User:bob".into()),
            host: None,
            operation: None,
            permission: None,
        };
        assert_eq!(filter.query(false), "?principal=User%3Abob");
        assert_eq!(
            filter.query(true),
            "?resource_type=ANY&principal=User%3Abob"
        );
    }
}
