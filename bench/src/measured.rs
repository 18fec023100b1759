//! What a measured phase found: [`PhaseResult`] for the produce and fetch
//! phases (with the [`Measured`] counts and latencies of its connections
//! and the [`CpuSpent`] of each side), [`Visibility`] for the long-poll
//! phase.
//!
//! Plain figures, a leaf of the crate: the phases (`load`, `visibility`)
//! fill them, and the text report (`render`, `report`) and the JSON
//! figures (`results`) read them, without any of those importing another.
//! A slice of a phase merges into its phase's result ([`PhaseResult::absorb`]);
//! CPU times add up only while both sides could be measured.

use std::time::{Duration, Instant};

use crate::histogram::Histogram;

/// What one connection (or, merged, a phase) measured.
#[derive(Default)]
pub(crate) struct Measured {
    pub(crate) requests: u64,
    pub(crate) records: u64,
    pub(crate) wire_bytes: u64,
    pub(crate) latency: Histogram,
    /// Transactional producers: how long each measured EndTxn commit
    /// took (part of its request's `latency`).
    pub(crate) commits: Histogram,
    pub(crate) errors: u64,
    pub(crate) first_error: Option<String>,
    /// When the last measured answer arrived.
    pub(crate) last_answer: Option<Instant>,
}

impl Measured {
    pub(crate) fn merge(&mut self, other: Measured) {
        self.requests += other.requests;
        self.records += other.records;
        self.wire_bytes += other.wire_bytes;
        self.latency.merge(&other.latency);
        self.commits.merge(&other.commits);
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.last_answer = self.last_answer.max(other.last_answer);
    }

    pub(crate) fn error(&mut self, what: String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(what);
        }
    }
}

/// CPU time spent during a measured window (`None`: not measurable).
#[derive(Clone, Copy, Default)]
pub(crate) struct CpuSpent {
    pub(crate) server: Option<Duration>,
    pub(crate) client: Option<Duration>,
}

/// A finished phase.
pub(crate) struct PhaseResult {
    pub(crate) measured: Measured,
    pub(crate) elapsed: Duration,
    pub(crate) record_bytes: usize,
    pub(crate) cpu: CpuSpent,
}

impl PhaseResult {
    pub(crate) fn empty(record_bytes: usize) -> PhaseResult {
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
    pub(crate) fn absorb(&mut self, slice: PhaseResult) {
        self.measured.merge(slice.measured);
        self.elapsed += slice.elapsed;
        let add = |a: Option<Duration>, b: Option<Duration>| Some(a? + b?);
        self.cpu.server = add(self.cpu.server, slice.cpu.server);
        self.cpu.client = add(self.cpu.client, slice.cpu.client);
    }

    pub(crate) fn records_per_s(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.measured.records as f64 / secs
        } else {
            0.0
        }
    }

    pub(crate) fn mb_per_s(&self) -> f64 {
        self.records_per_s() * self.record_bytes as f64 / 1e6
    }
}

/// What the visibility phase measured.
pub(crate) struct Visibility {
    /// Produce acknowledged → waiting fetch answered.
    pub(crate) after_ack: Histogram,
    /// Produce sent → waiting fetch answered.
    pub(crate) after_send: Histogram,
    /// Answers that arrived before the produce acknowledgement (counted as 0
    /// in `after_ack`).
    pub(crate) before_ack: u64,
    /// Long-polls that timed out or failed instead of returning the record.
    pub(crate) missed: u64,
    pub(crate) first_error: Option<String>,
}
