//! Selection: which log a thread cleans next, and how far.
//!
//! Dirty range `[first_dirty, first_uncleanable)`: `first_dirty` from the
//! cleaner-offset checkpoint (reset to the log start if out of range);
//! `first_uncleanable` is the lowest of the active segment's base, the
//! first segment with a record newer than `min.compaction.lag.ms`, the
//! base of the segment holding the last stable offset (an open
//! transaction's records may yet be aborted: [`super::pass`],
//! "Transactions"), and the end of the copies known durable (see
//! [`super::pass`], "Durable copies only"). Segments from
//! `first_uncleanable` on are uncleanable.
//!
//! A log is eligible when it is not in progress, paused, or uncleanable
//! waiting out its backoff, and it is forced by a request, or its dirty
//! ratio exceeds `min.cleanable.dirty.ratio`, or `max.compaction.lag.ms`
//! or a tombstone's delete horizon has come due. Of the eligible logs the
//! forced come first, then the filthiest.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::Shared;
use crate::checkpoint::CleanerCheckpoint;
use crate::compacted::log::{lock, CompactedLog};
use crate::compacted::{CompactTopicConfig, CompactedLogs};
use crate::error::Result;

/// Dirty-range facts about one log.
#[derive(Clone, Debug)]
pub(super) struct Cleanable {
    pub(super) first_dirty: u64,
    pub(super) first_uncleanable: u64,
    pub(super) dirty_bytes: u64,
    pub(super) ratio: f64,
    pub(super) max_lag_due: bool,
    pub(super) tombstones_due: bool,
    pub(super) first_dirty_ts: Option<i64>,
}

/// Recovery may have cut a compacted log below its cleaner checkpoint
/// (`CompactedLog::truncate_from_physical`): copies of records the CommitLog
/// lost, and copies past the store checkpoint, which its replay then copies
/// again. Either way the records from the cut on were never cleaned: those
/// that reuse lost offsets, and the replayed copies, superseded values
/// included, even where the replay brought the log's end back past the
/// checkpoint. Left above the cut, the checkpoint would take them for clean
/// ones: they would never be deduplicated among themselves, and a tombstone
/// among them could expire while an older value of its key stays, bringing
/// the key back. So the checkpoint is lowered to the cut (or to the end, if
/// that is lower), and stored, before the cleaner runs (Kafka lowers its
/// checkpoint when it truncates a log). The cleaner is created after the
/// store opened, so every cut of this start is known by then.
pub(super) fn lower_past_the_end(
    checkpoint: &mut CleanerCheckpoint,
    logs: &CompactedLogs,
    data_dir: &std::path::Path,
) -> Result<()> {
    let past: Vec<(String, u32, u64, u64)> = checkpoint
        .iter()
        .filter_map(|(topic, p, offset)| {
            let log = logs.log(topic, p)?;
            let end = log
                .recovery_cut()
                .map_or(log.next_offset(), |cut| cut.min(log.next_offset()));
            (offset > end).then(|| (topic.to_string(), p, offset, end))
        })
        .collect();
    for (topic, p, offset, end) in &past {
        tracing::info!(
            topic,
            partition = p,
            checkpoint = offset,
            end,
            "cleaner checkpoint past where recovery cut the compacted log; lowered to the cut"
        );
        checkpoint.set(topic, *p, *end)?;
    }
    if !past.is_empty() {
        checkpoint.store(data_dir)?;
    }
    Ok(())
}

/// The dirty range and ratio of a log (see the module doc) whose last
/// stable offset is `stable` ([`Shared::stable_end`]).
pub(super) fn cleanable(
    log: &CompactedLog,
    cfg: &CompactTopicConfig,
    checkpoint: Option<u64>,
    stable: u64,
    now: i64,
) -> Cleanable {
    let segments = log.segments();
    let start = log.beginning_offset();
    let end = log.next_offset();
    let first_dirty = match checkpoint {
        Some(c) if c >= start && c <= end => c,
        Some(c) => {
            tracing::info!(tp = %log.topic_partition(), checkpoint = c, start, end, "cleaner checkpoint out of range; resetting to the log start");
            start
        }
        None => start,
    };
    let active_base = segments.last().map_or(end, |s| s.base_offset());
    let lag_limit = now.saturating_sub(cfg.min_compaction_lag_ms);
    let first_young = segments
        .iter()
        .find(|s| s.stats().max_store_ts_ms > lag_limit && !s.is_empty())
        .map_or(u64::MAX, |s| s.base_offset());
    // Kafka's rule: from the segment holding the first unstable offset on,
    // nothing is cleaned. Its base, not the offset: a pass ending inside a
    // segment would leave that segment dirty and be picked again at once.
    let first_unstable = segments
        .iter()
        .rev()
        .find(|s| s.base_offset() <= stable)
        .map_or(stable, |s| s.base_offset());
    let first_uncleanable = active_base.min(first_young).min(first_unstable);
    let mut clean_bytes = 0;
    let mut dirty_bytes = 0;
    let mut first_dirty_ts = None;
    let mut tombstones_due = false;
    for s in segments
        .iter()
        .filter(|s| s.base_offset() < first_uncleanable)
    {
        let st = s.stats();
        match st.last_offset {
            Some(last) if last >= first_dirty => {
                dirty_bytes += s.len();
                if first_dirty_ts.is_none() {
                    first_dirty_ts = st.first_store_ts_ms;
                }
            }
            Some(_) => clean_bytes += s.len(),
            None => {}
        }
        if st.min_tombstone_horizon_ms <= now {
            tombstones_due = true;
        }
    }
    let total = clean_bytes + dirty_bytes;
    let ratio = if total == 0 {
        0.0
    } else {
        dirty_bytes as f64 / total as f64
    };
    let max_lag_due = cfg.max_compaction_lag_ms != i64::MAX
        && first_dirty_ts.is_some_and(|t| t <= now.saturating_sub(cfg.max_compaction_lag_ms));
    Cleanable {
        first_dirty,
        first_uncleanable,
        dirty_bytes,
        ratio,
        max_lag_due,
        tombstones_due,
        first_dirty_ts,
    }
}

impl Shared {
    /// The last stable offset of `log`'s partition: its end read first,
    /// then the source's transactions (every transactional copy below
    /// that end is then counted in them).
    pub(super) fn stable_end(&self, log: &CompactedLog) -> u64 {
        let end = log.next_offset();
        let tp = log.topic_partition();
        self.source
            .last_stable_offset(tp.topic(), tp.partition(), end)
            .min(end)
    }

    /// The filthiest eligible log, marked in progress.
    pub(super) fn pick(&self) -> Option<(Arc<CompactedLog>, CompactTopicConfig, Cleanable)> {
        let now = self.logs.now_ms();
        let cp = lock(&self.checkpoint).clone();
        let mut states = lock(&self.states);
        let mut best: Option<(bool, f64, Arc<CompactedLog>, CompactTopicConfig, Cleanable)> = None;
        let mut max_dirty = 0f64;
        for (log, cfg) in self.logs.compact_logs() {
            let tp = log.topic_partition();
            let st = states
                .entry((tp.topic().to_string(), tp.partition()))
                .or_default();
            if st.in_progress || st.paused {
                continue;
            }
            if let Some((_, retry_at)) = &st.uncleanable {
                if *retry_at > now && !st.forced {
                    continue;
                }
            }
            let stable = self.stable_end(&log);
            let info = cleanable(&log, &cfg, cp.get(tp.topic(), tp.partition()), stable, now);
            max_dirty = max_dirty.max(info.ratio);
            let eligible = st.forced
                || (info.dirty_bytes > 0 && info.ratio > cfg.min_cleanable_dirty_ratio)
                || info.max_lag_due
                || info.tombstones_due;
            if !eligible {
                continue;
            }
            let better = match &best {
                None => true,
                Some((forced, ratio, ..)) => (st.forced, info.ratio) > (*forced, *ratio),
            };
            if better {
                best = Some((st.forced, info.ratio, Arc::clone(&log), cfg, info));
            }
        }
        self.metrics
            .max_dirty_percent
            .store((max_dirty * 100.0) as u64, Ordering::Relaxed);
        let (_, _, log, cfg, info) = best?;
        let tp = log.topic_partition();
        if let Some(st) = states.get_mut(&(tp.topic().to_string(), tp.partition())) {
            st.in_progress = true;
            st.forced = false;
            st.started += 1;
        }
        if let Some(ts) = info.first_dirty_ts {
            let delay = now
                .saturating_sub(ts)
                .saturating_sub(cfg.min_compaction_lag_ms)
                .max(0) as u64;
            self.metrics
                .max_compaction_delay_ms
                .store(delay, Ordering::Relaxed);
        }
        Some((log, cfg, info))
    }
}
