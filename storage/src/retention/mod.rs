//! Retention of the CommitLog: delete old segments by age and by disk usage,
//! and refuse writes when the disk is nearly full. RocketMQ's
//! CleanCommitLogService and CleanConsumeQueueService, with its defaults.
//!
//! A pass deletes segments when a trigger holds: the current hour is in
//! `delete_when`, the disk is above `disk_max_used_ratio`, or an operator
//! asked. A normal pass deletes *expired* segments (newest record older than
//! `file_reserved_hours`) oldest first and stops at the first one that is
//! not expired, so the log never has a hole. Above `disk_force_clean_ratio`
//! it deletes the oldest segments whatever their age. A manual pass with
//! `force` deletes every deletable segment (RocketMQ's manual delete).
//!
//! Pacing (RocketMQ's rules): every pass pauses `pause_between_deletes_ms`
//! between two deleted files; a scheduled pass (by the hour or by disk
//! pressure) deletes at most `max_segments_per_pass`, and the next pass
//! goes on; an operator's pass deletes everything eligible, paced.
//!
//! Never deleted: the segment being written, and any segment with bytes the
//! indexes do not yet hold durably (past the checkpoint's dispatched
//! position). Extra dispatch sinks, such as the compacted logs of compact
//! topics, flush before that position is recorded, so a record is never
//! deleted from the CommitLog before its compacted copy is on disk.
//!
//! Held: a segment that ends above a [`RetentionHold`]'s
//! [`RetentionHold::min_position`] (the broker's tiered storage installs
//! one: the first record of a tiered partition not yet uploaded) stays, in
//! every mode, forced passes and disk pressure included. The hold never
//! makes room by itself: when the disk fills up, produce is refused (the
//! disk-full tier below) rather than un-uploaded records being deleted.
//!
//! The disk-full flag is kept by its own thread on its own schedule, so a
//! long deletion pass never delays it. It is set above `disk_full_ratio` and
//! cleared only at `disk_force_clean_ratio` or below (hysteresis), so
//! produce does not flap while usage hovers around the mark.
//!
//! Files: this one holds the settings ([`RetentionConfig`]), the clock and
//! disk sources, the hold, and the rules a pass follows (`plan`,
//! `segments_per_pass`); `pass.rs` runs a pass over the store's files by
//! them, with the counters and flags retention shares with the disk-full
//! gate.

pub(crate) mod pass;

pub use pass::AbortedKeep;

use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Result, StoreError};

/// Time, as retention sees it. Tests substitute a [`ManualClock`].
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now_ms(&self) -> i64;
    /// Hour of the day (0..=23) in local time, for `delete_when`.
    fn local_hour(&self) -> u32;
    /// The pause between two deleted files.
    fn pause(&self, d: Duration) {
        std::thread::sleep(d);
    }
}

/// Disk usage of the data directory's filesystem. Tests substitute a
/// [`FixedDiskUsage`].
pub trait DiskUsage: Send + Sync + std::fmt::Debug {
    /// Used fraction in [0, 1], as `df` computes it: used / (used + available).
    fn used_ratio(&self, path: &Path) -> std::io::Result<f64>;

    /// Bytes an unprivileged writer may still allocate there (`df`'s
    /// "available"); `None` where the source does not know (test doubles
    /// that set a ratio only). The disk-full gate keeps the store's
    /// reserve ([`disk_reserve_bytes`](crate::store::disk_reserve_bytes))
    /// free with it.
    fn available_bytes(&self, path: &Path) -> std::io::Result<Option<u64>> {
        let _ = path;
        Ok(None)
    }
}

#[derive(Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        crate::types::now_ms()
    }

    fn local_hour(&self) -> u32 {
        let secs = (self.now_ms() / 1000) as libc::time_t;
        // SAFETY: localtime_r writes only into the `tm` we pass.
        unsafe {
            let mut tm: libc::tm = std::mem::zeroed();
            if libc::localtime_r(&secs, &mut tm).is_null() {
                return ((secs / 3600) % 24) as u32;
            }
            tm.tm_hour as u32
        }
    }
}

#[derive(Debug, Default)]
pub struct StatvfsDiskUsage;

impl DiskUsage for StatvfsDiskUsage {
    fn used_ratio(&self, path: &Path) -> std::io::Result<f64> {
        let st = statvfs(path)?;
        let used = (st.f_blocks as f64 - st.f_bfree as f64).max(0.0);
        let denom = used + st.f_bavail as f64;
        Ok(if denom > 0.0 { used / denom } else { 0.0 })
    }

    fn available_bytes(&self, path: &Path) -> std::io::Result<Option<u64>> {
        let st = statvfs(path)?;
        Ok(Some(
            (st.f_bavail as u64).saturating_mul(st.f_frsize as u64),
        ))
    }
}

fn statvfs(path: &Path) -> std::io::Result<libc::statvfs> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: statvfs writes only into the struct we pass.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut st) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(st)
    }
}

/// What must stay in the CommitLog whatever retention's rules say,
/// installed with [`Store::set_retention_hold`](crate::Store::set_retention_hold).
pub trait RetentionHold: Send + Sync {
    /// The lowest CommitLog position (physical offset) that must be kept:
    /// no segment ending above it is deleted. `None`: nothing is held.
    /// Called once per pass, outside the writer's path; it may take locks
    /// but should not block on I/O.
    fn min_position(&self) -> Option<u64>;
}

/// A clock that tests set by hand. Its pauses do not sleep: they advance
/// the clock and are counted.
#[derive(Debug)]
pub struct ManualClock {
    now_ms: AtomicI64,
    hour: AtomicU32,
    pauses: AtomicU64,
}

impl ManualClock {
    pub fn new(now_ms: i64, hour: u32) -> Self {
        ManualClock {
            now_ms: AtomicI64::new(now_ms),
            hour: AtomicU32::new(hour),
            pauses: AtomicU64::new(0),
        }
    }

    /// How many pauses retention has taken on this clock.
    pub fn pauses(&self) -> u64 {
        self.pauses.load(Ordering::SeqCst)
    }

    pub fn set_now_ms(&self, ms: i64) {
        self.now_ms.store(ms, Ordering::SeqCst);
    }

    pub fn advance(&self, d: Duration) {
        self.now_ms
            .fetch_add(d.as_millis() as i64, Ordering::SeqCst);
    }

    pub fn set_hour(&self, hour: u32) {
        self.hour.store(hour, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now_ms.load(Ordering::SeqCst)
    }

    fn local_hour(&self) -> u32 {
        self.hour.load(Ordering::SeqCst)
    }

    fn pause(&self, d: Duration) {
        self.pauses.fetch_add(1, Ordering::SeqCst);
        self.advance(d);
    }
}

/// A disk-usage source that tests set by hand.
#[derive(Debug)]
pub struct FixedDiskUsage(AtomicU64);

impl FixedDiskUsage {
    pub fn new(ratio: f64) -> Self {
        FixedDiskUsage(AtomicU64::new(ratio.to_bits()))
    }

    pub fn set(&self, ratio: f64) {
        self.0.store(ratio.to_bits(), Ordering::SeqCst);
    }
}

impl DiskUsage for FixedDiskUsage {
    fn used_ratio(&self, _: &Path) -> std::io::Result<f64> {
        Ok(f64::from_bits(self.0.load(Ordering::SeqCst)))
    }
}

/// RocketMQ's `deleteCommitLogFilesInterval`.
pub const PAUSE_BETWEEN_DELETES_MS_DEFAULT: u64 = 100;
/// RocketMQ's `deleteFileBatchMax`.
pub const MAX_SEGMENTS_PER_PASS_DEFAULT: usize = 10;

/// `disk_check_interval_ms` unless a test says otherwise: however long
/// `check_interval_ms` is, writes stop within a second of the disk
/// crossing `disk_full_ratio`.
pub const DISK_CHECK_INTERVAL_MS_DEFAULT: u64 = 1000;

/// Retention settings (`retention:` in broker.yaml), with RocketMQ's
/// defaults. With the `serde` feature it is that section: the keys are
/// OPERATIONS.md's, absent ones keep the defaults below, unknown ones are
/// errors; the other fields are not keys (tests set them).
#[derive(Clone, Debug)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(deny_unknown_fields, default)
)]
pub struct RetentionConfig {
    /// A sealed segment expires this long after its newest record.
    pub file_reserved_hours: u64,
    /// Hours of the day (local time) when expired segments are deleted.
    pub delete_when: DeleteWhen,
    pub check_interval_ms: u64,
    /// Above: delete expired segments now, whatever the hour.
    pub disk_max_used_ratio: f64,
    /// Above: delete the oldest segments even if not expired.
    pub disk_force_clean_ratio: f64,
    /// Above: refuse appends until usage is back at
    /// `disk_force_clean_ratio` or below.
    pub disk_full_ratio: f64,
    /// Most segments one scheduled pass (by the hour or by disk pressure)
    /// deletes; an operator's pass is not capped.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub max_segments_per_pass: usize,
    /// Pause between deleting two files, in every pass, so the unlink and
    /// page-cache work does not spike produce latency.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub pause_between_deletes_ms: u64,
    /// How often the disk-full flag is re-evaluated, at most: the check
    /// runs every [`RetentionConfig::disk_check_every_ms`].
    #[cfg_attr(feature = "serde", serde(skip))]
    pub disk_check_interval_ms: u64,
    #[cfg_attr(feature = "serde", serde(skip))]
    pub clock: Arc<dyn Clock>,
    #[cfg_attr(feature = "serde", serde(skip))]
    pub disk: Arc<dyn DiskUsage>,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            file_reserved_hours: 72,
            delete_when: DeleteWhen { hours: vec![4] },
            check_interval_ms: 10_000,
            disk_max_used_ratio: 0.75,
            disk_force_clean_ratio: 0.85,
            disk_full_ratio: 0.90,
            max_segments_per_pass: MAX_SEGMENTS_PER_PASS_DEFAULT,
            pause_between_deletes_ms: PAUSE_BETWEEN_DELETES_MS_DEFAULT,
            disk_check_interval_ms: DISK_CHECK_INTERVAL_MS_DEFAULT,
            clock: Arc::new(SystemClock),
            disk: Arc::new(StatvfsDiskUsage),
        }
    }
}

/// Hours of the day (0..=23) in which expired segments are deleted,
/// RocketMQ's `deleteWhen`: written `"04"` or `"04;16"`, sorted and
/// deduplicated when parsed, at least one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeleteWhen {
    hours: Vec<u8>,
}

impl DeleteWhen {
    /// Parses `"04"`, `"4;16"`, ... An empty list or item is an error: an
    /// operator who wants no time window should say so with a wide one.
    pub fn parse(text: &str) -> Result<Self> {
        let mut hours = Vec::new();
        for item in text.split(';').map(str::trim) {
            let hour: u8 = item
                .parse()
                .ok()
                .filter(|h| *h <= 23)
                .ok_or_else(|| {
                    let within = if item == text { String::new() } else { format!(" in {text:?}") };
                    StoreError::InvalidConfig {
                        key: "retention.delete_when",
                        reason: format!("{item:?}{within} is not an hour 0..=23 (hours are \";\"-separated, e.g. \"04;16\")"),
                    }
                })?;
            hours.push(hour);
        }
        hours.sort_unstable();
        hours.dedup();
        Ok(DeleteWhen { hours })
    }

    /// The hours, sorted, each in 0..=23, at least one.
    pub fn hours(&self) -> &[u8] {
        &self.hours
    }

    /// Whether `hour` (of [`Clock::local_hour`]) is one of them.
    pub fn contains(&self, hour: u32) -> bool {
        self.hours.iter().any(|&h| u32::from(h) == hour)
    }
}

impl std::fmt::Display for DeleteWhen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text: Vec<String> = self.hours.iter().map(|h| format!("{h:02}")).collect();
        f.write_str(&text.join(";"))
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for DeleteWhen {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for DeleteWhen {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        // A visitor rather than an untagged enum: errors raised while the
        // YAML deserializer is on this scalar carry its path
        // (`retention.delete_when`), and an unquoted `delete_when: 4` (a YAML
        // integer) is accepted too.
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = DeleteWhen;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("hours of the day as a string, e.g. \"04;16\"")
            }
            fn visit_str<E: serde::de::Error>(
                self,
                text: &str,
            ) -> std::result::Result<DeleteWhen, E> {
                DeleteWhen::parse(text).map_err(|e| match e {
                    StoreError::InvalidConfig { reason, .. } => E::custom(reason),
                    other => E::custom(other),
                })
            }
            fn visit_u64<E: serde::de::Error>(
                self,
                hour: u64,
            ) -> std::result::Result<DeleteWhen, E> {
                self.visit_str(&hour.to_string())
            }
            fn visit_i64<E: serde::de::Error>(
                self,
                hour: i64,
            ) -> std::result::Result<DeleteWhen, E> {
                self.visit_str(&hour.to_string())
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// Why a pass runs (or may run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// The periodic check: deletes only if an hour or disk trigger holds.
    Scheduled,
    /// An operator's request: deletes expired segments now.
    Manual,
    /// An operator's forced request: every deletable segment, any age.
    ManualForce,
}

/// What one pass did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PassOutcome {
    pub deleted_segments: usize,
    pub freed_bytes: u64,
    pub queue_files_deleted: usize,
    pub index_files_deleted: usize,
    pub disk_used_ratio: f64,
    /// Why the pass deleted (or `None` when no trigger held).
    pub reason: Option<&'static str>,
}

/// How a pass chooses segments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Oldest first, expired only, stop at the first unexpired.
    Expired,
    /// Oldest first regardless of age.
    Pressure,
    /// Every deletable segment.
    All,
}

/// Decide whether and how a pass deletes, from the trigger, the hour and the
/// disk usage.
pub(crate) fn plan(
    cfg: &RetentionConfig,
    trigger: Trigger,
    used_ratio: f64,
) -> Option<(Mode, &'static str)> {
    if trigger == Trigger::ManualForce {
        return Some((Mode::All, "forced by an operator"));
    }
    if used_ratio > cfg.disk_force_clean_ratio {
        return Some((Mode::Pressure, "disk above disk_force_clean_ratio"));
    }
    if trigger == Trigger::Manual {
        return Some((Mode::Expired, "requested by an operator"));
    }
    if used_ratio > cfg.disk_max_used_ratio {
        return Some((Mode::Expired, "disk above disk_max_used_ratio"));
    }
    if cfg.delete_when.contains(cfg.clock.local_hour()) {
        return Some((Mode::Expired, "delete_when hour"));
    }
    None
}

/// The most segments a pass of `trigger` deletes: scheduled passes are
/// capped, an operator's are not (`None`).
pub(crate) fn segments_per_pass(cfg: &RetentionConfig, trigger: Trigger) -> Option<usize> {
    match trigger {
        Trigger::Scheduled => Some(cfg.max_segments_per_pass),
        Trigger::Manual | Trigger::ManualForce => None,
    }
}

impl RetentionConfig {
    /// The disk-full check's period: `disk_check_interval_ms`, or
    /// `check_interval_ms` if that is shorter, so a short retention interval
    /// shortens it too and a long one never delays it past
    /// `disk_check_interval_ms` ([`DISK_CHECK_INTERVAL_MS_DEFAULT`] unless a
    /// test sets it).
    pub fn disk_check_every_ms(&self) -> u64 {
        self.disk_check_interval_ms.min(self.check_interval_ms)
    }

    /// Range and order checks of the `retention:` section (part of
    /// `StoreConfig::validate`).
    pub fn validate(&self) -> Result<()> {
        if self.check_interval_ms == 0 {
            return Err(StoreError::InvalidConfig {
                key: "retention.check_interval_ms",
                reason: "0 is too small, the minimum is 1".into(),
            });
        }
        let ratios = [
            ("retention.disk_max_used_ratio", self.disk_max_used_ratio),
            (
                "retention.disk_force_clean_ratio",
                self.disk_force_clean_ratio,
            ),
            ("retention.disk_full_ratio", self.disk_full_ratio),
        ];
        for (key, ratio) in ratios {
            // Written so that NaN fails too.
            if !(ratio > 0.0 && ratio <= 1.0) {
                return Err(StoreError::InvalidConfig {
                    key,
                    reason: format!("{ratio} is not a ratio in (0, 1]"),
                });
            }
        }
        for pair in ratios.windows(2) {
            let [(low_key, low), (high_key, high)] = [pair[0], pair[1]];
            if low > high {
                return Err(StoreError::InvalidConfig {
                    key: high_key,
                    reason: format!("{high} is below {low_key} {low}; the order must be disk_max_used_ratio <= disk_force_clean_ratio <= disk_full_ratio"),
                });
            }
        }
        Ok(())
    }
}

impl StoreError {
    /// The refusal of an append while the disk is full at `used_ratio`
    /// (the API's pre-check words it the same way). Here rather than in
    /// `error.rs`: its words are the retention settings'.
    pub fn disk_full(used_ratio: f64, retention: &RetentionConfig) -> Self {
        StoreError::DiskFull {
            reason: format!(
                "the data directory's disk is {:.1}% used; writes stopped above disk_full_ratio {:.1}% and resume when usage falls to disk_force_clean_ratio {:.1}% or below (delete old segments or free space)",
                used_ratio * 100.0,
                retention.disk_full_ratio * 100.0,
                retention.disk_force_clean_ratio * 100.0
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(hour: u32) -> RetentionConfig {
        RetentionConfig {
            clock: Arc::new(ManualClock::new(0, hour)),
            ..RetentionConfig::default()
        }
    }

    #[test]
    fn plan_follows_the_tiers() {
        let c = cfg(12);
        assert_eq!(plan(&c, Trigger::Scheduled, 0.5), None);
        assert_eq!(
            plan(&c, Trigger::Scheduled, 0.80).map(|p| p.0),
            Some(Mode::Expired)
        );
        assert_eq!(
            plan(&c, Trigger::Scheduled, 0.86).map(|p| p.0),
            Some(Mode::Pressure)
        );
        assert_eq!(segments_per_pass(&c, Trigger::Scheduled), Some(10));
        assert_eq!(segments_per_pass(&c, Trigger::Manual), None);
        assert_eq!(segments_per_pass(&c, Trigger::ManualForce), None);
        assert_eq!(
            plan(&c, Trigger::Manual, 0.1).map(|p| p.0),
            Some(Mode::Expired)
        );
        assert_eq!(
            plan(&c, Trigger::ManualForce, 0.1).map(|p| p.0),
            Some(Mode::All)
        );
        let at_four = cfg(4);
        assert_eq!(
            plan(&at_four, Trigger::Scheduled, 0.1).map(|p| p.0),
            Some(Mode::Expired)
        );
    }

    #[test]
    fn statvfs_reads_a_real_ratio() {
        let r = StatvfsDiskUsage.used_ratio(Path::new("/")).unwrap();
        assert!((0.0..=1.0).contains(&r), "{r}");
        assert!(StatvfsDiskUsage
            .used_ratio(Path::new("/no/such/dir"))
            .is_err());
    }

    #[test]
    fn delete_when_parses_sorts_and_refuses_non_hours() {
        let d = DeleteWhen::parse("16; 04;4").unwrap();
        assert_eq!(d.hours(), [4, 16]);
        assert_eq!(d.to_string(), "04;16");
        assert!(d.contains(4) && d.contains(16) && !d.contains(5));
        for bad in ["24", "04,16", "04;", "", "-1"] {
            match DeleteWhen::parse(bad) {
                Err(StoreError::InvalidConfig { key, reason }) => {
                    assert_eq!(key, "retention.delete_when");
                    assert!(reason.contains("not an hour 0..=23"), "{reason}");
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn system_clock_hour_is_an_hour() {
        assert!(SystemClock.local_hour() < 24);
    }
}
