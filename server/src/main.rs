//! The `tidelog` binary: command line, configuration, and the wiring of
//! the node (`node.rs`: what both front-ends share) with the broker, the
//! HTTP API and the Kafka listener (`serve.rs`); each front-end owns its
//! listener.
//!
//! Exit codes: 0 success, 1 runtime failure, 2 bad configuration or usage
//! (clap also uses 2 for usage errors), so scripts can tell "fix the file"
//! from "look at the logs". The client commands (`topics`, `produce`,
//! `consume`, `groups`, `compact`, `stats`: the `tidelog-cli` crate) have
//! their own finer set, `tidelog_cli::exit`, with 1 and 2 meaning the same.

mod cluster;
mod config;
mod descriptors;
mod node;
mod restore;
mod serve;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::{CliOverrides, Config, LogFormat};

/// mimalloc instead of glibc's malloc: the server allocates on tokio
/// workers and frees on other threads (answers, records handed between the
/// HTTP and storage sides), which glibc handles with arena locks and
/// consolidation; profiles and the measurements in docs/BENCHMARKS.md.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `tidelog --version`: the crate version and the commit it was built
/// from (build.rs).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("TIDELOG_COMMIT"),
    ")"
);

#[derive(Debug, Parser)]
#[command(
    name = "tidelog",
    version = VERSION,
    about = "A single-node log server speaking Confluent REST Proxy's HTTP/JSON dialect"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the server (built-in defaults < --config file < flags).
    Serve {
        /// YAML config file (see configs/broker.yaml).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Data directory; overrides `data_dir` of the file.
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
        /// Listen address, e.g. 127.0.0.1:8080; overrides `listen` of the file.
        #[arg(long, value_name = "ADDR")]
        listen: Option<std::net::SocketAddr>,
        /// Kafka listen address, or `none` for no Kafka listener; overrides
        /// `kafka.listen` of the file.
        #[arg(long, value_name = "ADDR|none", value_parser = parse_kafka_listen)]
        kafka_listen: Option<KafkaListen>,
        /// Log lines as text or JSON; overrides `log_format` of the file.
        #[arg(long, value_enum, value_name = "text|json")]
        log_format: Option<LogFormat>,
    },
    /// HTTP load test: produce, fetch and long-poll visibility against a
    /// tidelog (started with a temp data dir, or --url) and a bare axum
    /// endpoint as the machine's HTTP ceiling.
    Bench(tidelog_bench::BenchArgs),
    /// Load and validate a config file, print the effective config as YAML.
    CheckConfig {
        /// YAML config file.
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// Restore an empty data dir from a remote tier (docs/TIERED.md,
    /// "Restore"): topics, configs, compact topics' tables and committed
    /// offsets; remote records are then read from the bucket.
    Restore(restore::RestoreArgs),
    /// The client commands: topics, produce, consume, groups, compact,
    /// stats (docs/CLI.md).
    #[command(flatten)]
    Client(tidelog_cli::ClientCommand),
}

pub(crate) const EXIT_RUNTIME: u8 = 1;
pub(crate) const EXIT_CONFIG: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::CheckConfig { file } => check_config(&file),
        Command::Bench(args) => bench(args),
        Command::Restore(args) => restore::run(args),
        Command::Client(command) => ExitCode::from(tidelog_cli::run(command)),
        Command::Serve {
            config,
            data_dir,
            listen,
            kafka_listen,
            log_format,
        } => serve(
            config,
            CliOverrides {
                data_dir,
                listen,
                kafka_listen: kafka_listen.map(|k| k.0),
                log_format,
            },
        ),
    }
}

/// `--kafka-listen`: an address, or `None` for `none` (no Kafka listener).
/// A type of its own: clap reads `Option<Option<_>>` as a flag with an
/// optional value.
#[derive(Debug, Clone, PartialEq, Eq)]
struct KafkaListen(Option<std::net::SocketAddr>);

fn parse_kafka_listen(text: &str) -> Result<KafkaListen, String> {
    if text == "none" {
        return Ok(KafkaListen(None));
    }
    text.parse()
        .map(|addr| KafkaListen(Some(addr)))
        .map_err(|e| format!("{e} (an address such as 127.0.0.1:9092, or none)"))
}

/// `tidelog bench` (the `tidelog-bench` crate).
fn bench(args: tidelog_bench::BenchArgs) -> ExitCode {
    match tidelog_bench::run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tidelog bench: {e:#}");
            ExitCode::from(EXIT_RUNTIME)
        }
    }
}

fn check_config(file: &std::path::Path) -> ExitCode {
    let config = match Config::load(Some(file), &CliOverrides::default()) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("tidelog: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    match config.to_redacted_yaml() {
        Ok(yaml) => {
            print!("{yaml}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            // Only a non-UTF-8 data_dir can get here.
            eprintln!(
                "tidelog: {}: cannot print the effective config: {e}",
                file.display()
            );
            ExitCode::from(EXIT_CONFIG)
        }
    }
}

fn serve(file: Option<PathBuf>, cli: CliOverrides) -> ExitCode {
    // The log format is the config's, so the config is read first; its
    // errors go to stderr without the log.
    let config = match Config::load(file.as_deref(), &cli) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("tidelog: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    init_tracing(config.log_format);
    match config.to_redacted_yaml() {
        Ok(yaml) => tracing::info!("effective config:\n{yaml}"),
        Err(e) => tracing::warn!("cannot render the effective config: {e}"),
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("tidelog-http")
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("tidelog: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_RUNTIME);
        }
    };
    let code = runtime.block_on(serve::run(config));
    // Blocking tasks still running (none after a clean shutdown) must not
    // hold the exit up.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    code
}

/// Logs to stderr; `RUST_LOG` filters (default `info`). Text has colours
/// only when stderr is a terminal and `NO_COLOR` is unset
/// (no-color.org: set to anything non-empty); JSON is one object per line
/// (`timestamp`, `level`, `target`, `fields`, the span list), never
/// coloured.
pub(crate) fn init_tracing(format: LogFormat) {
    use std::io::IsTerminal as _;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => {
            let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
            builder
                .with_ansi(std::io::stderr().is_terminal() && !no_color)
                .init();
        }
        LogFormat::Json => builder.json().with_ansi(false).init(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn serve_flags_parse() {
        let cli = Cli::try_parse_from([
            "tidelog",
            "serve",
            "--config",
            "c.yaml",
            "--data-dir",
            "/d",
            "--listen",
            "127.0.0.1:9",
            "--kafka-listen",
            "127.0.0.1:19092",
        ])
        .unwrap();
        match cli.command {
            Command::Serve {
                config,
                data_dir,
                listen,
                kafka_listen,
                ..
            } => {
                assert_eq!(config, Some(PathBuf::from("c.yaml")));
                assert_eq!(data_dir, Some(PathBuf::from("/d")));
                assert_eq!(listen, Some("127.0.0.1:9".parse().unwrap()));
                assert_eq!(
                    kafka_listen,
                    Some(KafkaListen(Some("127.0.0.1:19092".parse().unwrap())))
                );
            }
            other => panic!("parsed as {other:?}"),
        }
        let off = Cli::try_parse_from(["tidelog", "serve", "--kafka-listen", "none"]).unwrap();
        assert!(matches!(
            off.command,
            Command::Serve {
                kafka_listen: Some(KafkaListen(None)),
                ..
            }
        ));
        assert!(Cli::try_parse_from(["tidelog", "serve", "--kafka-listen", "nowhere"]).is_err());
        assert!(Cli::try_parse_from(["tidelog", "serve", "--listen", "nowhere"]).is_err());
        assert!(
            Cli::try_parse_from(["tidelog", "check-config"]).is_err(),
            "FILE is required"
        );
    }
}
