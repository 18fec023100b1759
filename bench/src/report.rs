//! The table printed at the end of a run, with the goals of issue 3.
//!
//! The HTTP run's report, and the visibility lines `compact` prints too;
//! the pieces (table, ratios, verdicts, CPU cells) are `render`'s, the
//! figures `measured`'s.

use std::time::Duration;

use crate::measured::{PhaseResult, Visibility};
use crate::render::{client_micros, ms, ratio_goal, server_micros, table, verdict, CPU_HEADING};
use crate::BenchArgs;

/// Goal of issue 3: p99 visibility latency at moderate load.
const VISIBILITY_P99_GOAL: Duration = Duration::from_millis(5);

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
