//! The figures of one run as JSON (`--json FILE`), so a suite
//! (`scripts/bench.sh`) builds its table from numbers, not from the text
//! report (`suite`).
//!
//! The text report stays what a person reads; this file carries the same
//! figures and nothing the text does not say. Fields a run does not
//! measure are absent (`None`), never zero: the table tells "not
//! measured" from "measured nothing".
//!
//! Plain data beneath the runners: [`RunResults`] with its rows, the
//! visibility and recovery figures (`recovery` fills [`RecoveryFigures`])
//! and the server's ([`crate::machine::ServerFigures`]). It reads the
//! phases' figures (`measured`) and nothing that runs a phase, so `suite`
//! and every runner can hold it without importing one another.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::cpu;
use crate::measured::{PhaseResult, Visibility};
use crate::render::ms;
use crate::BenchArgs;

/// One `tidelog bench` run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunResults {
    /// `http`, `kafka` or `recovery`.
    pub mode: String,
    pub connections: usize,
    pub batch: usize,
    pub record_bytes: usize,
    pub partitions: u32,
    /// Kafka: the produce requests' acks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acks: Option<i16>,
    /// Measured ms of each phase and target.
    pub duration_ms: u64,
    /// One row per phase and target, as the text table.
    #[serde(default)]
    pub phases: Vec<PhaseFigures>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visibility: Option<VisibilityFigures>,
    /// The started server, read from /proc at the end of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<crate::machine::ServerFigures>,
    /// Memory copy rate measured in this process before the run
    /// (`machine::memcpy_mb_per_s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memcpy_mb_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<RecoveryFigures>,
    /// Figures of modes that add their own (e.g. a compact topic's
    /// `dispatch_lag_max_bytes`), by name; `suite` names the ones it reads.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, f64>,
}

/// One row of the results table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseFigures {
    /// `produce`, `fetch` or `produce-vs-async` (`--compare-async`).
    pub phase: String,
    /// `tidelog`, `ceiling`, `tidelog-http`, ...
    pub target: String,
    pub records_per_s: f64,
    /// Record values, 10^6 B/s.
    pub mb_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub requests: u64,
    pub errors: u64,
    /// µs of the target's CPU per record (`None`: not measurable).
    #[serde(default)]
    pub server_us_per_record: Option<f64>,
    #[serde(default)]
    pub client_us_per_record: Option<f64>,
}

impl PhaseFigures {
    pub(crate) fn of(phase: &str, target: &str, r: &PhaseResult) -> PhaseFigures {
        let h = &r.measured.latency;
        PhaseFigures {
            phase: phase.to_string(),
            target: target.to_string(),
            records_per_s: r.records_per_s(),
            mb_per_s: r.mb_per_s(),
            p50_ms: ms(h.quantile(0.5)),
            p99_ms: ms(h.quantile(0.99)),
            p999_ms: ms(h.quantile(0.999)),
            requests: r.measured.requests,
            errors: r.measured.errors,
            server_us_per_record: cpu::micros_per_record(r.cpu.server, r.measured.records),
            client_us_per_record: cpu::micros_per_record(r.cpu.client, r.measured.records),
        }
    }
}

/// The visibility phase: produce acknowledged → waiting long-poll answered.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VisibilityFigures {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub samples: u64,
    pub missed: u64,
}

impl VisibilityFigures {
    pub(crate) fn of(vis: &Visibility) -> VisibilityFigures {
        VisibilityFigures {
            p50_ms: ms(vis.after_ack.quantile(0.5)),
            p99_ms: ms(vis.after_ack.quantile(0.99)),
            max_ms: ms(vis.after_ack.quantile(1.0)),
            samples: vis.after_ack.count(),
            missed: vis.missed,
        }
    }
}

/// What the recovery run measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RecoveryFigures {
    /// CommitLog bytes when the fill stopped (the server's own count).
    pub filled_bytes: u64,
    /// The recovered CommitLog's bytes, `[min, max)` of the restarted
    /// server: what `cat` reads.
    pub log_bytes: u64,
    pub segments: u64,
    pub fill_s: f64,
    /// Files of the data dir dropped from the page cache before each
    /// timing.
    pub files_dropped: u64,
    /// Spawn to `/status/ready`.
    pub recovery_s: f64,
    /// `cat` of the log's bytes, cold.
    pub cat_s: f64,
    /// `recovery_s / cat_s`.
    pub ratio: f64,
}

impl RunResults {
    /// A run's header fields from its options; the figures come later.
    pub(crate) fn for_args(mode: &str, args: &BenchArgs) -> RunResults {
        RunResults {
            mode: mode.to_string(),
            connections: args.connections,
            batch: args.batch,
            record_bytes: args.record_bytes,
            partitions: args.partitions,
            acks: (mode == "kafka").then_some(args.acks),
            duration_ms: args.duration_ms,
            ..RunResults::default()
        }
    }

    /// The row of `phase` and `target`.
    pub fn phase(&self, phase: &str, target: &str) -> Option<&PhaseFigures> {
        self.phases
            .iter()
            .find(|p| p.phase == phase && p.target == target)
    }

    pub(crate) fn write(&self, path: &Path) -> anyhow::Result<()> {
        let text = serde_json::to_string_pretty(self).context("encoding the results")?;
        std::fs::write(path, text + "\n")
            .with_context(|| format!("writing the results to {}", path.display()))
    }
}
