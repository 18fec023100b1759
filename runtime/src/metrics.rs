//! `/metrics` families kept by a component the HTTP API does not know.
//!
//! The HTTP API renders `/metrics`; the Kafka listener keeps its own
//! counters (`tidelog_kafka::metrics`). The node hands the API each such
//! component as a [`MetricFamilies`], which appends its families in
//! Prometheus' text format (0.0.4) when scraped. A trait rather than a
//! snapshot type: a snapshot both crates could name would have to live
//! here, so every Kafka counter added would change this crate and the
//! API's renderer; behind the trait, the Kafka crate alone owns its names
//! and shapes.
//!
//! [`Registry`] holds what the node registered. [`counter`] and [`gauge`]
//! write a family of one series with its HELP
//! and TYPE lines, the same for every renderer.

use std::fmt::Write as _;
use std::sync::{Arc, RwLock};

/// A component's metric families (module doc).
pub trait MetricFamilies: Send + Sync + std::fmt::Debug {
    /// Appends the families, each with its HELP and TYPE lines, to `out`.
    /// Reads its counters now (relaxed atomics); never blocks.
    fn render(&self, out: &mut String);
}

/// The families a node registered, in the order registered: the metrics
/// registry the node owns and the HTTP API renders from.
#[derive(Debug, Default)]
pub struct Registry {
    families: RwLock<Vec<Arc<dyn MetricFamilies>>>,
}

impl Registry {
    /// Adds `families`: rendered from the next scrape on, after those
    /// registered before it.
    pub fn register(&self, families: Arc<dyn MetricFamilies>) {
        self.families
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(families);
    }

    /// Every registered component, in order.
    pub fn families(&self) -> Vec<Arc<dyn MetricFamilies>> {
        self.families
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// A counter family of one series.
pub fn counter(out: &mut String, name: &str, help: &str, value: u64) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} counter");
    let _ = writeln!(out, "{name} {value}");
}

/// A gauge family of one series.
pub fn gauge(out: &mut String, name: &str, help: &str, value: f64) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} gauge");
    let _ = writeln!(out, "{name} {value}");
}
