//! `tidelog bench --suite-table DIR`: the benchmark table of
//! docs/BENCHMARKS.md, built from one `scripts/bench.sh` run's results.
//!
//! The suite leaves in DIR, per step, `NAME.json` (a [`RunResults`] of
//! `tidelog bench --json`), `NAME.log` (the step's output; the cleaner
//! bench and the librdkafka script are read from theirs) or, when the
//! step failed, `NAME.failed` (why, one line). Beside them `meta.json`
//! ([`Meta`]: commit, date, load) and `limits.json` ([`Limits`]: the
//! machine's limits the script measured).
//!
//! Every row of the table comes from those files alone. A row whose
//! inputs are missing, failed, or lack a field says `failed: <why>` in its
//! verdict column and the table goes on: one broken step never hides the
//! others. A row with a goal says `met` or `missed`; a row without one
//! (figures the issue asks to report) says `reported`.
//!
//! Rows of other branches' flags: `sync-1`, `sync-100` (`--flush sync`;
//! `sync-100` with `--compare-async`, its async figure from the
//! `produce-vs-async` rows), `compact` (`--policy compact --keys N`; its
//! dispatch lag is read from
//! `extra.dispatch_lag_max_bytes`, the delete topic of the same run from
//! the `produce` row of target `tidelog-delete`) and `cleaner` (the
//! compaction bench's summary lines) fail with the reason until those
//! land.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::machine::RSS_ANON_GOAL_KIB;
use crate::results::{PhaseFigures, RunResults};

/// The suite run's identity, written by `scripts/bench.sh`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    pub commit: String,
    pub date: String,
    /// `uptime` before the first step and after the last.
    #[serde(default)]
    pub uptime_start: String,
    #[serde(default)]
    pub uptime_end: String,
    #[serde(default)]
    pub quick: bool,
}

/// The machine's limits, measured by `scripts/bench.sh` on the data dir's
/// disk in the same session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// `dd bs=1M conv=fdatasync`: sequential write to disk.
    pub dd_write_mb_s: Option<f64>,
    /// `dd bs=4k oflag=dsync`: one writer's appends, each made durable.
    pub dd_dsync_ops_s: Option<f64>,
    /// `dd if=/dev/zero of=/dev/null bs=1M`.
    pub dd_memcpy_mb_s: Option<f64>,
    /// `cat` of the `dd` file after dropping it from the page cache.
    pub cat_cold_mb_s: Option<f64>,
}

/// A row's verdict.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Met,
    Missed,
    /// No goal: a figure the issue asks to report.
    Reported,
    Failed(String),
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub figure: String,
    pub value: String,
    pub limit: String,
    pub ratio: String,
    pub goal: String,
    pub verdict: Verdict,
}

/// What a row's figures are, or why there are none.
type Figures = Result<Measured, String>;

/// A row's measured part.
struct Measured {
    value: String,
    limit: String,
    ratio: String,
    /// `None`: no goal.
    met: Option<bool>,
}

/// The results of one suite run.
pub struct Suite {
    dir: PathBuf,
    meta: Meta,
    limits: Result<Limits, String>,
}

impl Suite {
    pub fn open(dir: &Path) -> anyhow::Result<Suite> {
        let meta_path = dir.join("meta.json");
        let meta = std::fs::read_to_string(&meta_path)
            .with_context(|| format!("reading {}", meta_path.display()))?;
        let meta = serde_json::from_str(&meta)
            .with_context(|| format!("decoding {}", meta_path.display()))?;
        let mut suite = Suite {
            dir: dir.to_path_buf(),
            meta,
            limits: Err(String::new()),
        };
        suite.limits = suite.json("limits");
        Ok(suite)
    }

    /// `NAME.json` decoded, or why not (`NAME.failed`, absent, bad).
    fn json<T: for<'de> Deserialize<'de>>(&self, name: &str) -> Result<T, String> {
        let text = self.output(name, "json")?;
        serde_json::from_str(&text).map_err(|e| format!("{name}.json: {e}"))
    }

    /// `NAME.ext`, or the reason the step failed.
    fn output(&self, name: &str, ext: &str) -> Result<String, String> {
        let failed = self.dir.join(format!("{name}.failed"));
        if let Ok(why) = std::fs::read_to_string(&failed) {
            return Err(format!("{name}: {}", one_line(&why)));
        }
        std::fs::read_to_string(self.dir.join(format!("{name}.{ext}")))
            .map_err(|_| format!("{name}: not run (no {name}.{ext})"))
    }

    fn run(&self, name: &str) -> Result<RunResults, String> {
        self.json(name)
    }

    /// Every row, in the table's order.
    pub fn rows(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        self.http_rows(&mut rows);
        self.sync_rows(&mut rows);
        self.compact_rows(&mut rows);
        self.cleaner_rows(&mut rows);
        self.size_rows(&mut rows);
        self.partition_rows(&mut rows);
        self.kafka_rows(&mut rows);
        self.transaction_rows(&mut rows);
        self.cluster_rows(&mut rows);
        self.security_rows(&mut rows);
        self.recovery_and_memory_rows(&mut rows);
        self.tiered_rows(&mut rows);
        rows
    }

    /// `tidelog bench --tiered-mib` (`tiered.rs`): the server's upload and
    /// remote fetch beside a plain object_store put and get of the same
    /// bytes to the same bucket; reported, the issue sets no goal.
    fn tiered_rows(&self, rows: &mut Vec<Row>) {
        let tiered = self.run("tiered");
        for (figure, ours, plain, what) in [
            (
                "tiered storage upload (`--tiered-mib`, SeaweedFS)",
                "tiered_upload_mb_per_s",
                "tiered_plain_put_mb_per_s",
                "plain object_store put",
            ),
            (
                "tiered storage remote fetch (`--tiered-mib`, SeaweedFS)",
                "tiered_remote_fetch_mb_per_s",
                "tiered_plain_get_mb_per_s",
                "plain object_store get",
            ),
        ] {
            let f = tiered.clone().and_then(|r| {
                let (ours, plain) = (extra(&r, ours)?, extra(&r, plain)?);
                Ok(Measured {
                    value: format!("{ours:.1} MB/s"),
                    limit: format!("{what} of the same bytes: {plain:.1} MB/s"),
                    ratio: percent(ours / plain),
                    met: None,
                })
            });
            rows.push(row(figure, "report (issue 19)", f));
        }
    }

    fn http_rows(&self, rows: &mut Vec<Row>) {
        for (run, figure) in [
            (
                "http-100",
                "HTTP produce, 64 connections × 100 records × 100 B",
            ),
            (
                "http-10",
                "HTTP produce, 64 connections × 10 records × 100 B",
            ),
        ] {
            let f = self
                .run(run)
                .and_then(|r| share_of_ceiling(&r, "produce", "bare axum endpoint", 0.5));
            rows.push(row(figure, "≥ 50 % of the bare endpoint (issue 3)", f));
        }
        let f = self
            .run("http-100")
            .and_then(|r| share_of_ceiling(&r, "fetch", "bare endpoint, pre-built answer", 0.5));
        rows.push(row(
            "HTTP fetch, 64 connections, max_records 100 × 100 B",
            "≥ 50 % of the bare endpoint (issue 3)",
            f,
        ));
        let f = self.run("http-100").and_then(|r| visibility_p99(&r, 5.0));
        rows.push(row(
            "HTTP visibility: produce ack → waiting long-poll answered, p99",
            "≤ 5 ms, none missed (issue 3)",
            f,
        ));
    }

    fn sync_rows(&self, rows: &mut Vec<Row>) {
        let sync1 = self.run("sync-1");
        let f = sync1
            .clone()
            .and_then(|r| share_of_ceiling(&r, "produce", "bare endpoint, 1 record", 0.5));
        rows.push(row(
            "sync produce (`--flush sync`), 64 connections × 1 record",
            "≥ 50 % of the bare endpoint at the same load (issue 17)",
            f,
        ));
        let f = sync1.clone().and_then(|r| {
            let p = phase(&r, "produce", "tidelog")?;
            let dsync = self.limit(|l| l.dd_dsync_ops_s, "dd_dsync_ops_s")?;
            let factor = p.records_per_s / dsync;
            Ok(Measured {
                value: records(p.records_per_s),
                limit: format!("one writer's 4 KiB `dd oflag=dsync`: {dsync:.0} ops/s"),
                ratio: times(factor),
                met: Some(factor >= 5.0),
            })
        });
        rows.push(row(
            "sync produce, 64 × 1, over the disk's durable appends",
            "≥ 5× dd's ops/s (issue 17)",
            f,
        ));
        // The bare endpoint's latency, in the slices alternating with
        // tidelog's, is what 64 connections on these cores cost a request
        // that stores nothing: the floor under tidelog's p99.
        let f = sync1.clone().and_then(|r| {
            let p = phase(&r, "produce", "tidelog")?;
            let bare = phase(&r, "produce", "ceiling")?;
            Ok(Measured {
                value: format!(
                    "p99 {:.2} ms (p50 {:.2}, p999 {:.2})",
                    p.p99_ms, p.p50_ms, p.p999_ms
                ),
                limit: format!(
                    "bare endpoint, 1 record, same run: p99 {:.2} ms (p50 {:.2})",
                    bare.p99_ms, bare.p50_ms
                ),
                ratio: times(p.p99_ms / bare.p99_ms),
                met: Some(p.p99_ms <= 3.0),
            })
        });
        rows.push(row(
            "sync produce, 64 × 1, latency",
            "p99 ≤ 3 ms (issue 17)",
            f,
        ));
        let f = sync1.and_then(|sync| {
            let async1 = self.run("http-1")?;
            let sync_us = server_us(&sync)?;
            let async_us = server_us(&async1)?;
            let factor = sync_us / async_us;
            Ok(Measured {
                value: format!("{sync_us:.2} µs server CPU per record"),
                limit: format!("async, 64 × 1 (`http-1`): {async_us:.2} µs"),
                ratio: times(factor),
                met: Some(factor <= 3.0),
            })
        });
        rows.push(row(
            "sync produce, 64 × 1, server CPU per record over async",
            "≤ 3× async (issue 17)",
            f,
        ));
        let f = self.run("sync-100").and_then(|sync| {
            // `--compare-async`: sync and async servers in alternating
            // slices of one phase; otherwise the async step's own figure,
            // measured minutes apart (older runs).
            let (p, a, limit) = match (
                phase(&sync, "produce-vs-async", "tidelog"),
                phase(&sync, "produce-vs-async", "async"),
            ) {
                (Ok(p), Ok(a)) => (
                    p.records_per_s,
                    a.records_per_s,
                    "async server, alternating slices of the same phase",
                ),
                _ => {
                    let async100 = self.run("http-100")?;
                    (
                        phase(&sync, "produce", "tidelog")?.records_per_s,
                        phase(&async100, "produce", "tidelog")?.records_per_s,
                        "async, same load (`http-100`)",
                    )
                }
            };
            let share = p / a;
            Ok(Measured {
                value: records(p),
                limit: format!("{limit}: {}", records(a)),
                ratio: percent(share),
                met: Some(share >= 0.6),
            })
        });
        rows.push(row(
            "sync produce, 64 × 100 records × 100 B",
            "≥ 60 % of async (issue 17)",
            f,
        ));
    }

    fn compact_rows(&self, rows: &mut Vec<Row>) {
        let compact = self.run("compact");
        let f = compact.clone().and_then(|r| {
            let c = phase(&r, "produce", "tidelog")?;
            let d = phase(&r, "produce", "tidelog-delete")?;
            let share = c.records_per_s / d.records_per_s;
            Ok(Measured {
                value: records(c.records_per_s),
                limit: format!("delete topic, same run: {}", records(d.records_per_s)),
                ratio: percent(share),
                met: Some(share >= 0.7),
            })
        });
        rows.push(row(
            "compact topic produce (`--policy compact`), 64 × 100 × 100 B",
            "≥ 70 % of a delete topic's (issue 17)",
            f,
        ));
        let f = compact.clone().and_then(|r| {
            let lag = extra(&r, "dispatch_lag_max_bytes")?;
            Ok(Measured {
                value: format!("{:.1} MiB max", lag / f64::from(1u32 << 20)),
                limit: "–".into(),
                ratio: "–".into(),
                met: Some(lag <= f64::from(64u32 << 20)),
            })
        });
        rows.push(row(
            "compact topic dispatch lag during produce",
            "≤ 64 MiB throughout (issue 17)",
            f,
        ));
        let f = compact.and_then(|r| visibility_p99(&r, 5.0));
        rows.push(row("compact topic visibility, p99", "≤ 5 ms (issue 17)", f));
    }

    fn cleaner_rows(&self, rows: &mut Vec<Row>) {
        let log = self.output("cleaner", "log");
        let parsed = log.and_then(|text| CleanerFigures::parse(&text));
        let over_cp = |pick: fn(&CleanerFigures) -> f64| {
            parsed.clone().map(|c| Measured {
                value: times(pick(&c)),
                limit: "`cp -r` + sync of the same files".into(),
                ratio: times(pick(&c)),
                met: Some(pick(&c) >= 1.0),
            })
        };
        rows.push(row(
            "cleaner pass over cp, cold (`cargo bench -p tidelog-cleaner --bench compaction`)",
            "≥ 1.0× cp (issue 17)",
            over_cp(|c| c.cold_over_cp),
        ));
        rows.push(row(
            "cleaner pass over cp, warm",
            "≥ 1.0× cp (issue 17)",
            over_cp(|c| c.warm_over_cp),
        ));
        let f = parsed.clone().map(|c| Measured {
            value: format!("{:.2} B per key", c.bytes_per_key),
            limit: "Kafka's SkimpyOffsetMap: 24 B per slot".into(),
            ratio: "–".into(),
            met: Some(c.bytes_per_key <= 20.0),
        });
        rows.push(row(
            "offset map, allocated bytes per key a pass holds",
            "≤ 20 B (issue 17)",
            f,
        ));
        let f = parsed.clone().map(|c| Measured {
            value: format!("{:.2} M keys", c.keys_per_pass / 1e6),
            limit: "–".into(),
            ratio: "–".into(),
            met: Some(c.keys_per_pass >= 6e6),
        });
        rows.push(row(
            "offset map, keys per pass at the default buffer",
            "≥ 6 M (issue 17)",
            f,
        ));
        let f = parsed.map(|c| Measured {
            value: times(c.busy_over_idle),
            limit: "produce with the cleaner idle".into(),
            ratio: times(c.busy_over_idle),
            met: Some(c.busy_over_idle >= 0.9),
        });
        rows.push(row(
            "produce with the cleaner busy over idle (one in-process producer)",
            "≥ 0.9× (issue 17)",
            f,
        ));
    }

    fn size_rows(&self, rows: &mut Vec<Row>) {
        for (run, size) in [
            ("http-1k", "100 records × 1 KiB"),
            ("http-16k", "10 records × 16 KiB"),
        ] {
            let r = self.run(run);
            let f = r.clone().and_then(|r| {
                let p = phase(&r, "produce", "tidelog")?;
                let dd = self.limit(|l| l.dd_write_mb_s, "dd_write_mb_s")?;
                Ok(Measured {
                    value: format!("{:.0} MB/s ({})", p.mb_per_s, records(p.records_per_s)),
                    limit: format!(
                        "disk write (`dd conv=fdatasync`) {dd:.0} MB/s; memcpy {}",
                        memcpy(&r)
                    ),
                    ratio: format!("{} of dd", percent(p.mb_per_s / dd)),
                    met: None,
                })
            });
            rows.push(row(
                &format!("HTTP produce, 64 connections × {size}"),
                "report beside the disk and memcpy (issue 17)",
                f,
            ));
            let f = r.and_then(|r| {
                let p = phase(&r, "fetch", "tidelog")?;
                let copy = r
                    .memcpy_mb_per_s
                    .ok_or_else(|| format!("{run}: no memcpy_mb_per_s"))?;
                Ok(Measured {
                    value: format!("{:.0} MB/s ({})", p.mb_per_s, records(p.records_per_s)),
                    limit: format!("memcpy {copy:.0} MB/s"),
                    ratio: format!("{} of memcpy", percent(p.mb_per_s / copy)),
                    met: None,
                })
            });
            rows.push(row(
                &format!("HTTP fetch, 64 connections × {size}"),
                "report beside memcpy (issue 17)",
                f,
            ));
        }
    }

    fn partition_rows(&self, rows: &mut Vec<Row>) {
        let eight = self.run("http-100");
        for (run, count) in [
            ("http-p1", "1 partition"),
            ("http-p1000", "1,000 partitions"),
        ] {
            for op in ["produce", "fetch"] {
                let f = self.run(run).and_then(|r| {
                    let p = phase(&r, op, "tidelog")?;
                    let base = eight.clone()?;
                    let b = phase(&base, op, "tidelog")?;
                    Ok(Measured {
                        value: records(p.records_per_s),
                        limit: format!("8 partitions (`http-100`): {}", records(b.records_per_s)),
                        ratio: times(p.records_per_s / b.records_per_s),
                        met: None,
                    })
                });
                rows.push(row(
                    &format!("HTTP {op}, {count}, 64 × 100 × 100 B"),
                    "report: the per-partition cost (issue 17)",
                    f,
                ));
            }
        }
        let f = self.run("http-p1000").and_then(|r| {
            let held = held_of(&r, "http-p1000")?;
            let base = eight.clone()?;
            let base = held_of(&base, "http-100")?;
            Ok(Measured {
                value: format!(
                    "{} open files, {} mappings",
                    count(held.open_files),
                    count(held.mappings)
                ),
                limit: format!(
                    "8 partitions: {} open files, {} mappings",
                    count(base.open_files),
                    count(base.mappings)
                ),
                ratio: "–".into(),
                met: None,
            })
        });
        rows.push(row(
            "what the server holds with 1,000 partitions, after the run",
            "report (issue 17)",
            f,
        ));
    }

    fn kafka_rows(&self, rows: &mut Vec<Row>) {
        for (run, acks) in [("kafka-acks1", "1"), ("kafka-acks-1", "-1")] {
            let f = self
                .run(run)
                .and_then(|r| share_of_ceiling(&r, "produce", "bare Kafka listener", 0.5));
            rows.push(row(
                &format!("Kafka produce, 64 connections × one batch of 100 × 100 B, acks {acks}"),
                "≥ 50 % of the bare listener (issue 16)",
                f,
            ));
        }
        let acks1 = self.run("kafka-acks1");
        let f = acks1.clone().and_then(|r| {
            share_of_ceiling(&r, "fetch", "bare Kafka listener, pre-built batch", 0.5)
        });
        rows.push(row(
            "Kafka fetch, 64 connections, ≈ 100 records a fetch",
            "≥ 50 % of the bare listener (issue 16)",
            f,
        ));
        let f = acks1.and_then(|r| {
            let k = phase(&r, "produce", "tidelog")?;
            let h = phase(&r, "produce", "tidelog-http")?;
            let factor = k.records_per_s / h.records_per_s;
            Ok(Measured {
                value: records(k.records_per_s),
                limit: format!(
                    "tidelog's HTTP produce, same run: {}",
                    records(h.records_per_s)
                ),
                ratio: times(factor),
                met: Some(factor >= 2.0),
            })
        });
        rows.push(row(
            "Kafka produce over tidelog's HTTP produce (acks 1 run)",
            "≥ 2× (issue 16)",
            f,
        ));
        let f = self
            .output("librdkafka", "log")
            .and_then(|text| librdkafka_figure(&text));
        rows.push(row(
            "librdkafka producer (confluent-kafka, one Python loop, `scripts/bench-kafka-client.sh`)",
            "report; label client-bound (issue 16)",
            f,
        ));
    }

    /// `--protocol kafka --transactions` (`txn_run.rs`): transactions
    /// against none, on the same server in the same run (issue 38's
    /// goals), and the LSO lag beside a plain produce's visibility.
    fn transaction_rows(&self, rows: &mut Vec<Row>) {
        let txn = self.run("kafka-txn");
        let f = txn.clone().and_then(|r| {
            let mut m = share_of(
                &r,
                "produce",
                ("transactional", "idempotent"),
                "idempotent producers, same server, alternating slices",
                Some(crate::txn_run::TXN_PRODUCE_GOAL),
            )?;
            if let (Ok(p50), Ok(p99)) = (extra(&r, "end_txn_p50_ms"), extra(&r, "end_txn_p99_ms")) {
                m.value = format!("{}; EndTxn p50 {p50:.2} ms, p99 {p99:.2} ms", m.value);
            }
            Ok(m)
        });
        rows.push(row(
            "Kafka transactional produce, 64 connections, one transaction per 100 batches of 100 × 100 B over 8 partitions, acks -1",
            "≥ 60 % of idempotent produce (issue 38)",
            f,
        ));
        let f = txn.clone().and_then(|r| {
            share_of(
                &r,
                "fetch",
                ("read-committed", "read-uncommitted"),
                "read_uncommitted fetch of the same topic, alternating slices",
                Some(crate::txn_run::COMMITTED_FETCH_GOAL),
            )
        });
        rows.push(row(
            "Kafka read_committed fetch of the transactions' topic, 64 connections, ≈ 100 records a fetch",
            "≥ 90 % of read_uncommitted (issue 38)",
            f,
        ));
        let f = txn.and_then(|r| {
            let v = r
                .visibility
                .as_ref()
                .ok_or_else(|| "no LSO lag figures".to_string())?;
            if v.samples == 0 {
                return Err(format!("no LSO lag sample answered ({} missed)", v.missed));
            }
            let plain_p50 = extra(&r, "plain_visibility_p50_ms")?;
            let plain_p99 = extra(&r, "plain_visibility_p99_ms")?;
            // The fetch may answer before EndTxn does: the marker that
            // moves the LSO is written before the coordinator's Complete
            // record (KAFKA.md "Transactions"); such samples are 0.
            let early = extra(&r, "lso_lag_before_commit")
                .map(|n| format!(", {n:.0} answered before EndTxn"))
                .unwrap_or_default();
            let from_send = extra(&r, "lso_lag_from_send_p99_ms")
                .map(|ms| format!("; p99 {ms:.3} ms from EndTxn sent"))
                .unwrap_or_default();
            Ok(Measured {
                value: format!(
                    "p99 {:.3} ms (p50 {:.3}, max {:.3}; {} samples{early}, {} missed){from_send}",
                    v.p99_ms, v.p50_ms, v.max_ms, v.samples, v.missed
                ),
                limit: format!(
                    "a plain produce's ack → read_uncommitted long-poll answered, same phase: p99 {plain_p99:.3} ms (p50 {plain_p50:.3})"
                ),
                ratio: times(v.p99_ms / plain_p99),
                met: None,
            })
        });
        rows.push(row(
            "Kafka LSO lag: EndTxn commit answered → waiting read_committed long-poll answered, p99",
            "report p99 (issue 38)",
            f,
        ));
    }

    /// `--protocol kafka --cluster` (`cluster_run.rs`): acks=all produce to
    /// a three-node cluster against a single node of the same run (issue
    /// 39's goal), the replicas' lag under that load and the failover
    /// time, reported.
    fn cluster_rows(&self, rows: &mut Vec<Row>) {
        let cluster = self.run("cluster");
        let f = cluster.clone().and_then(|r| {
            let mut m = share_of(
                &r,
                "produce",
                ("cluster", "single"),
                "a single node, acks -1, alternating slices of the same run",
                Some(crate::cluster_run::CLUSTER_PRODUCE_GOAL),
            )?;
            // The three nodes' CPU, master and replicas apart.
            if let (Ok(master), Ok(replicas)) = (
                extra(&r, "master_us_per_record"),
                extra(&r, "replicas_us_per_record"),
            ) {
                m.value = format!(
                    "{} (three nodes: master {master:.2}, both replicas {replicas:.2})",
                    m.value
                );
            }
            Ok(m)
        });
        rows.push(row(
            "Kafka produce, acks -1, to a 3-node cluster on this machine (master + 2 replicas, `min_insync_replicas: 2`), 64 connections × one batch of 100 × 100 B",
            "≥ 50 % of a single node's acks -1 (issue 39)",
            f,
        ));
        let f = cluster.clone().and_then(|r| {
            let p50 = extra(&r, "lag_p50_bytes")?;
            let p99 = extra(&r, "lag_p99_bytes")?;
            let max = extra(&r, "lag_max_bytes")?;
            let samples = extra(&r, "lag_samples")?;
            let rate = extra(&r, "master_log_mb_per_s")?;
            let in_ms = |name: &str| {
                extra(&r, name)
                    .map(|ms| format!(" ≈ {ms:.2} ms"))
                    .unwrap_or_default()
            };
            let kib = |b: f64| b / 1024.0;
            Ok(Measured {
                value: format!(
                    "p99 {:.1} KiB{} (p50 {:.1} KiB{}, max {:.1} KiB{}; {samples:.0} samples)",
                    kib(p99),
                    in_ms("lag_p99_ms"),
                    kib(p50),
                    in_ms("lag_p50_ms"),
                    kib(max),
                    in_ms("lag_max_ms"),
                ),
                limit: format!("the master's log growth in the same slices: {rate:.1} MB/s (bytes → ms at that rate)"),
                ratio: "–".into(),
                met: None,
            })
        });
        rows.push(row(
            "replication lag under that load: each replica's `lag_bytes` in the master's `GET /v1/cluster`, sampled every 10 ms of the cluster's measured slices",
            "report p99 (issue 39)",
            f,
        ));
        let f = cluster.and_then(|r| {
            let n = extra(&r, "failovers")?;
            let p50 = extra(&r, "failover_p50_ms")?;
            let max = extra(&r, "failover_max_ms")?;
            let min = extra(&r, "failover_min_ms")?;
            let ttl = extra(&r, "session_ttl_ms")?;
            Ok(Measured {
                value: format!(
                    "p50 {:.2} s, max {:.2} s (min {:.2} s) over {n:.0} failovers",
                    p50 / 1e3,
                    max / 1e3,
                    min / 1e3
                ),
                limit: format!(
                    "the nodes' etcd lease (`session_ttl_ms`): {:.1} s; CLUSTER.md promises a master within the lease + 5 s",
                    ttl / 1e3
                ),
                ratio: times(p50 / ttl),
                met: None,
            })
        });
        rows.push(row(
            "failover: kill -9 of the master → first acknowledged produce on the new master (HTTP, acks=all)",
            "report p50 and max over 20 (issue 39)",
            f,
        ));
    }

    /// `--security` (`security_run.rs`): the secured listeners against the
    /// plain ones of the same run, 10,000 ACLs against none, a login's
    /// server CPU (the security issue's goals).
    fn security_rows(&self, rows: &mut Vec<Row>) {
        let kafka = self.run("kafka-security");
        let plaintext = "PLAINTEXT listener of the same server, same run";
        for (op, figure, goal) in [
            (
                "produce",
                "Kafka produce over SASL_SSL (TLS 1.3, SCRAM-SHA-512), 64 connections × one batch of 100 × 100 B, acks 1",
                Some(0.7),
            ),
            (
                "fetch",
                "Kafka fetch over SASL_SSL, 64 connections, ≈ 100 records a fetch",
                Some(0.7),
            ),
        ] {
            let f = kafka
                .clone()
                .and_then(|r| share_of(&r, op, ("sasl-ssl", "plaintext"), plaintext, goal));
            rows.push(row(figure, "≥ 70 % of PLAINTEXT (security)", f));
        }
        let f = kafka.clone().and_then(|r| {
            share_of(
                &r,
                "produce",
                ("sasl-ssl-acls", "sasl-ssl"),
                "authorization off, SASL_SSL, a second server in the same run",
                Some(0.95),
            )
        });
        rows.push(row(
            "Kafka produce over SASL_SSL with authorization on and 10,000 ACLs",
            "≥ 95 % of authorization off (< 5 % cost; security)",
            f,
        ));
        let f = kafka.and_then(|r| {
            let server = extra(&r, "login_server_cpu_ms")?;
            let p50 = extra(&r, "login_p50_ms")?;
            let count = extra(&r, "logins")?;
            Ok(Measured {
                value: format!("{server:.2} ms server CPU a login"),
                limit: format!("{count:.0} logins one after another, p50 {p50:.2} ms each"),
                ratio: "–".into(),
                met: None,
            })
        });
        rows.push(row(
            "a SASL_SSL login: TCP connect, TLS handshake (ECDSA P-256), SCRAM-SHA-512",
            "report (security)",
            f,
        ));
        let http = self.run("http-security");
        let plain = "HTTP server alike but for TLS, same run";
        for (op, figure, goal, goal_text) in [
            (
                "produce",
                "HTTPS produce, 64 connections × 100 records × 100 B",
                Some(0.7),
                "≥ 70 % of HTTP (security)",
            ),
            (
                "fetch",
                "HTTPS fetch, 64 connections, max_records 100",
                None,
                "report (security)",
            ),
        ] {
            let f = http
                .clone()
                .and_then(|r| share_of(&r, op, ("https", "http"), plain, goal));
            rows.push(row(figure, goal_text, f));
        }
    }

    fn recovery_and_memory_rows(&self, rows: &mut Vec<Row>) {
        let f = self.run("recovery").and_then(|r| {
            let rec = r
                .recovery
                .ok_or_else(|| "recovery: no recovery figures".to_string())?;
            Ok(Measured {
                value: format!(
                    "{:.2} s for {:.2} GiB in {} segments",
                    rec.recovery_s,
                    rec.log_bytes as f64 / f64::from(1u32 << 30),
                    rec.segments
                ),
                limit: format!("cold `cat` of the same bytes: {:.2} s", rec.cat_s),
                ratio: times(rec.ratio),
                met: Some(rec.ratio <= crate::recovery::RATIO_GOAL),
            })
        });
        rows.push(row(
            "recovery after kill -9, cold page cache (`--recovery-mib`)",
            "≤ 1.5× cat (issue 17)",
            f,
        ));
        rows.push(row(
            "server RssAnon after each issue-17 run (the largest)",
            "< 256 MiB (issue 17)",
            self.largest_rss_anon(),
        ));
        rows.push(row(
            "server RssAnon after the tiered run",
            "< 256 MiB plus the read cache's budget (TIERED.md)",
            self.tiered_rss_anon(),
        ));
    }

    /// The largest RssAnon of the started servers of issue 17's runs (every
    /// run but `tiered`, whose remote reads fill a cache with a budget of
    /// its own: [`Self::tiered_rss_anon`]).
    fn largest_rss_anon(&self) -> Figures {
        let mut seen: Vec<(String, u64)> = Vec::new();
        for name in RUNS.into_iter().filter(|n| *n != "tiered") {
            if let Ok(r) = self.run(name) {
                if let Some(kib) = r.server.and_then(|s| s.rss_anon_kib) {
                    seen.push((name.to_string(), kib));
                }
            }
        }
        let (name, kib) = seen
            .iter()
            .max_by_key(|(_, kib)| *kib)
            .cloned()
            .ok_or_else(|| "no run reported its server's RssAnon".to_string())?;
        let mib = |k: u64| k as f64 / 1024.0;
        Ok(Measured {
            value: format!("{:.1} MiB (`{name}`), over {} runs", mib(kib), seen.len()),
            limit: "–".into(),
            ratio: "–".into(),
            met: Some(kib < RSS_ANON_GOAL_KIB),
        })
    }

    /// The tiered run's RssAnon beside its read-ahead cache: remote
    /// fetches fill up to `read_cache_bytes` of 1 MiB blocks (the run uses
    /// the default), memory the operator budgets on purpose, so the bound
    /// is issue 17's plus that budget.
    fn tiered_rss_anon(&self) -> Figures {
        let r = self.run("tiered")?;
        let kib = r
            .server
            .and_then(|s| s.rss_anon_kib)
            .ok_or_else(|| "the tiered run reported no RssAnon".to_string())?;
        let cache_kib = tidelog_tiered::TieredConfig::default().read_cache_bytes / 1024;
        let mib = |k: u64| k as f64 / 1024.0;
        Ok(Measured {
            value: format!("{:.1} MiB", mib(kib)),
            limit: format!("`read_cache_bytes` (default): {:.0} MiB", mib(cache_kib)),
            ratio: "–".into(),
            met: Some(kib < RSS_ANON_GOAL_KIB + cache_kib),
        })
    }

    fn limit(&self, pick: fn(&Limits) -> Option<f64>, name: &str) -> Result<f64, String> {
        let limits = self.limits.as_ref().map_err(Clone::clone)?;
        pick(limits).ok_or_else(|| format!("limits.json: no {name}"))
    }

    /// The whole Markdown: the table, then the limits and the load.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let m = &self.meta;
        let _ = writeln!(
            out,
            "| figure | value | machine limit beside it | ratio | goal | met? | commit | date |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
        for r in self.rows() {
            let verdict = match &r.verdict {
                Verdict::Met => "met".to_string(),
                Verdict::Missed => "**missed**".to_string(),
                Verdict::Reported => "reported".to_string(),
                Verdict::Failed(why) => format!("failed: {why}"),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | `{}` | {} |",
                cell(&r.figure),
                cell(&r.value),
                cell(&r.limit),
                cell(&r.ratio),
                cell(&r.goal),
                cell(&verdict),
                m.commit,
                m.date
            );
        }
        let _ = writeln!(out);
        let show = |v: Option<f64>, unit: &str| {
            v.map_or_else(|| "not measured".to_string(), |v| format!("{v:.0} {unit}"))
        };
        match &self.limits {
            Ok(l) => {
                let _ = writeln!(
                    out,
                    "Machine limits, same session, on the data dir's disk: disk write (`dd bs=1M conv=fdatasync`) {}; one writer's 4 KiB `dd oflag=dsync` {}; memcpy (`dd` to /dev/null) {}; cold `cat` {}.",
                    show(l.dd_write_mb_s, "MB/s"),
                    show(l.dd_dsync_ops_s, "ops/s"),
                    show(l.dd_memcpy_mb_s, "MB/s"),
                    show(l.cat_cold_mb_s, "MB/s"),
                );
            }
            Err(why) => {
                let _ = writeln!(out, "Machine limits: failed: {why}.");
            }
        }
        let _ = writeln!(
            out,
            "{}Load: `{}` before, `{}` after.",
            if m.quick {
                "**Quick run** (`--quick`: short phases, small sizes; not figures to quote). "
            } else {
                ""
            },
            m.uptime_start.trim(),
            m.uptime_end.trim()
        );
        out
    }
}

/// The `tidelog bench` steps of the suite, by result name.
const RUNS: [&str; 18] = [
    "http-100",
    "http-10",
    "http-1",
    "sync-1",
    "sync-100",
    "compact",
    "http-1k",
    "http-16k",
    "http-p1",
    "http-p1000",
    "kafka-acks1",
    "kafka-acks-1",
    "kafka-security",
    "kafka-txn",
    "cluster",
    "http-security",
    "recovery",
    "tiered",
];

/// `--suite-table DIR`: prints the Markdown.
pub(crate) fn print_table(dir: &Path) -> anyhow::Result<()> {
    print!("{}", Suite::open(dir)?.markdown());
    Ok(())
}

fn row(figure: &str, goal: &str, figures: Figures) -> Row {
    match figures {
        Ok(m) => Row {
            figure: figure.to_string(),
            value: m.value,
            limit: m.limit,
            ratio: m.ratio,
            goal: goal.to_string(),
            verdict: match m.met {
                Some(true) => Verdict::Met,
                Some(false) => Verdict::Missed,
                None => Verdict::Reported,
            },
        },
        Err(why) => Row {
            figure: figure.to_string(),
            value: "–".into(),
            limit: "–".into(),
            ratio: "–".into(),
            goal: goal.to_string(),
            verdict: Verdict::Failed(why),
        },
    }
}

fn phase<'a>(r: &'a RunResults, op: &str, target: &str) -> Result<&'a PhaseFigures, String> {
    let p = r
        .phase(op, target)
        .ok_or_else(|| format!("no {op} row for {target}"))?;
    if p.records_per_s > 0.0 {
        Ok(p)
    } else {
        Err(format!(
            "{op} {target} measured no records ({} errors)",
            p.errors
        ))
    }
}

/// tidelog's records/s over the ceiling's in the same run.
fn share_of_ceiling(r: &RunResults, op: &str, ceiling: &str, goal: f64) -> Figures {
    let base = format!("{ceiling}, same run");
    share_of(r, op, ("tidelog", "ceiling"), &base, Some(goal))
}

/// `; X µs server CPU per record` of a base row, when measured.
fn base_cpu(p: &PhaseFigures) -> String {
    p.server_us_per_record
        .map(|us| format!("; {us:.2} µs server CPU per record"))
        .unwrap_or_default()
}

/// `targets.0`'s records/s over `targets.1`'s in the same run, against
/// `goal` (a share) if there is one; `base` names the second.
fn share_of(
    r: &RunResults,
    op: &str,
    targets: (&str, &str),
    base: &str,
    goal: Option<f64>,
) -> Figures {
    let t = phase(r, op, targets.0)?;
    let c = phase(r, op, targets.1)?;
    let share = t.records_per_s / c.records_per_s;
    let cpu = t
        .server_us_per_record
        .map(|us| format!("; {us:.2} µs server CPU per record"))
        .unwrap_or_default();
    Ok(Measured {
        value: format!("{}, p99 {:.2} ms{cpu}", records(t.records_per_s), t.p99_ms),
        limit: format!("{base}: {}{}", records(c.records_per_s), base_cpu(c)),
        ratio: percent(share),
        met: goal.map(|goal| share >= goal),
    })
}

fn visibility_p99(r: &RunResults, goal_ms: f64) -> Figures {
    let v = r
        .visibility
        .as_ref()
        .ok_or_else(|| "no visibility figures".to_string())?;
    if v.samples == 0 {
        return Err(format!(
            "no visibility sample answered ({} missed)",
            v.missed
        ));
    }
    Ok(Measured {
        value: format!(
            "p99 {:.3} ms (p50 {:.3}, max {:.3}; {} samples, {} missed)",
            v.p99_ms, v.p50_ms, v.max_ms, v.samples, v.missed
        ),
        limit: "–".into(),
        ratio: "–".into(),
        met: Some(v.p99_ms <= goal_ms && v.missed == 0),
    })
}

fn server_us(r: &RunResults) -> Result<f64, String> {
    phase(r, "produce", "tidelog")?
        .server_us_per_record
        .ok_or_else(|| "no server CPU per record".to_string())
}

fn extra(r: &RunResults, name: &str) -> Result<f64, String> {
    r.extra
        .get(name)
        .copied()
        .ok_or_else(|| format!("the run reported no {name}"))
}

fn held_of<'a>(r: &'a RunResults, run: &str) -> Result<&'a crate::machine::ServerFigures, String> {
    r.server
        .as_ref()
        .ok_or_else(|| format!("{run}: no server figures"))
}

fn memcpy(r: &RunResults) -> String {
    r.memcpy_mb_per_s
        .map_or_else(|| "not measured".to_string(), |v| format!("{v:.0} MB/s"))
}

fn count(v: Option<u64>) -> String {
    v.map_or_else(|| "n/a".to_string(), |v| v.to_string())
}

/// `1.44 M records/s`, `88.6 k records/s`.
fn records(per_s: f64) -> String {
    if per_s >= 1e6 {
        format!("{:.2} M records/s", per_s / 1e6)
    } else if per_s >= 1e3 {
        format!("{:.1} k records/s", per_s / 1e3)
    } else {
        format!("{per_s:.0} records/s")
    }
}

fn percent(share: f64) -> String {
    format!("{:.1} %", share * 100.0)
}

fn times(factor: f64) -> String {
    format!("{factor:.2}×")
}

/// A table cell: one line, no column separator.
fn cell(text: &str) -> String {
    one_line(text).replace('|', "\\|")
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The compaction bench's summary lines the table needs.
#[derive(Debug, Clone, PartialEq)]
struct CleanerFigures {
    cold_over_cp: f64,
    warm_over_cp: f64,
    bytes_per_key: f64,
    keys_per_pass: f64,
    busy_over_idle: f64,
}

impl CleanerFigures {
    fn parse(text: &str) -> Result<CleanerFigures, String> {
        let line = |prefix: &str| {
            text.lines()
                .find(|l| l.starts_with(prefix))
                .ok_or_else(|| format!("the compaction bench printed no {prefix:?} line"))
        };
        let cp = line("cleaner / cp: ")?;
        let map = line("offset map at the default buffer")?;
        // "produce busy / idle (4 busy slices between 5 idle ones, ...): 1.16x appended, ..."
        let produce = line("produce busy / idle")?;
        Ok(CleanerFigures {
            cold_over_cp: number_after(cp, "cold ")?,
            warm_over_cp: number_after(cp, "warm ")?,
            bytes_per_key: number_after(map, "allocated / keys per pass = ")?,
            keys_per_pass: number_before(map, " keys per pass (")?,
            busy_over_idle: number_after(produce, ": ")?,
        })
    }
}

/// The librdkafka script's rate and its client-bound verdict.
fn librdkafka_figure(text: &str) -> Figures {
    let rate_line = text
        .lines()
        .find(|l| l.starts_with("confluent-kafka producer: "))
        .ok_or_else(|| "the script printed no \"confluent-kafka producer:\" line".to_string())?;
    let rate = number_before(rate_line, " records/s")?;
    let verdict = text
        .lines()
        .find_map(|l| l.strip_prefix("verdict: "))
        .unwrap_or("no verdict printed");
    let server = text
        .lines()
        .find_map(|l| l.strip_prefix("server CPU: "))
        .map(|s| format!("; server CPU {s}"))
        .unwrap_or_default();
    Ok(Measured {
        value: format!("{}; {verdict}{server}", records(rate)),
        limit: "–".into(),
        ratio: "–".into(),
        met: None,
    })
}

/// The number that starts right after `marker` in `line`.
fn number_after(line: &str, marker: &str) -> Result<f64, String> {
    let at = line
        .find(marker)
        .ok_or_else(|| format!("no {marker:?} in {line:?}"))?;
    let rest = &line[at + marker.len()..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    rest[..end]
        .parse()
        .map_err(|_| format!("no number after {marker:?} in {line:?}"))
}

/// The number (the word) right before `marker` in `line`.
fn number_before(line: &str, marker: &str) -> Result<f64, String> {
    let at = line
        .find(marker)
        .ok_or_else(|| format!("no {marker:?} in {line:?}"))?;
    line[..at]
        .split_whitespace()
        .next_back()
        .and_then(|w| w.trim_start_matches(['(', ':']).parse().ok())
        .ok_or_else(|| format!("no number before {marker:?} in {line:?}"))
}

#[cfg(test)]
mod tests;
