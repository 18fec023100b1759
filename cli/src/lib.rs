//! The command-line client of the `tidelog` binary: `tidelog topics`,
//! `produce`, `consume`, `groups`, `compact`, `stats`, `cluster`, `users`,
//! `acls`,
//! each a thin caller
//! of the HTTP API of docs/API.md (the CLI holds no state of its own and
//! decides nothing the server decides: it parses arguments, makes the
//! calls, renders the answers).
//!
//! Invariants:
//! * Output for people is tables on stdout; `--json` prints the same
//!   facts as one JSON document (or one JSON object per record for
//!   `consume`) for scripts. Messages and progress go to stderr.
//! * Every failure exits with a code of [`error::exit`] that tells its kind
//!   apart, and a server error's message quotes the server's `error_code`
//!   and `message`.
//! * A request is never sent twice (see `http.rs`), so `produce` writes
//!   each line at most once, and reports how many were acknowledged when it
//!   stops on an error.

/// The exit codes for `--help` (a macro, so `consume`'s help can
/// `concat!` it after its format tokens).
macro_rules! exit_codes_text {
    () => {
        "Exit codes: 0 ok, 1 the server refused (4xx: bad input, admin token missing or wrong, \
         conflict), 2 bad usage, 3 cannot connect (or the connection broke), 4 server error (5xx) \
         or an unreadable answer, 5 not found (404), 6 stdin/stdout failed, 7 compact --wait \
         timed out."
    };
}

mod admin;
mod broker_configs;
mod cluster;
mod consume;
pub mod error;
pub mod format;
mod groups;
mod http;
mod output;
mod produce;
mod security;
pub mod spec;
mod tls;
mod topics;

use clap::{Args, Subcommand};

pub use error::{exit, CliError, EXIT_CODES_HELP};

/// Where the server is and how to talk to it; every client command takes
/// these (also after its subcommand: `tidelog topics list --json`).
#[derive(Debug, Clone, Args)]
pub struct Connection {
    /// Base URL of the tidelog HTTP API.
    #[arg(
        long,
        global = true,
        env = "TIDELOG_URL",
        default_value = "http://127.0.0.1:8080"
    )]
    pub url: String,
    /// The admin token (`admin_token` of the server's config), sent as
    /// `Authorization: Bearer` for the calls that change something.
    #[arg(long, global = true, env = "TIDELOG_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// A user of the server (`security.authentication`), sent with every
    /// request as HTTP Basic, with the password of `--password-file` or
    /// `TIDELOG_PASSWORD`.
    #[arg(long, global = true, env = "TIDELOG_USER")]
    pub user: Option<String>,
    /// The file whose content (one trailing newline dropped) is the
    /// user's password; never on the command line, where `ps` shows it.
    #[arg(long, global = true, env = "TIDELOG_PASSWORD_FILE")]
    pub password_file: Option<std::path::PathBuf>,
    /// For an https:// --url: the CA certificate (PEM) that signed the
    /// server's certificate.
    #[arg(long, global = true, env = "TIDELOG_CA_FILE")]
    pub ca_file: Option<std::path::PathBuf>,
    /// For a server that asks for client certificates (mTLS): this
    /// client's certificate (PEM), with --key-file.
    #[arg(long, global = true, env = "TIDELOG_CERT_FILE")]
    pub cert_file: Option<std::path::PathBuf>,
    /// The private key (PEM) of --cert-file.
    #[arg(long, global = true, env = "TIDELOG_KEY_FILE")]
    pub key_file: Option<std::path::PathBuf>,
    /// Print JSON for scripts instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
}

/// The client commands, flattened into the binary's subcommands.
#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// List, create, describe, alter and delete topics.
    #[command(after_help = EXIT_CODES_HELP)]
    Topics {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: topics::TopicsCommand,
    },
    /// The broker's configs (what kafka-configs.sh --entity-type brokers
    /// changes): list, alter.
    #[command(after_help = EXIT_CODES_HELP)]
    BrokerConfigs {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: broker_configs::BrokerConfigsCommand,
    },
    /// Produce records read from stdin, one per line.
    #[command(after_help = EXIT_CODES_HELP)]
    Produce(produce::ProduceArgs),
    /// Print records of a topic (kcat-like), or consume them in a group.
    #[command(after_help = consume::CONSUME_HELP)]
    Consume(consume::ConsumeArgs),
    /// Consumer groups: list, describe with lag, reset offsets.
    #[command(after_help = EXIT_CODES_HELP)]
    Groups {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: groups::GroupsCommand,
    },
    /// Run a compaction pass over a compact topic now.
    #[command(after_help = EXIT_CODES_HELP)]
    Compact(admin::CompactArgs),
    /// The server's store, retention, cleaner and group statistics.
    #[command(after_help = EXIT_CODES_HELP)]
    Stats {
        #[command(flatten)]
        connection: Connection,
    },
    /// The cluster as the node asked sees it: epoch, master, every node's
    /// role, sync and lag (a single node: the one master).
    #[command(after_help = EXIT_CODES_HELP)]
    Cluster {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: cluster::ClusterCommand,
    },
    /// Users who log in (SCRAM, PLAIN, HTTP Basic): list, create, delete,
    /// passwd.
    #[command(after_help = EXIT_CODES_HELP)]
    Users {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: security::UsersCommand,
    },
    /// Kafka-model ACLs: list, create, delete.
    #[command(after_help = EXIT_CODES_HELP)]
    Acls {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: security::AclsCommand,
    },
}

/// Runs one client command to its end; returns the process exit code
/// (errors are printed on stderr).
pub fn run(command: ClientCommand) -> u8 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("tidelog: cannot start the async runtime: {e}");
            return exit::SERVER;
        }
    };
    match runtime.block_on(dispatch(command)) {
        Ok(()) => exit::OK,
        Err(e) if e.is_broken_pipe() => exit::OK,
        Err(e) => {
            eprintln!("tidelog: {e}");
            e.exit_code()
        }
    }
}

async fn dispatch(command: ClientCommand) -> Result<(), CliError> {
    match command {
        ClientCommand::Topics {
            connection,
            command,
        } => topics::run(&connection, command).await,
        ClientCommand::BrokerConfigs {
            connection,
            command,
        } => broker_configs::run(&connection, command).await,
        ClientCommand::Produce(args) => produce::run(args).await,
        ClientCommand::Consume(args) => consume::run(args).await,
        ClientCommand::Groups {
            connection,
            command,
        } => groups::run(&connection, command).await,
        ClientCommand::Compact(args) => admin::compact(args).await,
        ClientCommand::Stats { connection } => admin::stats(&connection).await,
        ClientCommand::Cluster {
            connection,
            command,
        } => cluster::run(&connection, command).await,
        ClientCommand::Users {
            connection,
            command,
        } => security::users(&connection, command).await,
        ClientCommand::Acls {
            connection,
            command,
        } => security::acls(&connection, command).await,
    }
}

impl Connection {
    fn client(&self) -> Result<http::Client, CliError> {
        let endpoint = http::Endpoint::parse(&self.url)?;
        let login = match &self.user {
            None => None,
            Some(user) => Some(http::Login {
                user: user.clone(),
                password: self.password()?,
            }),
        };
        let tls = match endpoint.tls {
            true => Some(
                tls::TlsFiles {
                    ca_file: self.ca_file.clone(),
                    cert_file: self.cert_file.clone(),
                    key_file: self.key_file.clone(),
                }
                .connector()?,
            ),
            false => None,
        };
        Ok(http::Client::new(
            endpoint,
            http::Credentials {
                token: self.token.clone(),
                login,
            },
            tls,
        ))
    }

    /// `--password-file`'s content, else `TIDELOG_PASSWORD`.
    fn password(&self) -> Result<String, CliError> {
        if let Some(path) = &self.password_file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| CliError::usage(format!("--password-file {}: {e}", path.display())))?;
            let text = text.strip_suffix('\n').unwrap_or(&text);
            let text = text.strip_suffix('\r').unwrap_or(text);
            return Ok(text.to_owned());
        }
        std::env::var("TIDELOG_PASSWORD").map_err(|_| {
            CliError::usage("--user needs a password: --password-file FILE or TIDELOG_PASSWORD")
        })
    }
}
