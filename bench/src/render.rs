//! The pieces every text report is made of: milliseconds, a goal's
//! verdict, one phase's records/s over another's, the results table and
//! the CPU-per-record cells, and the goal line of issue 3 (tidelog at least
//! half the ceiling's records/s).
//!
//! A leaf beneath the reports (`report` for HTTP, `kafka_run`, `compact`,
//! `recovery`, `machine`): it reads only [`PhaseResult`]s and prints or
//! returns text, so any report can use it without importing another. What
//! it prints is the report's format: changing a column here changes every
//! table a run prints.

use std::time::Duration;

use crate::cpu;
use crate::measured::PhaseResult;

/// Goal of issue 3: produce and fetch reach at least this share of the
/// bare endpoint's records/s.
const RATIO_GOAL: f64 = 0.5;

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub(crate) fn verdict(met: bool) -> &'static str {
    if met {
        "MET"
    } else {
        "MISSED"
    }
}

pub(crate) const CPU_HEADING: &str =
    "CPU per record (µs of user + system time over the measured windows, from /proc):";

/// The goal line of `phase`: tidelog's records/s as a share of the
/// ceiling's.
pub(crate) fn ratio_goal(phase: &str, tidelog: &PhaseResult, ceiling: &PhaseResult) {
    let ratio = ratio(tidelog, ceiling);
    println!(
        "goal {phase}: tidelog / ceiling = {:.1} % (goal >= {:.0} %): {}",
        ratio * 100.0,
        RATIO_GOAL * 100.0,
        verdict(ratio >= RATIO_GOAL)
    );
}

/// `a`'s records/s over `b`'s (0 when `b` measured nothing).
pub(crate) fn ratio(a: &PhaseResult, b: &PhaseResult) -> f64 {
    if b.records_per_s() > 0.0 {
        a.records_per_s() / b.records_per_s()
    } else {
        0.0
    }
}

pub(crate) fn server_micros(r: &PhaseResult) -> String {
    micros(r.cpu.server, r)
}

pub(crate) fn client_micros(r: &PhaseResult) -> String {
    micros(r.cpu.client, r)
}

fn micros(cpu: Option<Duration>, r: &PhaseResult) -> String {
    cpu::micros_per_record(cpu, r.measured.records)
        .map_or_else(|| "n/a".to_string(), |us| format!("{us:.3}"))
}

/// The results table: one row per (phase, target, result).
pub(crate) fn table(rows: &[(&str, &str, &PhaseResult)]) {
    // The target column as wide as its longest name, 8 at least.
    let width = rows
        .iter()
        .map(|(_, target, _)| target.len())
        .fold(8, usize::max);
    println!(
        "{:<8} {:<width$} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>7}",
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
    for (phase, target, r) in rows {
        let h = &r.measured.latency;
        println!(
            "{:<8} {:<width$} {:>12.0} {:>9.2} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>10} {:>7}",
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
