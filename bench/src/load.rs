//! The produce and fetch phases: load connections sending back to back,
//! alternating slices between the targets (tidelog and its ceiling, over
//! HTTP or the Kafka protocol), per-second progress, and what each phase
//! measured. Every connection has one request in flight at a time.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use bytes::Bytes;
use hyper::StatusCode;
use tidelog_api::records::BINARY_V2;

use crate::client::{count_occurrences, Conn};
use crate::cpu::{CpuSource, CLIENT_THREAD_NAME};
use crate::kafka_client::{self, FetchMode, KafkaConn};
use crate::kafka_producer::{ProducerJob, ProducerLoad};
use crate::measured::{CpuSpent, Measured, PhaseResult};
use crate::secure::Secure;
use crate::BenchArgs;

/// Hard cap of requests per connection and phase, beside the time bound.
const REQUESTS_PER_CONNECTION_MAX: u64 = 50_000_000;
/// Transport failures a load connection survives (by reconnecting).
const RECONNECTS_MAX: u32 = 3;

/// What every connection of a phase sends. Request `k` of connection `i`
/// of `c` goes to partition `(i + k * c) % partitions` ([`partition_of`]):
/// with at most as many partitions as connections, dividing them (8 of
/// 64), that is always `i % partitions`; with more (1,000), each
/// connection walks its share of them, so every partition gets load.
pub(crate) enum Job {
    /// The same body to `/topics/{topic}/partitions/{p}`.
    Produce {
        topic: String,
        partitions: u32,
        body: Bytes,
    },
    /// Fetches of `batch` records over `ranges[p]`, wrapping around at
    /// the end.
    Fetch {
        topic: String,
        ranges: Vec<(u64, u64)>,
        batch: usize,
    },
    /// As `Produce`, each request one of `bodies` in turn (keyed records
    /// of a compact topic: `bench/src/compact.rs`).
    ProduceKeyed {
        topic: String,
        partitions: u32,
        bodies: Vec<Bytes>,
    },
    /// Kafka: `frames[p]`, a Produce frame per partition of `records`
    /// records.
    KafkaProduce { frames: Vec<Bytes>, records: u64 },
    /// Kafka: Fetches of at most `max_bytes` over `ranges[p]`, wrapping
    /// around at the end.
    KafkaFetch {
        topic: kafka_protocol::messages::TopicName,
        ranges: Vec<(u64, u64)>,
        max_bytes: i32,
    },
    /// Kafka: every connection an idempotent or a transactional producer
    /// (`kafka_producer.rs`), which picks its partitions itself.
    KafkaProducer(ProducerJob),
    /// Kafka: as `KafkaFetch`, at `isolation_level`, over a topic
    /// transactions wrote: records counted in data batches only, and each
    /// fetch of a partition from after the last batch of the one before
    /// (a transaction marker takes an offset of its own).
    KafkaFetchTxn {
        topic: kafka_protocol::messages::TopicName,
        ranges: Vec<(u64, u64)>,
        max_bytes: i32,
        isolation_level: i8,
    },
}

/// The partition of request `request` of connection `index` of
/// `connections`, over `partitions` (see [`Job`]).
pub(crate) fn partition_of(
    index: usize,
    request: u64,
    connections: usize,
    partitions: usize,
) -> usize {
    let step = (request % partitions as u64) as usize * (connections % partitions);
    (index % partitions + step) % partitions
}

impl Job {
    /// How many partitions the job spreads over.
    fn partitions(&self) -> usize {
        let n = match self {
            Job::Produce { partitions, .. } | Job::ProduceKeyed { partitions, .. } => {
                *partitions as usize
            }
            Job::Fetch { ranges, .. }
            | Job::KafkaFetch { ranges, .. }
            | Job::KafkaFetchTxn { ranges, .. } => ranges.len(),
            Job::KafkaProduce { frames, .. } => frames.len(),
            Job::KafkaProducer(job) => job.spec.partitions as usize,
        };
        n.max(1)
    }

    /// Where connection `index` starts fetching `partition`: the
    /// connections sharing a partition start spread over it.
    fn first_offset(&self, index: usize, partition: usize) -> u64 {
        match self.ranges() {
            Some(ranges) => {
                let (begin, end) = ranges[partition];
                let sharing = (index / ranges.len()) as u64 % 8;
                begin + (end - begin) / 8 * sharing
            }
            None => 0,
        }
    }

    /// The partitions' offset ranges a fetch job reads.
    fn ranges(&self) -> Option<&[(u64, u64)]> {
        match self {
            Job::Fetch { ranges, .. }
            | Job::KafkaFetch { ranges, .. }
            | Job::KafkaFetchTxn { ranges, .. } => Some(ranges),
            Job::Produce { .. }
            | Job::ProduceKeyed { .. }
            | Job::KafkaProduce { .. }
            | Job::KafkaProducer(_) => None,
        }
    }
}

/// A load connection, of the protocol its job speaks.
enum LoadConn {
    Http(Conn),
    Kafka(KafkaConn),
    /// A Kafka connection and the producer it carries.
    KafkaProducer(KafkaConn, Box<ProducerLoad>),
}

impl LoadConn {
    /// Connection `index`'s connection to `target` (over TLS and logged
    /// in, when it is secured) of the protocol `job` speaks.
    async fn connect(job: &Job, target: &Target, index: usize) -> anyhow::Result<LoadConn> {
        let secure = target.secure.as_deref();
        Ok(match job {
            Job::Produce { .. } | Job::ProduceKeyed { .. } | Job::Fetch { .. } => {
                LoadConn::Http(Conn::connect_secure(target.addr, secure).await?)
            }
            Job::KafkaProduce { .. } | Job::KafkaFetch { .. } | Job::KafkaFetchTxn { .. } => {
                LoadConn::Kafka(KafkaConn::connect_secure(target.addr, secure).await?)
            }
            Job::KafkaProducer(job) => {
                let mut conn = KafkaConn::connect_secure(target.addr, secure).await?;
                let producer = ProducerLoad::start(&mut conn, job, index).await?;
                LoadConn::KafkaProducer(conn, Box::new(producer))
            }
        })
    }

    /// What a connection owes at the end of its phase: a producer's open
    /// transaction committed (`ProducerLoad::finish`). Why that was
    /// refused, if it was.
    async fn finish(&mut self) -> anyhow::Result<Option<String>> {
        match self {
            LoadConn::KafkaProducer(conn, producer) => producer.finish(conn).await,
            LoadConn::Http(_) | LoadConn::Kafka(_) => Ok(None),
        }
    }
}

/// What one answered request carried.
struct Reply {
    records: u64,
    wire_bytes: u64,
    /// Why the server refused it (an HTTP status, a Kafka error code).
    refused: Option<String>,
    /// Where the partition's next fetch starts, when the answer says
    /// (`Job::KafkaFetchTxn`).
    next_offset: Option<u64>,
    /// A transaction's EndTxn commit in this request, and how long it took.
    commit: Option<Duration>,
}

impl Reply {
    /// A Kafka answer of `wire_bytes`, checked: its records, or why not.
    fn checked(wire_bytes: u64, checked: anyhow::Result<u64>) -> Reply {
        match checked {
            Ok(records) => Reply {
                records,
                wire_bytes,
                refused: None,
                next_offset: None,
                commit: None,
            },
            Err(e) => Reply {
                records: 0,
                wire_bytes,
                refused: Some(format!("{e:#}")),
                next_offset: None,
                commit: None,
            },
        }
    }
}

/// One request of `job` to `partition` (`fetch_at`: fetch offset;
/// `seq`: the connection's request number, which picks a keyed body); an
/// `Err` is a transport failure (the connection is dropped).
async fn send_one(
    conn: &mut LoadConn,
    job: &Job,
    partition: usize,
    fetch_at: u64,
    seq: u64,
) -> anyhow::Result<Reply> {
    let answer = match (conn, job) {
        (LoadConn::Http(conn), Job::Produce { topic, body, .. }) => {
            let path = format!("/topics/{topic}/partitions/{partition}");
            conn.post(&path, BINARY_V2, body.clone()).await?
        }
        (LoadConn::Http(conn), Job::ProduceKeyed { topic, bodies, .. }) => {
            let path = format!("/topics/{topic}/partitions/{partition}");
            let body = &bodies[(partition as u64).wrapping_add(seq) as usize % bodies.len()];
            conn.post(&path, BINARY_V2, body.clone()).await?
        }
        (LoadConn::Http(conn), Job::Fetch { topic, batch, .. }) => {
            let path = format!(
                "/topics/{topic}/partitions/{partition}/records?offset={fetch_at}&max_records={batch}&timeout=0"
            );
            conn.get(&path, BINARY_V2).await?
        }
        (LoadConn::Kafka(conn), Job::KafkaProduce { frames, records }) => {
            let answer = conn.call(&frames[partition]).await?;
            let wire_bytes = answer.len() as u64;
            let checked = kafka_client::check_produced(answer).map(|()| *records);
            return Ok(Reply::checked(wire_bytes, checked));
        }
        (
            LoadConn::Kafka(conn),
            Job::KafkaFetch {
                topic, max_bytes, ..
            },
        ) => {
            let frame = kafka_client::fetch_frame(topic, partition as i32, fetch_at, *max_bytes)?;
            let answer = conn.call(&frame).await?;
            let wire_bytes = answer.len() as u64;
            let checked = kafka_client::check_fetched(answer);
            return Ok(Reply::checked(wire_bytes, checked));
        }
        (
            LoadConn::Kafka(conn),
            Job::KafkaFetchTxn {
                topic,
                max_bytes,
                isolation_level,
                ..
            },
        ) => {
            let mode = FetchMode {
                isolation_level: *isolation_level,
                max_wait_ms: 0,
            };
            let frame = kafka_client::fetch_frame_with(
                topic,
                partition as i32,
                fetch_at,
                *max_bytes,
                mode,
            )?;
            let answer = conn.call(&frame).await?;
            let wire_bytes = answer.len() as u64;
            let checked = kafka_client::check_fetched_batches(answer);
            let next_offset = checked.as_ref().ok().and_then(|f| f.next_offset);
            return Ok(Reply {
                next_offset,
                ..Reply::checked(wire_bytes, checked.map(|f| f.records))
            });
        }
        (LoadConn::KafkaProducer(conn, producer), Job::KafkaProducer(_)) => {
            let step = producer.step(conn).await?;
            return Ok(Reply {
                records: step.records,
                wire_bytes: step.wire_bytes,
                refused: step.refused,
                next_offset: None,
                commit: step.commit,
            });
        }
        _ => anyhow::bail!("a load connection of another protocol than its job"),
    };
    let refused = (answer.status != StatusCode::OK).then(|| {
        format!(
            "status {}: {}",
            answer.status,
            String::from_utf8_lossy(&answer.body[..answer.body.len().min(300)])
        )
    });
    Ok(Reply {
        records: count_occurrences(&answer.body, b"\"offset\":") as u64,
        wire_bytes: answer.body.len() as u64,
        refused,
        next_offset: None,
        commit: None,
    })
}

/// When a phase's warm-up ends and measuring starts, and when it ends.
#[derive(Clone, Copy)]
struct Clock {
    pub(crate) measure_from: Instant,
    pub(crate) end: Instant,
}

/// Unmeasured load before each slice after the first (the first gets
/// `--warmup-ms`).
const REWARM_MS_MAX: u64 = 1000;

/// A server under test: where it listens, whose CPU time is its own,
/// and how its connections are secured (TLS, a login), if they are.
#[derive(Clone)]
pub(crate) struct Target {
    pub(crate) addr: SocketAddr,
    pub(crate) cpu: CpuSource,
    pub(crate) secure: Option<Arc<Secure>>,
    /// Raised while a slice of this target is measured (from the end of
    /// its warm-up to its last answer), for a sampler that watches the
    /// target only under measured load (`replication_lag.rs`).
    pub(crate) measuring: Option<Arc<AtomicBool>>,
}

impl Target {
    /// A plain listener.
    pub(crate) fn plain(addr: SocketAddr, cpu: CpuSource) -> Target {
        Target {
            addr,
            cpu,
            secure: None,
            measuring: None,
        }
    }

    /// This target with `flag` raised while its slices are measured.
    pub(crate) fn with_measuring_flag(mut self, flag: Arc<AtomicBool>) -> Target {
        self.measuring = Some(flag);
        self
    }

    /// A listener whose connections `secure` makes.
    pub(crate) fn secured(addr: SocketAddr, cpu: CpuSource, secure: Arc<Secure>) -> Target {
        Target {
            addr,
            cpu,
            secure: Some(secure),
            measuring: None,
        }
    }
}

/// Runs `op` against tidelog and the ceiling in `--rounds` alternating
/// slices; returns (tidelog, ceiling), each the sum of its slices.
pub(crate) async fn alternate(
    op: &str,
    tidelog: &Target,
    ceiling: &Target,
    job: &Arc<Job>,
    args: &BenchArgs,
) -> anyhow::Result<(PhaseResult, PhaseResult)> {
    let targets = [("tidelog", tidelog, job), ("ceiling", ceiling, job)];
    let [tidelog, ceiling] = alternate_all(op, &targets, args).await?;
    Ok((tidelog, ceiling))
}

/// A named target and the job its connections run.
pub(crate) type Slot<'a> = (&'a str, &'a Target, &'a Arc<Job>);

/// Runs `op` against each of `targets` in turn, `--rounds` times over;
/// returns each target's slices summed, in `targets`' order.
pub(crate) async fn alternate_all<const N: usize>(
    op: &str,
    targets: &[Slot<'_>; N],
    args: &BenchArgs,
) -> anyhow::Result<[PhaseResult; N]> {
    let rounds = u64::from(args.rounds);
    let slice_ms = args.duration_ms / rounds;
    let mut results = std::array::from_fn(|_| PhaseResult::empty(args.record_bytes));
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
        for (result, (target, server, job)) in results.iter_mut().zip(targets) {
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
    Ok(results)
}

/// One slice: `timing` is (warm-up, measured time).
async fn run_phase(
    label: &str,
    target: &Target,
    job: &Arc<Job>,
    timing: (Duration, Duration),
    args: &BenchArgs,
) -> anyhow::Result<PhaseResult> {
    // Connect everything and send one unmeasured request on each first, so
    // connection set-up and one-off work (the first segment of a fresh data
    // dir) fall before the warm-up clock starts.
    let mut conns = Vec::with_capacity(args.connections);
    for index in 0..args.connections {
        conns.push(LoadConn::connect(job, target, index).await?);
    }
    let server_cpu = target.cpu;
    let connections = args.connections;
    let priming: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(index, conn)| {
            let job = Arc::clone(job);
            tokio::spawn(async move {
                let mut conn = conn;
                let partition = partition_of(index, 0, connections, job.partitions());
                let fetch_at = job.first_offset(index, partition);
                let reply = send_one(&mut conn, &job, partition, fetch_at, 0).await?;
                if let Some(refused) = reply.refused {
                    bail!("{refused}");
                }
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
    let measuring = target.measuring.clone();
    let cpu_at_start = tokio::spawn(async move {
        tokio::time::sleep_until(clock.measure_from.into()).await;
        if let Some(flag) = &measuring {
            flag.store(true, Ordering::Release);
        }
        (server_cpu.cpu_time(), client_cpu.cpu_time())
    });
    let workers: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(index, conn)| {
            tokio::spawn(load_connection(
                (index, connections),
                (conn, target.clone()),
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
    if let Some(flag) = &target.measuring {
        flag.store(false, Ordering::Release);
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

/// One load connection, `index` of `connections`: requests back to back
/// until the phase ends.
async fn load_connection(
    (index, connections): (usize, usize),
    (mut conn, target): (LoadConn, Target),
    job: Arc<Job>,
    clock: Clock,
    progress: Arc<AtomicU64>,
) -> Measured {
    let mut measured = Measured::default();
    let mut reconnects = 0u32;
    let partitions = job.partitions();
    // Each partition's next fetch offset (fetch jobs only).
    let mut fetch_at: Vec<u64> = match job.ranges() {
        Some(_) => (0..partitions)
            .map(|p| job.first_offset(index, p))
            .collect(),
        None => Vec::new(),
    };
    for request in 0..REQUESTS_PER_CONNECTION_MAX {
        let sent = Instant::now();
        if sent >= clock.end {
            break;
        }
        let partition = partition_of(index, request, connections, partitions);
        let at = fetch_at.get(partition).copied().unwrap_or(0);
        let result = send_one(&mut conn, &job, partition, at, request).await;
        let answered = Instant::now();
        let reply = match result {
            Ok(reply) => reply,
            Err(e) => {
                measured.error(format!("{e:#}"));
                if reconnects >= RECONNECTS_MAX {
                    break;
                }
                reconnects += 1;
                match LoadConn::connect(&job, &target, index).await {
                    Ok(fresh) => conn = fresh,
                    Err(e) => {
                        measured.error(format!("reconnecting: {e:#}"));
                        break;
                    }
                }
                continue;
            }
        };
        if let Some(refused) = reply.refused {
            measured.error(refused);
            continue;
        }
        let records = reply.records;
        if let (Some(ranges), Some(at)) = (job.ranges(), fetch_at.get_mut(partition)) {
            let (begin, end) = ranges[partition];
            let from = *at;
            *at = reply.next_offset.unwrap_or(from + records);
            if *at <= from || *at >= end {
                *at = begin;
            }
        }
        progress.fetch_add(records, Ordering::Relaxed);
        if sent >= clock.measure_from {
            measured.requests += 1;
            measured.records += records;
            measured.wire_bytes += reply.wire_bytes;
            measured.latency.record(answered - sent);
            if let Some(commit) = reply.commit {
                measured.commits.record(commit);
            }
            measured.last_answer = Some(answered);
        }
    }
    // After the clock: nothing of it is measured.
    match conn.finish().await {
        Ok(None) => {}
        Ok(Some(refused)) => measured.error(format!("at the phase's end: {refused}")),
        Err(e) => measured.error(format!("at the phase's end: {e:#}")),
    }
    measured
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_that_divide_the_connections_stay_fixed() {
        for index in 0..64 {
            for request in 0..20 {
                assert_eq!(partition_of(index, request, 64, 8), index % 8);
                assert_eq!(partition_of(index, request, 64, 1), 0);
            }
        }
    }

    #[test]
    fn more_partitions_than_connections_all_get_load() {
        let mut hit = vec![0u32; 1000];
        for index in 0..64 {
            for request in 0..125 {
                hit[partition_of(index, request, 64, 1000)] += 1;
            }
        }
        // 64 x 125 requests over 1,000 partitions: each one 8 times.
        assert!(hit.iter().all(|&n| n == 8), "{hit:?}");
    }
}
