//! The table printed at the end of a run, with the goals of issue 3.

use std::time::Duration;

use crate::cpu;
use crate::load::PhaseResult;
use crate::visibility::Visibility;
use crate::BenchArgs;

/// Goal of issue 3: produce and fetch reach at least this share of the
/// bare endpoint's records/s.
const RATIO_GOAL: f64 = 0.5;
/// Goal of issue 3: p99 visibility latency at moderate load.
const VISIBILITY_P99_GOAL: Duration = Duration::from_millis(5);

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

pub(crate) fn report(
    args: &BenchArgs,
    phases: [(&str, &PhaseResult, &PhaseResult); 2],
    vis: &Visibility,
) {
    println!();
    println!(
        "results ({} connections, {} records x {} B per request; MB/s = record values, 10^6 B/s; latency per request):",
        args.connections, args.batch, args.record_bytes
    );
    let rows: Vec<_> = phases
        .iter()
        .flat_map(|(phase, tidelog, ceiling)| {
            [(*phase, "tidelog", *tidelog), (*phase, "ceiling", *ceiling)]
        })
        .collect();
    table(&rows);
    println!();
    for (phase, tidelog, ceiling) in &phases {
        ratio_goal(phase, tidelog, ceiling);
    }
    println!();
    println!("{CPU_HEADING}");
    for (phase, tidelog, ceiling) in &phases {
        println!(
            "{phase:<8} server: tidelog {}, ceiling {}; load generator: {} against tidelog, {} against the ceiling",
            server_micros(tidelog),
            server_micros(ceiling),
            client_micros(tidelog),
            client_micros(ceiling),
        );
    }
    println!();
    visibility_lines("visibility", vis);
}

/// The visibility lines of a report, labelled `label`, with the goal.
pub(crate) fn visibility_lines(label: &str, vis: &Visibility) {
    let p99 = vis.after_ack.quantile(0.99);
    println!(
        "{label}: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms after the produce ack (p50 {:.3} ms, p99 {:.3} ms after the produce was sent); {} samples, {} answered before the ack, {} missed",
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
        println!("{label}: first failure: {e}");
    }
    let met = vis.after_ack.count() > 0 && vis.missed == 0 && p99 <= VISIBILITY_P99_GOAL;
    println!(
        "goal {label}: p99 {:.3} ms (goal <= {} ms): {}",
        ms(p99),
        VISIBILITY_P99_GOAL.as_millis(),
        verdict(met)
    );
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
