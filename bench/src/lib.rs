//! `tidelog bench`: an HTTP load generator for produce, fetch and
//! long-poll visibility, with the machine's HTTP ceiling measured in the
//! same run (issue 3, "Benchmark"; results in docs/BENCHMARKS.md), and
//! with `--protocol kafka` the same over the Kafka protocol (issue 16).
//!
//! One run (`--protocol http`, the default):
//! 1. Starts the targets: tidelog (a child `tidelog serve` with a temporary
//!    data dir on a free 127.0.0.1 port, or `--url` for a running one) and
//!    the bare endpoint (`ceiling.rs`, in this process on its own
//!    runtime), and creates a fresh topic with `--partitions` partitions.
//! 2. Produce: `--connections` keep-alive connections, each POSTing
//!    `--batch` binary records of `--record-bytes` to
//!    `/topics/{t}/partitions/{conn % partitions}` back to back, for
//!    `--warmup-ms` (not counted; this VM's memory goes cold when idle) and
//!    then `--duration-ms` (counted). The measured time is cut into
//!    `--rounds` slices that alternate tidelog, ceiling, tidelog, ... (each
//!    later slice re-warms for up to 1 s), so other processes' load, which
//!    comes and goes on a shared machine, falls on both targets alike.
//! 3. Fetch, the same way: the connections GET `max_records=batch` from
//!    their partition over what phase 2 wrote, starting spread out and
//!    wrapping around at the end.
//! 4. Visibility (tidelog only): one fetcher waits in a long-poll
//!    (`timeout=1000`) at the end of an otherwise idle partition, one
//!    producer sends a record; the sample is the time from the produce
//!    acknowledgement to the fetch answer, both seen by this client.
//!
//! It prints a progress line per second of every phase, then a table:
//! records/s and MB/s (record values only, 10^6 B/s), and the p50/p99/p999
//! of request latency (send to last byte of the answer), tidelog beside the
//! ceiling with their ratio, and the goals of issue 3.
//!
//! `--protocol kafka` (`kafka_run`) starts tidelog with a Kafka listener
//! on a free port and the bare Kafka listener (`kafka_ceiling`: frames and
//! decodes Produce and Fetch, record batches included, stores nothing)
//! instead of the bare endpoint, then runs the same alternating phases
//! with Kafka requests (`kafka_client`, one in flight per connection):
//! Produce of one `--batch` batch with `--acks`, beside tidelog's own HTTP
//! produce of the same records as a third target, and Fetch. No
//! visibility phase.
//!
//! Every loop is bounded by time and by a count; only 127.0.0.1 is ever
//! contacted. The client shares the machine's cores with the server it
//! measures, as the ceiling does; the ratio is between two equally loaded
//! runs, not an absolute server cost.
//!
//! `--recovery-mib N` (`recovery`) fills the started server's CommitLog,
//! kills it with SIGKILL and times its recovery, cold, beside a cold `cat`
//! of the same bytes. `--json FILE` writes any run's figures as JSON
//! (`results`); `--suite-table DIR` builds `scripts/bench.sh`'s table from
//! a directory of them (`suite`). `--tiered-mib N` (`tiered`) measures
//! tiered storage's upload and remote fetch beside plain object_store
//! puts and gets to the same bucket. `--security` (`security_run`, over
//! `secure`: TLS and SCRAM in the load connections) measures SASL_SSL
//! against PLAINTEXT, HTTPS against HTTP, 10,000 ACLs against none and a
//! login's server CPU. `--transactions --protocol kafka` (`txn_run`,
//! over `kafka_producer`'s idempotent and transactional producers)
//! measures transactional produce against idempotent, read_committed
//! fetch against read_uncommitted and the LSO lag (issue 38).
//! `--cluster --protocol kafka` (`cluster_run`, over `etcd`,
//! `cluster_nodes`, `replication_lag` and `failover`) measures acks=all
//! produce to a three-node cluster against a single node, the replicas'
//! lag under that load and failovers after kill -9 (issue 39). Every run
//! prints an in-process memory copy rate first and what the started
//! server holds at its end (`machine`: RssAnon, files, mappings).
//!
//! The crate's modules, by role: `run` (the orchestration above),
//! `target` (the child server and its temporary data dir, `--url`),
//! `admin` (cluster, topic and offset lookups), `load` (the produce and
//! fetch phases), `visibility`, `body` (request bodies), `report` (the
//! table and goals), with `client` (one bare hyper HTTP/1.1 connection),
//! `ceiling`, `cpu` and `histogram` beneath them; the figures are leaves
//! beneath every runner and report: `measured` (what a phase measured),
//! `results` (a run's figures, JSON), `machine` (the machine's limits and
//! the server's holdings), and `render` (the pieces of every text report); `compact` (keyed
//! produce to compact topics, the dispatch-lag sampler, `--compare-delete`);
//! `kafka_run`,
//! `kafka_client` and `kafka_ceiling` for the Kafka protocol, with
//! `kafka_producer` and `txn_run` for its transactions. The `tidelog` binary
//! calls [`run`] from its `bench` subcommand.

mod admin;
mod body;
mod ceiling;
mod client;
mod cluster_nodes;
mod cluster_run;
mod compact;
mod cpu;
mod etcd;
mod failover;
mod histogram;
mod kafka_ceiling;
mod kafka_client;
mod kafka_producer;
mod kafka_run;
#[cfg(test)]
mod kafka_tests;
mod load;
mod machine;
mod measured;
mod recovery;
mod render;
mod replication_lag;
mod report;
mod results;
mod run;
mod secure;
mod security_run;
mod suite;
mod target;
mod tiered;
mod txn_run;
mod visibility;

use std::net::SocketAddr;
use std::path::PathBuf;

pub use self::results::{PhaseFigures, RunResults, VisibilityFigures};
pub use self::run::run;

/// `tidelog bench` options.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// The protocol of the load: `http` (produce, fetch and visibility over
    /// the REST API beside the bare axum endpoint) or `kafka` (produce and
    /// fetch over the Kafka protocol beside the bare Kafka listener, with
    /// tidelog's HTTP produce alongside).
    #[arg(long, value_enum, default_value_t = Protocol::Http)]
    pub protocol: Protocol,
    /// Kafka: the produce requests' acks, 1 or -1 (all).
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub acks: i16,
    /// Kafka: the Kafka listener of the server given with --url, e.g.
    /// 127.0.0.1:9092 (127.0.0.1 only).
    #[arg(long, value_name = "ADDR")]
    pub kafka_addr: Option<SocketAddr>,
    /// A running tidelog to measure, e.g. http://127.0.0.1:8080 (127.0.0.1
    /// only). Default: start `tidelog serve` with a temporary data dir on a
    /// free port.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Concurrent keep-alive connections of the produce and fetch phases.
    #[arg(long, default_value_t = 64)]
    pub connections: usize,
    /// Records per produce request, and `max_records` of each fetch.
    #[arg(long, default_value_t = 100)]
    pub batch: usize,
    /// Bytes of each record value (keyless, no headers).
    #[arg(long, default_value_t = 100)]
    pub record_bytes: usize,
    /// Measured time of each produce and fetch phase.
    #[arg(long, default_value_t = 10_000)]
    pub duration_ms: u64,
    /// Unmeasured load before each produce and fetch phase.
    #[arg(long, default_value_t = 3_000)]
    pub warmup_ms: u64,
    /// Partitions of the bench topic; connection i uses partition i % n.
    #[arg(long, default_value_t = 8)]
    pub partitions: u32,
    /// Slices each measured phase into this many, alternating tidelog and
    /// ceiling, so load from other processes that comes and goes hits both
    /// alike. Rounds after the first re-warm for at most 1 s.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// Measured visibility samples (plus a tenth, at least 1, of warm-up).
    #[arg(long, default_value_t = 300)]
    pub visibility_samples: usize,
    /// Topic to create (default `bench-<unix ms>`); an existing one is used
    /// as it is.
    #[arg(long, value_name = "NAME")]
    pub topic: Option<String>,
    /// Where the started server's temporary data dir goes (default: the
    /// system temp dir). Ignored with --url.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Config file for the started server (`tidelog serve --config`).
    /// Ignored with --url.
    #[arg(long, value_name = "FILE")]
    pub server_config: Option<PathBuf>,
    /// Also write the run's figures as JSON to FILE (what
    /// `scripts/bench.sh` builds its table from).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Recovery instead of load: fill the started server's CommitLog with
    /// this many MiB (--connections producers of --batch x --record-bytes
    /// into --partitions), kill -9 it, drop its files from the page
    /// cache, and time the restart to ready beside a cold `cat` of the
    /// same bytes.
    #[arg(long, value_name = "MIB", conflicts_with_all = ["url", "suite_table"])]
    pub recovery_mib: Option<u64>,
    /// Tiered storage instead of load (`tiered.rs`): fill a tiered topic
    /// of the started server with this many MiB, time its upload and a
    /// fetch of it all from the remote tier, beside a plain object_store
    /// put and get of the same bytes to the same bucket. The bucket is
    /// --server-config's `tiered:` section.
    #[arg(long, value_name = "MIB", conflicts_with_all = ["url", "suite_table", "recovery_mib"])]
    pub tiered_mib: Option<u64>,
    /// Print the benchmark table (Markdown) from the results of a
    /// `scripts/bench.sh` run in DIR instead of running anything.
    #[arg(long, value_name = "DIR")]
    pub suite_table: Option<PathBuf>,
    /// The started server's `store.flush` (`sync`: every produce answered
    /// after an fsync covers it). Default: what its config says (--server-config,
    /// or the default, async). Ignored with --url.
    #[arg(long, value_enum)]
    pub flush: Option<Flush>,
    /// HTTP: `cleanup.policy` of the bench topics. `compact` keys the
    /// records (from `--keys` distinct keys) and adds the dispatch lag,
    /// sampled from the server's stats during produce, to the report.
    #[arg(long, value_enum, default_value_t = Policy::Delete)]
    pub policy: Policy,
    /// Distinct keys of the records produced to a compact topic.
    #[arg(long, default_value_t = 100_000)]
    pub keys: u64,
    /// HTTP: produce to a delete topic and to a compact topic (keyed as
    /// with `--policy compact`) in alternating slices of one run, beside
    /// the ceiling, then the visibility of both; reports compact / delete,
    /// the dispatch lag and the goals of issue 17 §2. No fetch phase.
    #[arg(long)]
    pub compare_delete: bool,
    /// HTTP, with `--flush sync`: also start a second server with `flush:
    /// async` and, after the produce phase, produce to both in
    /// alternating slices of one phase (`produce-vs-async`), so sync over
    /// async is a ratio of two equally loaded measurements (issue 17 §1).
    #[arg(long, conflicts_with_all = ["url", "compare_delete", "recovery_mib", "tiered_mib"])]
    pub compare_async: bool,
    /// What TLS, logins and ACLs cost (`security_run.rs`), beside
    /// plaintext in one run. Kafka: produce to and fetch from one started
    /// server's PLAINTEXT and SASL_SSL (SCRAM-SHA-512) listeners, produce
    /// to a second server with authorization on and 10,000 ACLs, and time
    /// logins. HTTP: produce to and fetch from an HTTP and an HTTPS
    /// server. Certificates are made for the run.
    #[arg(long, conflicts_with_all = ["url", "compare_delete", "compare_async", "recovery_mib", "tiered_mib", "suite_table"])]
    pub security: bool,
    /// `--security --protocol kafka`: logins the login phase times (one
    /// after another, each a new connection).
    #[arg(long, default_value_t = 200)]
    pub logins: usize,
    /// Kafka: what transactions cost (`txn_run.rs`), against one started
    /// server: idempotent and transactional producers (one transaction per
    /// --txn-batches batches, over every partition) in alternating slices,
    /// then read_committed and read_uncommitted fetches of what the
    /// transactions wrote, then the LSO lag (a small transaction's EndTxn
    /// answered to a waiting read_committed long-poll answered, beside a
    /// plain produce's ack to a read_uncommitted one). Acks are -1
    /// (an idempotent producer's) whatever --acks says.
    #[arg(long, conflicts_with_all = ["compare_delete", "compare_async", "recovery_mib", "tiered_mib", "suite_table", "security"])]
    pub transactions: bool,
    /// `--transactions`: produce batches in each transaction.
    #[arg(long, default_value_t = 100)]
    pub txn_batches: u32,
    /// Kafka: what a cluster costs (`cluster_run.rs`, issue 39): a single
    /// started node and a three-node cluster (master and two replicas,
    /// `min_insync_replicas: 2`, with an etcd from /usr/bin/etcd, which the
    /// bench does not install) in alternating slices of acks -1 produce
    /// (whatever --acks says), the replicas' lag sampled meanwhile, then
    /// --failovers rounds of kill -9 of the master to the first
    /// acknowledged produce on the new master.
    #[arg(long, conflicts_with_all = ["url", "compare_delete", "compare_async", "recovery_mib", "tiered_mib", "suite_table", "security", "transactions"])]
    pub cluster: bool,
    /// `--cluster`: failover rounds.
    #[arg(long, default_value_t = 20)]
    pub failovers: u32,
}

/// `--flush`: the started server's flush mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Flush {
    Sync,
    Async,
}

/// The `cleanup.policy` of the bench topics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Policy {
    Delete,
    Compact,
}

/// The protocol `tidelog bench` loads tidelog with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Protocol {
    Http,
    Kafka,
}
