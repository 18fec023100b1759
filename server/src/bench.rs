//! `tidelog bench`: an HTTP load generator for produce, fetch and
//! long-poll visibility, with the machine's HTTP ceiling measured in the
//! same run (issue 3, "Benchmark"; results in docs/BENCHMARKS.md).
//!
//! One run:
//! 1. Starts the targets: tidelog (a child `tidelog serve` with a temporary
//!    data dir on a free 127.0.0.1 port, or `--url` for a running one) and
//!    the bare endpoint (`bench/ceiling.rs`, in this process on its own
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
//! Every loop is bounded by time and by a count; only 127.0.0.1 is ever
//! contacted. The client shares the machine's cores with the server it
//! measures, as the ceiling does; the ratio is between two equally loaded
//! runs, not an absolute server cost.

mod ceiling;
mod client;
mod cpu;
mod histogram;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context as _};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use hyper::StatusCode;
use tidelog_api::records::BINARY_V2;

use self::client::{count_occurrences, Conn};
use self::cpu::CpuSource;
use self::histogram::Histogram;

/// Threads of the load generator's runtime (their CPU time is reported).
const CLIENT_THREAD_NAME: &str = "tidelog-bench";

/// Goal of issue 3: produce and fetch reach at least this share of the
/// bare endpoint's records/s.
const RATIO_GOAL: f64 = 0.5;
/// Goal of issue 3: p99 visibility latency at moderate load.
const VISIBILITY_P99_GOAL: Duration = Duration::from_millis(5);
/// Long-poll timeout of the visibility fetcher (ms).
const VISIBILITY_TIMEOUT_MS: u64 = 1000;
/// How long the visibility fetcher is given to park in its long-poll
/// before the record is produced (loopback round trips take ~0.1 ms).
const VISIBILITY_PARK: Duration = Duration::from_millis(5);
/// Ready wait for the started server (recovery of an empty dir is instant;
/// preallocating the first segment is not, on a cold VM).
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Hard cap of requests per connection and phase, beside the time bound.
const REQUESTS_PER_CONNECTION_MAX: u64 = 50_000_000;
/// Transport failures a load connection survives (by reconnecting).
const RECONNECTS_MAX: u32 = 3;
/// Longest phase accepted (warm-up or measurement).
const PHASE_MS_MAX: u64 = 3_600_000;

/// `tidelog bench` options.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
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
}

/// Entry point of the subcommand.
pub fn main(args: BenchArgs) -> ExitCode {
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tidelog bench: {e:#}");
            ExitCode::from(crate::EXIT_RUNTIME)
        }
    }
}

fn run(args: BenchArgs) -> anyhow::Result<()> {
    check_args(&args)?;
    let topic = match &args.topic {
        Some(topic) => topic.clone(),
        None => format!("bench-{}", unix_ms()),
    };
    // Started before the client runtime; dropped (stopped) after it.
    let ceiling = ceiling::start(&topic, args.batch, args.record_bytes)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name(CLIENT_THREAD_NAME)
        .build()
        .context("starting the client runtime")?;
    let result = runtime.block_on(bench(&args, &topic, ceiling.addr));
    runtime.shutdown_timeout(Duration::from_secs(1));
    drop(ceiling);
    result
}

fn check_args(args: &BenchArgs) -> anyhow::Result<()> {
    if let Some(url) = &args.url {
        parse_local_url(url)?;
    }
    ensure!(
        (1..=1000).contains(&args.connections),
        "--connections must be 1..=1000 (the server's default limit is 1024 requests at once)"
    );
    ensure!(
        (1..=10_000).contains(&args.batch),
        "--batch must be 1..=10000 (the server's records-per-request and max_records limit)"
    );
    ensure!(
        (1..=512 * 1024).contains(&args.record_bytes),
        "--record-bytes must be 1..=524288"
    );
    ensure!(
        args.batch * args.record_bytes <= 8 << 20,
        "--batch x --record-bytes must stay within 8 MiB (base64 of it must fit the 16 MiB request limit)"
    );
    ensure!(
        (1..=PHASE_MS_MAX).contains(&args.duration_ms),
        "--duration-ms must be 1..={PHASE_MS_MAX}"
    );
    ensure!(
        args.warmup_ms <= PHASE_MS_MAX,
        "--warmup-ms must be at most {PHASE_MS_MAX}"
    );
    ensure!(
        (1..=100).contains(&args.rounds) && u64::from(args.rounds) <= args.duration_ms,
        "--rounds must be 1..=100 and at most --duration-ms"
    );
    ensure!(
        (1..=1024).contains(&args.partitions),
        "--partitions must be 1..=1024"
    );
    ensure!(
        (1..=100_000).contains(&args.visibility_samples),
        "--visibility-samples must be 1..=100000"
    );
    Ok(())
}

async fn bench(args: &BenchArgs, topic: &str, ceiling_addr: SocketAddr) -> anyhow::Result<()> {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "tidelog bench: {} connections, batches of {} records x {} B, {} ms warm-up + {} ms measured per phase and target in {} alternating rounds, {} partitions, {} cores",
        args.connections,
        args.batch,
        args.record_bytes,
        args.warmup_ms,
        args.duration_ms,
        args.rounds,
        args.partitions,
        cores
    );
    let started_server;
    let (tidelog_addr, tidelog_cpu) = match &args.url {
        Some(url) => {
            started_server = None;
            let addr = parse_local_url(url)?;
            client::wait_ready(addr, Duration::from_secs(10), || Ok(())).await?;
            println!("tidelog: {url} (running server; its CPU time is not reported)");
            (addr, CpuSource::Unknown)
        }
        None => {
            let mut server = ChildServer::start(args)?;
            let addr = server.addr;
            client::wait_ready(addr, READY_TIMEOUT, || server.check_alive()).await?;
            println!(
                "tidelog: http://{addr} (child process {}, data dir {})",
                server.child.id(),
                server.data_dir.path().display()
            );
            let cpu = CpuSource::Process(server.child.id());
            started_server = Some(server);
            (addr, cpu)
        }
    };
    println!("ceiling: http://{ceiling_addr} (bare axum endpoint in this process: parse + base64-decode, store nothing)");

    let tidelog = (tidelog_addr, tidelog_cpu);
    let ceiling = (ceiling_addr, CpuSource::Threads(ceiling::THREAD_NAME));
    let outcome = measure_all(args, topic, tidelog, ceiling).await;
    if let Some(mut server) = started_server {
        server.stop();
        if outcome.is_err() {
            eprintln!(
                "--- server log ---\n{}",
                std::fs::read_to_string(&server.log_path).unwrap_or_default()
            );
        }
    }
    outcome
}

async fn measure_all(
    args: &BenchArgs,
    topic: &str,
    tidelog: Target,
    ceiling: Target,
) -> anyhow::Result<()> {
    let mut admin = Conn::connect(tidelog.0).await?;
    let cluster = cluster_id(&mut admin).await?;
    let partitions = ensure_topic(&mut admin, &cluster, topic, args.partitions).await?;
    let visibility_topic = format!("{topic}-visibility");
    ensure_topic(&mut admin, &cluster, &visibility_topic, 1).await?;
    println!("topic: {topic} ({partitions} partitions), visibility topic: {visibility_topic}");

    let produce_body = Bytes::from(produce_body(args.batch, args.record_bytes)?);
    let produce = Arc::new(Job::Produce {
        topic: topic.to_string(),
        partitions,
        body: produce_body,
    });
    let (tidelog_produce, ceiling_produce) =
        alternate("produce", tidelog, ceiling, &produce, args).await?;

    let mut ranges = Vec::with_capacity(partitions as usize);
    for p in 0..partitions {
        ranges.push(partition_offsets(&mut admin, topic, p).await?);
    }
    let fetch = Arc::new(Job::Fetch {
        topic: topic.to_string(),
        ranges,
        batch: args.batch,
    });
    let (tidelog_fetch, ceiling_fetch) = alternate("fetch", tidelog, ceiling, &fetch, args).await?;

    let visibility = visibility(tidelog.0, &visibility_topic, args).await?;

    report(
        args,
        [
            ("produce", &tidelog_produce, &ceiling_produce),
            ("fetch", &tidelog_fetch, &ceiling_fetch),
        ],
        &visibility,
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// Targets

/// `tidelog serve` as a child process on a free port with a temporary data
/// dir; killed when stopped or dropped (the data dir goes with it).
struct ChildServer {
    child: std::process::Child,
    addr: SocketAddr,
    data_dir: tempfile::TempDir,
    log_path: PathBuf,
}

impl ChildServer {
    fn start(args: &BenchArgs) -> anyhow::Result<ChildServer> {
        let exe = std::env::current_exe().context("locating the tidelog binary")?;
        let data_dir = match &args.data_dir {
            Some(parent) => tempfile::Builder::new()
                .prefix("tidelog-bench-")
                .tempdir_in(parent),
            None => tempfile::Builder::new().prefix("tidelog-bench-").tempdir(),
        }
        .context("creating the temporary data dir")?;
        let log_path = data_dir.path().join("server.log");
        let data_path = data_dir.path().join("data");
        let addr = free_local_addr()?;
        let log = std::fs::File::create(&log_path)
            .with_context(|| format!("creating {}", log_path.display()))?;
        let mut command = std::process::Command::new(&exe);
        command
            .arg("serve")
            .arg("--data-dir")
            .arg(&data_path)
            .arg("--listen")
            .arg(addr.to_string());
        if let Some(config) = &args.server_config {
            command.arg("--config").arg(config);
        }
        let child = command
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {} serve", exe.display()))?;
        Ok(ChildServer {
            child,
            addr,
            data_dir,
            log_path,
        })
    }

    fn check_alive(&mut self) -> anyhow::Result<()> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(anyhow!(
                "the tidelog server exited with {status}; its log:\n{}",
                std::fs::read_to_string(&self.log_path).unwrap_or_default()
            )),
            Err(e) => Err(anyhow!("checking on the tidelog server: {e}")),
        }
    }

    fn stop(&mut self) {
        // Its data is thrown away, so there is nothing to shut down cleanly.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn free_local_addr() -> anyhow::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .context("finding a free port on 127.0.0.1")?;
    listener.local_addr().context("finding a free port")
}

/// `http://127.0.0.1:PORT` (or `localhost`), with an optional trailing `/`.
fn parse_local_url(url: &str) -> anyhow::Result<SocketAddr> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| anyhow!("--url {url:?}: only http://127.0.0.1:PORT is supported"))?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (host, port) = rest
        .rsplit_once(':')
        .ok_or_else(|| anyhow!("--url {url:?}: no port"))?;
    ensure!(
        host == "127.0.0.1" || host == "localhost",
        "--url {url:?}: the bench only talks to 127.0.0.1"
    );
    let port: u16 = port
        .parse()
        .map_err(|_| anyhow!("--url {url:?}: bad port {port:?}"))?;
    Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
}

async fn cluster_id(conn: &mut Conn) -> anyhow::Result<String> {
    let answer = conn.get("/v3/clusters", "application/json").await?;
    let body = expect_json(&answer, StatusCode::OK, "GET /v3/clusters")?;
    body["data"][0]["cluster_id"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| anyhow!("GET /v3/clusters: no cluster_id in {body}"))
}

/// Creates `topic` with `partitions`; an existing topic is used as it is.
/// Returns its partition count.
async fn ensure_topic(
    conn: &mut Conn,
    cluster: &str,
    topic: &str,
    partitions: u32,
) -> anyhow::Result<u32> {
    let body = serde_json::json!({"topic_name": topic, "partitions_count": partitions});
    let path = format!("/v3/clusters/{cluster}/topics");
    let answer = conn
        .post(&path, "application/json", Bytes::from(body.to_string()))
        .await?;
    if answer.status == StatusCode::CONFLICT {
        let path = format!("/v3/clusters/{cluster}/topics/{topic}");
        let answer = conn.get(&path, "application/json").await?;
        let body = expect_json(&answer, StatusCode::OK, &path)?;
        return body["partitions_count"]
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n > 0)
            .ok_or_else(|| anyhow!("GET {path}: no partitions_count in {body}"));
    }
    expect_json(&answer, StatusCode::CREATED, &format!("POST {path}"))?;
    Ok(partitions)
}

/// `[beginning_offset, end_offset)` of a partition.
async fn partition_offsets(
    conn: &mut Conn,
    topic: &str,
    partition: u32,
) -> anyhow::Result<(u64, u64)> {
    let path = format!("/topics/{topic}/partitions/{partition}/offsets");
    let answer = conn.get(&path, "application/json").await?;
    let body = expect_json(&answer, StatusCode::OK, &path)?;
    match (
        body["beginning_offset"].as_u64(),
        body["end_offset"].as_u64(),
    ) {
        (Some(begin), Some(end)) => Ok((begin, end)),
        _ => bail!("GET {path}: unexpected answer {body}"),
    }
}

fn expect_json(
    answer: &client::Answer,
    status: StatusCode,
    what: &str,
) -> anyhow::Result<serde_json::Value> {
    ensure!(
        answer.status == status,
        "{what}: expected {status}, got {}: {}",
        answer.status,
        String::from_utf8_lossy(&answer.body)
    );
    serde_json::from_slice(&answer.body).with_context(|| format!("{what}: the answer is not JSON"))
}

// ---------------------------------------------------------------------------
// Load phases

/// What every connection of a phase sends.
enum Job {
    /// The same body to `/topics/{topic}/partitions/{conn % partitions}`.
    Produce {
        topic: String,
        partitions: u32,
        body: Bytes,
    },
    /// Fetches of `batch` records over `ranges[conn % ranges.len()]`,
    /// wrapping around at the end.
    Fetch {
        topic: String,
        ranges: Vec<(u64, u64)>,
        batch: usize,
    },
}

impl Job {
    /// Where connection `index` starts fetching: the connections sharing a
    /// partition start spread over it.
    fn first_offset(&self, index: usize) -> u64 {
        match self {
            Job::Fetch { ranges, .. } => {
                let (begin, end) = ranges[index % ranges.len()];
                let sharing = (index / ranges.len()) as u64 % 8;
                begin + (end - begin) / 8 * sharing
            }
            Job::Produce { .. } => 0,
        }
    }
}

/// One request of `job` for connection `index` (`fetch_at`: fetch offset).
async fn send_one(
    conn: &mut Conn,
    job: &Job,
    index: usize,
    fetch_at: u64,
) -> anyhow::Result<client::Answer> {
    match job {
        Job::Produce {
            topic,
            partitions,
            body,
        } => {
            let partition = index as u32 % partitions;
            let path = format!("/topics/{topic}/partitions/{partition}");
            conn.post(&path, BINARY_V2, body.clone()).await
        }
        Job::Fetch {
            topic,
            ranges,
            batch,
        } => {
            let partition = index % ranges.len();
            let path = format!(
                "/topics/{topic}/partitions/{partition}/records?offset={fetch_at}&max_records={batch}&timeout=0"
            );
            conn.get(&path, BINARY_V2).await
        }
    }
}

/// When a phase's warm-up ends and measuring starts, and when it ends.
#[derive(Clone, Copy)]
struct Clock {
    measure_from: Instant,
    end: Instant,
}

/// What one connection (or, merged, a phase) measured.
#[derive(Default)]
struct Measured {
    requests: u64,
    records: u64,
    wire_bytes: u64,
    latency: Histogram,
    errors: u64,
    first_error: Option<String>,
    /// When the last measured answer arrived.
    last_answer: Option<Instant>,
}

impl Measured {
    fn merge(&mut self, other: Measured) {
        self.requests += other.requests;
        self.records += other.records;
        self.wire_bytes += other.wire_bytes;
        self.latency.merge(&other.latency);
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.last_answer = self.last_answer.max(other.last_answer);
    }

    fn error(&mut self, what: String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(what);
        }
    }
}

/// CPU time spent during a measured window (`None`: not measurable).
#[derive(Clone, Copy, Default)]
struct CpuSpent {
    server: Option<Duration>,
    client: Option<Duration>,
}

/// A finished phase.
struct PhaseResult {
    measured: Measured,
    elapsed: Duration,
    record_bytes: usize,
    cpu: CpuSpent,
}

impl PhaseResult {
    fn empty(record_bytes: usize) -> PhaseResult {
        PhaseResult {
            measured: Measured::default(),
            elapsed: Duration::ZERO,
            record_bytes,
            cpu: CpuSpent {
                server: Some(Duration::ZERO),
                client: Some(Duration::ZERO),
            },
        }
    }

    /// Adds another slice of the same phase and target.
    fn absorb(&mut self, slice: PhaseResult) {
        self.measured.merge(slice.measured);
        self.elapsed += slice.elapsed;
        let add = |a: Option<Duration>, b: Option<Duration>| Some(a? + b?);
        self.cpu.server = add(self.cpu.server, slice.cpu.server);
        self.cpu.client = add(self.cpu.client, slice.cpu.client);
    }

    fn records_per_s(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.measured.records as f64 / secs
        } else {
            0.0
        }
    }

    fn mb_per_s(&self) -> f64 {
        self.records_per_s() * self.record_bytes as f64 / 1e6
    }
}

/// Unmeasured load before each slice after the first (the first gets
/// `--warmup-ms`).
const REWARM_MS_MAX: u64 = 1000;

/// A server under test: where it listens, and whose CPU time is its own.
type Target = (SocketAddr, CpuSource);

/// Runs `op` against tidelog and the ceiling in `--rounds` alternating
/// slices; returns (tidelog, ceiling), each the sum of its slices.
async fn alternate(
    op: &str,
    tidelog: Target,
    ceiling: Target,
    job: &Arc<Job>,
    args: &BenchArgs,
) -> anyhow::Result<(PhaseResult, PhaseResult)> {
    let rounds = u64::from(args.rounds);
    let slice_ms = args.duration_ms / rounds;
    let mut results = [
        PhaseResult::empty(args.record_bytes),
        PhaseResult::empty(args.record_bytes),
    ];
    for round in 0..rounds {
        let warmup_ms = if round == 0 {
            args.warmup_ms
        } else {
            args.warmup_ms.min(REWARM_MS_MAX)
        };
        // The last slice takes the remainder, so the slices add up.
        let measure_ms = if round + 1 == rounds {
            args.duration_ms - slice_ms * (rounds - 1)
        } else {
            slice_ms
        };
        for (result, (target, server)) in results
            .iter_mut()
            .zip([("tidelog", tidelog), ("ceiling", ceiling)])
        {
            let label = if rounds > 1 {
                format!("{op} {target} {}/{rounds}", round + 1)
            } else {
                format!("{op} {target}")
            };
            let timing = (
                Duration::from_millis(warmup_ms),
                Duration::from_millis(measure_ms),
            );
            result.absorb(run_phase(&label, server, job, timing, args).await?);
        }
    }
    let [tidelog, ceiling] = results;
    Ok((tidelog, ceiling))
}

/// One slice: `timing` is (warm-up, measured time).
async fn run_phase(
    label: &str,
    (addr, server_cpu): Target,
    job: &Arc<Job>,
    timing: (Duration, Duration),
    args: &BenchArgs,
) -> anyhow::Result<PhaseResult> {
    // Connect everything and send one unmeasured request on each first, so
    // connection set-up and one-off work (the first segment of a fresh data
    // dir) fall before the warm-up clock starts.
    let mut conns = Vec::with_capacity(args.connections);
    for _ in 0..args.connections {
        conns.push(Conn::connect(addr).await?);
    }
    let priming: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(index, conn)| {
            let job = Arc::clone(job);
            tokio::spawn(async move {
                let mut conn = conn;
                let answer = send_one(&mut conn, &job, index, job.first_offset(index)).await?;
                ensure!(
                    answer.status == StatusCode::OK,
                    "status {}: {}",
                    answer.status,
                    String::from_utf8_lossy(&answer.body[..answer.body.len().min(300)])
                );
                Ok(conn)
            })
        })
        .collect();
    let mut conns = Vec::with_capacity(args.connections);
    for primed in priming {
        let conn = primed
            .await
            .context("a load connection panicked")?
            .with_context(|| format!("[{label}] first request"))?;
        conns.push(conn);
    }
    let start = Instant::now();
    let (warmup, duration) = timing;
    let clock = Clock {
        measure_from: start + warmup,
        end: start + warmup + duration,
    };
    let progress = Arc::new(AtomicU64::new(0));
    let client_cpu = CpuSource::Threads(CLIENT_THREAD_NAME);
    let cpu_at_start = tokio::spawn(async move {
        tokio::time::sleep_until(clock.measure_from.into()).await;
        (server_cpu.cpu_time(), client_cpu.cpu_time())
    });
    let workers: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(index, conn)| {
            tokio::spawn(load_connection(
                index,
                conn,
                Arc::clone(job),
                clock,
                Arc::clone(&progress),
            ))
        })
        .collect();
    let reporter = tokio::spawn(report_progress(
        label.to_string(),
        start,
        clock,
        Arc::clone(&progress),
    ));
    let mut measured = Measured::default();
    for worker in workers {
        measured.merge(worker.await.context("a load connection panicked")?);
    }
    reporter.abort();
    let (server_at_start, client_at_start) =
        cpu_at_start.await.context("the CPU sampler panicked")?;
    let spent = |at_start: Option<Duration>, source: CpuSource| {
        Some(source.cpu_time()?.saturating_sub(at_start?))
    };
    let cpu = CpuSpent {
        server: spent(server_at_start, server_cpu),
        client: spent(client_at_start, client_cpu),
    };
    let elapsed = measured.last_answer.map_or(Duration::ZERO, |last| {
        last.saturating_duration_since(clock.measure_from)
    });
    if measured.errors > 0 {
        println!(
            "  [{label}] {} failed requests; first: {}",
            measured.errors,
            measured.first_error.as_deref().unwrap_or("?")
        );
    }
    Ok(PhaseResult {
        measured,
        elapsed,
        record_bytes: args.record_bytes,
        cpu,
    })
}

/// Prints the records answered so far and the rate of the last second,
/// once a second until the phase ends.
async fn report_progress(label: String, start: Instant, clock: Clock, records: Arc<AtomicU64>) {
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::from_std(start + Duration::from_secs(1)),
        Duration::from_secs(1),
    );
    let ticks_max = clock.end.saturating_duration_since(start).as_secs();
    let mut previous = 0u64;
    for second in 1..=ticks_max {
        tick.tick().await;
        let now = records.load(Ordering::Relaxed);
        // The second that just ended, not the instant of the tick.
        let stage = if start + Duration::from_secs(second) <= clock.measure_from {
            "warm-up"
        } else {
            "measure"
        };
        println!(
            "  [{label}] {second:>3} s {stage}: {now} records, {} rec/s",
            now - previous
        );
        previous = now;
    }
}

/// One load connection: requests back to back until the phase ends.
async fn load_connection(
    index: usize,
    mut conn: Conn,
    job: Arc<Job>,
    clock: Clock,
    progress: Arc<AtomicU64>,
) -> Measured {
    let mut measured = Measured::default();
    let mut reconnects = 0u32;
    let mut fetch_at = job.first_offset(index);
    for _ in 0..REQUESTS_PER_CONNECTION_MAX {
        let sent = Instant::now();
        if sent >= clock.end {
            break;
        }
        let result = send_one(&mut conn, &job, index, fetch_at).await;
        let answered = Instant::now();
        let answer = match result {
            Ok(answer) => answer,
            Err(e) => {
                measured.error(format!("{e:#}"));
                if reconnects >= RECONNECTS_MAX {
                    break;
                }
                reconnects += 1;
                match Conn::connect(conn.addr()).await {
                    Ok(fresh) => conn = fresh,
                    Err(e) => {
                        measured.error(format!("reconnecting: {e:#}"));
                        break;
                    }
                }
                continue;
            }
        };
        if answer.status != StatusCode::OK {
            measured.error(format!(
                "status {}: {}",
                answer.status,
                String::from_utf8_lossy(&answer.body[..answer.body.len().min(300)])
            ));
            continue;
        }
        let records = count_occurrences(&answer.body, b"\"offset\":") as u64;
        match &*job {
            Job::Produce { .. } => {}
            Job::Fetch { ranges, .. } => {
                let (begin, end) = ranges[index % ranges.len()];
                fetch_at += records;
                if records == 0 || fetch_at >= end {
                    fetch_at = begin;
                }
            }
        }
        progress.fetch_add(records, Ordering::Relaxed);
        if sent >= clock.measure_from {
            measured.requests += 1;
            measured.records += records;
            measured.wire_bytes += answer.body.len() as u64;
            measured.latency.record(answered - sent);
            measured.last_answer = Some(answered);
        }
    }
    measured
}

// ---------------------------------------------------------------------------
// Visibility

struct Visibility {
    /// Produce acknowledged → waiting fetch answered.
    after_ack: Histogram,
    /// Produce sent → waiting fetch answered.
    after_send: Histogram,
    /// Answers that arrived before the produce acknowledgement (counted as 0
    /// in `after_ack`).
    before_ack: u64,
    /// Long-polls that timed out or failed instead of returning the record.
    missed: u64,
    first_error: Option<String>,
}

async fn visibility(addr: SocketAddr, topic: &str, args: &BenchArgs) -> anyhow::Result<Visibility> {
    let mut producer = Conn::connect(addr).await?;
    let mut fetcher = Some(Conn::connect(addr).await?);
    let (_, mut end) = partition_offsets(&mut producer, topic, 0).await?;
    let body = Bytes::from(produce_body(1, args.record_bytes)?);
    let produce_path = format!("/topics/{topic}/partitions/0");
    let warmup = (args.visibility_samples / 10).max(1);
    let mut result = Visibility {
        after_ack: Histogram::new(),
        after_send: Histogram::new(),
        before_ack: 0,
        missed: 0,
        first_error: None,
    };
    let label = "visibility tidelog";
    let started = Instant::now();
    let mut next_progress = started + Duration::from_secs(1);
    for sample in 0..(warmup + args.visibility_samples) {
        let mut conn = fetcher
            .take()
            .ok_or_else(|| anyhow!("visibility fetcher connection lost"))?;
        let path = format!(
            "/topics/{topic}/partitions/0/records?offset={end}&max_records=1&timeout={VISIBILITY_TIMEOUT_MS}"
        );
        let waiting = tokio::spawn(async move {
            let answer = conn.get(&path, BINARY_V2).await;
            (answer, Instant::now(), conn)
        });
        tokio::time::sleep(VISIBILITY_PARK).await;
        let sent = Instant::now();
        let produced = producer
            .post(&produce_path, BINARY_V2, body.clone())
            .await?;
        let acked = Instant::now();
        ensure!(
            produced.status == StatusCode::OK,
            "visibility produce: status {}: {}",
            produced.status,
            String::from_utf8_lossy(&produced.body)
        );
        end += 1;
        let (answer, answered, conn) = waiting.await.context("the visibility fetcher panicked")?;
        fetcher = Some(conn);
        let got = match answer {
            Ok(a) if a.status == StatusCode::OK => count_occurrences(&a.body, b"\"offset\":"),
            Ok(a) => {
                result
                    .first_error
                    .get_or_insert(format!("status {}", a.status));
                0
            }
            Err(e) => {
                result.first_error.get_or_insert(format!("{e:#}"));
                // The connection may be broken: start a new one.
                fetcher = Some(Conn::connect(addr).await?);
                0
            }
        };
        if sample < warmup {
            continue;
        }
        if got == 0 {
            result.missed += 1;
            continue;
        }
        if answered < acked {
            result.before_ack += 1;
        }
        result
            .after_ack
            .record(answered.saturating_duration_since(acked));
        result.after_send.record(answered - sent);
        if Instant::now() >= next_progress {
            println!(
                "  [{label}] {:>3} s: {} samples",
                started.elapsed().as_secs(),
                result.after_ack.count()
            );
            next_progress += Duration::from_secs(1);
        }
    }
    Ok(result)
}

// ---------------------------------------------------------------------------
// Bodies and output

/// `len` bytes of deterministic noise (xorshift), different per `seed`.
pub(crate) fn record_value(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

/// A binary-embedded produce body of `batch` keyless records.
fn produce_body(batch: usize, record_bytes: usize) -> anyhow::Result<Vec<u8>> {
    let records: Vec<serde_json::Value> = (0..batch as u64)
        .map(|i| serde_json::json!({"value": BASE64.encode(record_value(record_bytes, i))}))
        .collect();
    serde_json::to_vec(&serde_json::json!({ "records": records }))
        .context("encoding the produce body")
}

fn unix_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn verdict(met: bool) -> &'static str {
    if met {
        "MET"
    } else {
        "MISSED"
    }
}

fn report(args: &BenchArgs, phases: [(&str, &PhaseResult, &PhaseResult); 2], vis: &Visibility) {
    println!();
    println!(
        "results ({} connections, {} records x {} B per request; MB/s = record values, 10^6 B/s; latency per request):",
        args.connections, args.batch, args.record_bytes
    );
    println!(
        "{:<8} {:<8} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>7}",
        "phase",
        "target",
        "records/s",
        "MB/s",
        "p50_ms",
        "p99_ms",
        "p999_ms",
        "max_ms",
        "requests",
        "errors"
    );
    for (phase, tidelog, ceiling) in &phases {
        for (target, r) in [("tidelog", tidelog), ("ceiling", ceiling)] {
            let h = &r.measured.latency;
            println!(
                "{:<8} {:<8} {:>12.0} {:>9.2} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>10} {:>7}",
                phase,
                target,
                r.records_per_s(),
                r.mb_per_s(),
                ms(h.quantile(0.5)),
                ms(h.quantile(0.99)),
                ms(h.quantile(0.999)),
                ms(h.quantile(1.0)),
                r.measured.requests,
                r.measured.errors
            );
        }
    }
    println!();
    for (phase, tidelog, ceiling) in &phases {
        let ratio = if ceiling.records_per_s() > 0.0 {
            tidelog.records_per_s() / ceiling.records_per_s()
        } else {
            0.0
        };
        println!(
            "goal {phase}: tidelog / ceiling = {:.1} % (goal >= {:.0} %): {}",
            ratio * 100.0,
            RATIO_GOAL * 100.0,
            verdict(ratio >= RATIO_GOAL)
        );
    }
    println!();
    println!("CPU per record (µs of user + system time over the measured windows, from /proc):");
    let micros = |cpu: Option<Duration>, r: &PhaseResult| {
        cpu::micros_per_record(cpu, r.measured.records)
            .map_or_else(|| "n/a".to_string(), |us| format!("{us:.3}"))
    };
    for (phase, tidelog, ceiling) in &phases {
        println!(
            "{phase:<8} server: tidelog {}, ceiling {}; load generator: {} against tidelog, {} against the ceiling",
            micros(tidelog.cpu.server, tidelog),
            micros(ceiling.cpu.server, ceiling),
            micros(tidelog.cpu.client, tidelog),
            micros(ceiling.cpu.client, ceiling),
        );
    }
    println!();
    let p99 = vis.after_ack.quantile(0.99);
    println!(
        "visibility: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms after the produce ack (p50 {:.3} ms, p99 {:.3} ms after the produce was sent); {} samples, {} answered before the ack, {} missed",
        ms(vis.after_ack.quantile(0.5)),
        ms(p99),
        ms(vis.after_ack.quantile(1.0)),
        ms(vis.after_send.quantile(0.5)),
        ms(vis.after_send.quantile(0.99)),
        vis.after_ack.count(),
        vis.before_ack,
        vis.missed
    );
    if let Some(e) = &vis.first_error {
        println!("visibility: first failure: {e}");
    }
    let met = vis.after_ack.count() > 0 && vis.missed == 0 && p99 <= VISIBILITY_P99_GOAL;
    println!(
        "goal visibility: p99 {:.3} ms (goal <= {} ms): {}",
        ms(p99),
        VISIBILITY_P99_GOAL.as_millis(),
        verdict(met)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_urls_only() {
        let local = SocketAddr::from((Ipv4Addr::LOCALHOST, 8080));
        assert_eq!(parse_local_url("http://127.0.0.1:8080").unwrap(), local);
        assert_eq!(parse_local_url("http://localhost:8080/").unwrap(), local);
        assert!(parse_local_url("http://10.0.0.1:8080").is_err());
        assert!(parse_local_url("https://127.0.0.1:8080").is_err());
        assert!(parse_local_url("http://127.0.0.1").is_err());
        assert!(parse_local_url("http://127.0.0.1:99999").is_err());
    }

    #[test]
    fn produce_body_decodes_like_the_server_does() {
        let body = produce_body(3, 100).unwrap();
        let records = tidelog_api::records::decode_produce(
            tidelog_api::records::EmbeddedFormat::Binary,
            &body,
        )
        .unwrap();
        assert_eq!(records.len(), 3);
        for r in &records {
            assert_eq!(r.value.as_ref().map(|v| v.len()), Some(100));
            assert!(r.key.is_none());
        }
        assert_ne!(records[0].value, records[1].value);
    }

    #[test]
    fn bare_fetch_answer_has_the_batch() {
        let body = ceiling::fetch_shaped_body("t", 5, 10).unwrap();
        assert_eq!(count_occurrences(&body, b"\"offset\":"), 5);
        let parsed: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(parsed.as_array().map(Vec::len), Some(5));
    }
}
