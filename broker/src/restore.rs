//! Restore: a data dir rebuilt from the remote tier, the disaster-recovery
//! path of one node (docs/TIERED.md, "Restore").
//!
//! What a restore writes into an empty data dir, from what the bucket holds
//! ([`RestoredTopic`]: a topic's newest version and, per partition, its
//! manifest's end and its compact snapshot):
//! - the topic registry (`config/topics.json`): every topic with its
//!   partition count and config overrides, base offsets 0: a fresh data
//!   dir holds no earlier incarnation of any topic to hide, so every offset
//!   the bucket holds for it is the topic's own and the read path serves it
//!   from the remote tier (below the local beginning) as for any tiered
//!   partition;
//! - `deleted-partitions`, the store's table of where a partition's offsets
//!   continue: each partition at its manifest's end, so new records get the
//!   offsets after the highest one uploaded and the local log begins there;
//! - compact topics' snapshots (the cleaned, sealed compacted segments) as
//!   their compacted logs, `compacted/<topic>/<partition>/<base>.log`, each
//!   file checked by opening it as the cleaner does (CRC of every record,
//!   offset order) before anything is published;
//! - when a snapshot was restored, a `checkpoint` whose positions lie past
//!   every CommitLog position the snapshots' records name: a compacted copy
//!   whose CommitLog position is at or past the log's recovered end is
//!   dropped at start-up (a copy of a record the log lost), and the
//!   restored log is empty, so it must begin past them. Its first segment
//!   is then created there.
//!
//! Invariants:
//! - A restore only writes into an empty data dir (nothing in it, or only
//!   the `lock` file) or into one whose restore did not finish; anything
//!   else is refused, so it can never overwrite a node's data.
//! - [`RESTORE_MARKER`] is written (durably) before anything else and
//!   removed last, after the registry: a data dir holding it is an
//!   interrupted restore, never served ([`needs_restore`] says so and
//!   [`write_data_dir`] starts it over, clearing what it had written).
//! - The data dir lock is held throughout, so a server cannot open the
//!   data dir while it is restored.
//! - Every name and count from the bucket is checked before it is used
//!   for a path or an allocation: topic names by the registry's rules,
//!   partition counts by its bound, snapshot file names are compacted
//!   segment names (`<20 digits>.log`) and nothing else.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use tidelog_storage::consume_queue::deleted::DeletedPartitions;
use tidelog_storage::fs_util;
use tidelog_storage::store::LOCK_FILE;
use tidelog_storage::DataDirLock;

use tidelog_cleaner::restore::RestoredLog;
use tidelog_tiered::{RemoteTier, RemoteTopic, TieredError};

use crate::error::BrokerError;
use crate::registry::{self, TopicRegistry, CONSUMER_OFFSETS_PARTITIONS, CONSUMER_OFFSETS_TOPIC};
use crate::topic_config::Overrides;

/// The file that marks a restore in progress (module doc).
pub const RESTORE_MARKER: &str = "restore-incomplete";

/// Where the registry lives under the data dir (`Broker::open`'s).
const CONFIG_DIR: &str = "config";

/// One topic as the remote tier holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct RestoredTopic {
    pub name: String,
    pub partitions: u32,
    pub configs: Overrides,
    /// One per partition, in partition order.
    pub partition_states: Vec<RestoredPartition>,
}

/// One partition as the remote tier holds it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RestoredPartition {
    /// The manifest's end: one past the last offset uploaded (0 without a
    /// manifest). New records continue here.
    pub next_offset: u64,
    /// The compact snapshot's files (name, bytes); empty for other topics.
    pub snapshot: Vec<(String, Bytes)>,
}

/// What a restore wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestoreReport {
    pub topics: usize,
    pub partitions: usize,
    /// Compacted segment files written from snapshots, and their bytes.
    pub snapshot_files: usize,
    pub snapshot_bytes: u64,
    /// Offsets the remote tier holds below the partitions' new local
    /// beginnings, summed (what reads below them are served from).
    pub remote_offsets: u64,
    /// Where the CommitLog begins (0 unless a snapshot was restored).
    pub commit_log_start: u64,
}

/// What a data dir holds, as far as a restore is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataDirState {
    /// Missing, or nothing but the lock file: a restore may write it.
    Empty,
    /// A restore began and did not finish: a restore starts it over.
    Interrupted,
    /// Anything else: a node's data, never restored over.
    InUse,
}

/// The state of `data_dir` (module doc).
pub fn data_dir_state(data_dir: &Path) -> Result<DataDirState, BrokerError> {
    let entries = match std::fs::read_dir(data_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(DataDirState::Empty),
        Err(e) => return Err(restore_error(data_dir, format!("cannot list it: {e}"))),
    };
    let mut state = DataDirState::Empty;
    for entry in entries {
        let entry = entry.map_err(|e| restore_error(data_dir, format!("cannot list it: {e}")))?;
        let name = entry.file_name();
        if name == RESTORE_MARKER {
            return Ok(DataDirState::Interrupted);
        }
        if name != LOCK_FILE {
            state = DataDirState::InUse;
        }
    }
    Ok(state)
}

/// Should a server with tiered storage restore `data_dir` before it opens
/// it: is it empty, or is a restore of it unfinished?
pub fn needs_restore(data_dir: &Path) -> Result<bool, BrokerError> {
    Ok(data_dir_state(data_dir)? != DataDirState::InUse)
}

/// Writes `topics` into `data_dir` (module doc), which must be empty or an
/// interrupted restore. Logs its progress at info. Blocking (fsyncs).
pub fn write_data_dir(
    data_dir: &Path,
    topics: &[RestoredTopic],
) -> Result<RestoreReport, BrokerError> {
    check_topics(data_dir, topics)?;
    let _lock =
        DataDirLock::acquire(data_dir).map_err(|e| restore_error(data_dir, e.to_string()))?;
    match data_dir_state(data_dir)? {
        DataDirState::Empty => {}
        DataDirState::Interrupted => {
            tracing::warn!(data_dir = %data_dir.display(), "an earlier restore did not finish; starting it over");
            clear_interrupted(data_dir)?;
        }
        DataDirState::InUse => {
            return Err(restore_error(
                data_dir,
                "the data dir is not empty (a restore only writes into an empty one)".into(),
            ))
        }
    }
    let io =
        |what: &str, e: &dyn std::fmt::Display| restore_error(data_dir, format!("{what}: {e}"));
    let marker = data_dir.join(RESTORE_MARKER);
    std::fs::write(&marker, b"").map_err(|e| io("writing the restore marker", &e))?;
    fs_util::fsync_dir(data_dir).map_err(|e| io("syncing the data dir", &e))?;

    let mut report = RestoreReport {
        topics: topics.len(),
        ..RestoreReport::default()
    };
    // Past every CommitLog position a restored compacted record names.
    let mut commit_log_start = 0u64;
    let mut next_offsets = DeletedPartitions::default();
    for topic in topics {
        for (partition, state) in (0u32..).zip(&topic.partition_states) {
            report.partitions += 1;
            let mut next = state.next_offset;
            if !state.snapshot.is_empty() {
                let written = write_snapshot(data_dir, &topic.name, partition, &state.snapshot)?;
                report.snapshot_files += state.snapshot.len();
                report.snapshot_bytes += written.bytes;
                commit_log_start = commit_log_start.max(written.physical_end);
                next = next.max(written.next_offset);
            }
            report.remote_offsets += next;
            if next > 0 {
                next_offsets.raise(&topic.name, partition, next);
            }
        }
        tracing::info!(topic = %topic.name, partitions = topic.partitions, "restored the topic's partitions");
    }
    tidelog_storage::restore::write_next_offsets(data_dir, &next_offsets)
        .map_err(|e| io("writing the partitions' next offsets", &e))?;
    if commit_log_start > 0 {
        tidelog_storage::restore::write_commit_log_start(data_dir, commit_log_start)
            .map_err(|e| io("writing the checkpoint", &e))?;
    }
    report.commit_log_start = commit_log_start;

    // The registry last: a data dir with topics is one a server serves.
    let registry = TopicRegistry::load(&data_dir.join(CONFIG_DIR))?;
    for topic in topics {
        registry
            .create(&topic.name, topic.partitions, topic.configs.clone(), &|_| 0)
            .map_err(|e| io(&format!("registering topic {:?}", topic.name), &e))?;
    }
    std::fs::remove_file(&marker).map_err(|e| io("removing the restore marker", &e))?;
    fs_util::fsync_dir(data_dir).map_err(|e| io("syncing the data dir", &e))?;
    tracing::info!(
        data_dir = %data_dir.display(),
        topics = report.topics,
        partitions = report.partitions,
        snapshot_files = report.snapshot_files,
        snapshot_bytes = report.snapshot_bytes,
        remote_offsets = report.remote_offsets,
        "restore finished"
    );
    Ok(report)
}

/// Restores `data_dir` from `tier` (module doc): reads every topic the
/// bucket holds, each partition's manifest and, for compact topics, the
/// snapshot, then writes the data dir ([`write_data_dir`], on a blocking
/// thread). Refuses a data dir in use before it reads anything. Progress
/// at info: one line per topic, then the totals.
pub async fn restore(data_dir: &Path, tier: &RemoteTier) -> Result<RestoreReport, BrokerError> {
    if !needs_restore(data_dir)? {
        return Err(restore_error(
            data_dir,
            "the data dir is not empty (a restore only writes into an empty one)".into(),
        ));
    }
    let remote = |what: &str, e: TieredError| {
        restore_error(data_dir, format!("the remote tier: {what}: {e}"))
    };
    let mut listed = tier
        .topics()
        .await
        .map_err(|e| remote("listing topics", e))?;
    tracing::info!(data_dir = %data_dir.display(), topics = listed.len(), "restoring from the remote tier");
    // Committed offsets come back with `__consumer_offsets`' snapshot, also
    // if its topic record never reached the bucket.
    if !listed.iter().any(|t| t.name == CONSUMER_OFFSETS_TOPIC) {
        listed.push(RemoteTopic {
            name: CONSUMER_OFFSETS_TOPIC.into(),
            partitions: CONSUMER_OFFSETS_PARTITIONS,
            configs: BTreeMap::from([("cleanup.policy".into(), "compact".into())]),
            updated_ms: 0,
        });
    }
    let mut topics = Vec::with_capacity(listed.len());
    for t in listed {
        // Bounded before the per-partition vector is allocated.
        registry::check_partitions(t.partitions)
            .map_err(|e| restore_error(data_dir, format!("topic {:?}: {e}", t.name)))?;
        let compact = t
            .configs
            .get("cleanup.policy")
            .is_some_and(|p| p.split(',').any(|p| p.trim() == "compact"));
        let mut states = Vec::with_capacity(t.partitions as usize);
        for p in 0..t.partitions {
            let what = format!("{}-{p}", t.name);
            let manifest = tier
                .manifest(&t.name, p)
                .await
                .map_err(|e| remote(&format!("manifest of {what}"), e))?;
            let snapshot = if compact {
                tier.snapshot_files(&t.name, p)
                    .await
                    .map_err(|e| remote(&format!("snapshot of {what}"), e))?
            } else {
                Vec::new()
            };
            states.push(RestoredPartition {
                next_offset: manifest.map_or(0, |m| m.end),
                snapshot,
            });
        }
        tracing::info!(
            topic = %t.name,
            partitions = t.partitions,
            remote_offsets = states.iter().map(|s| s.next_offset).sum::<u64>(),
            snapshot_files = states.iter().map(|s| s.snapshot.len()).sum::<usize>(),
            "read the topic from the remote tier"
        );
        topics.push(RestoredTopic {
            name: t.name,
            partitions: t.partitions,
            configs: t.configs,
            partition_states: states,
        });
    }
    // The internal topic is there only to carry its snapshot: without one
    // the broker creates it as on any new data dir.
    topics.retain(|t| {
        t.name != CONSUMER_OFFSETS_TOPIC
            || t.partition_states.iter().any(|s| !s.snapshot.is_empty())
    });
    let dir = data_dir.to_path_buf();
    tokio::task::spawn_blocking(move || write_data_dir(&dir, &topics))
        .await
        .map_err(|e| restore_error(data_dir, format!("the restore's writer thread: {e}")))?
}

/// The bucket's topics checked before anything is written: names and
/// partition counts by the registry's rules, one state per partition, no
/// topic twice.
fn check_topics(data_dir: &Path, topics: &[RestoredTopic]) -> Result<(), BrokerError> {
    let mut seen = BTreeMap::new();
    for topic in topics {
        let bad =
            |reason: String| restore_error(data_dir, format!("topic {:?}: {reason}", topic.name));
        crate::names::validate_topic_name(&topic.name).map_err(|e| bad(e.to_string()))?;
        registry::check_partitions(topic.partitions).map_err(|e| bad(e.to_string()))?;
        if topic.partition_states.len() != topic.partitions as usize {
            return Err(bad(format!(
                "{} partition states for {} partitions",
                topic.partition_states.len(),
                topic.partitions
            )));
        }
        if seen.insert(topic.name.as_str(), ()).is_some() {
            return Err(bad("listed twice".into()));
        }
    }
    Ok(())
}

/// Writes a snapshot's files as the partition's compacted log, through
/// the cleaner, which owns their format and checks each by opening it.
fn write_snapshot(
    data_dir: &Path,
    topic: &str,
    partition: u32,
    files: &[(String, Bytes)],
) -> Result<RestoredLog, BrokerError> {
    tidelog_cleaner::restore::write_snapshot(data_dir, topic, partition, files, |reason| {
        restore_error(
            data_dir,
            format!("snapshot of {topic}-{partition}: {reason}"),
        )
    })
}

/// Removes what an interrupted restore wrote: everything but the lock and
/// the marker (a restore writes nothing else into the data dir).
fn clear_interrupted(data_dir: &Path) -> Result<(), BrokerError> {
    let io = |path: &Path, e: std::io::Error| {
        restore_error(data_dir, format!("clearing {}: {e}", path.display()))
    };
    for entry in std::fs::read_dir(data_dir).map_err(|e| io(data_dir, e))? {
        let entry = entry.map_err(|e| io(data_dir, e))?;
        let name = entry.file_name();
        if name == LOCK_FILE || name == RESTORE_MARKER {
            continue;
        }
        let path = entry.path();
        let removed = if entry.file_type().map_err(|e| io(&path, e))?.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        removed.map_err(|e| io(&path, e))?;
    }
    fs_util::fsync_dir(data_dir).map_err(|e| restore_error(data_dir, e.to_string()))
}

fn restore_error(data_dir: &Path, reason: String) -> BrokerError {
    BrokerError::Restore {
        data_dir: PathBuf::from(data_dir),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::groups::{CommitValue, OffsetCommit};
    use crate::test_support::{append, compact, open, wait_until};
    use std::sync::Arc;
    use tidelog_cleaner::compacted::segment::LOG_SUFFIX;
    use tidelog_cleaner::compacted::COMPACTED_DIR;

    /// The compacted segment files of `topic`-0 in `data_dir`, as a
    /// snapshot holds them.
    fn compacted_files(data_dir: &Path, topic: &str) -> Vec<(String, Bytes)> {
        let dir = data_dir.join(COMPACTED_DIR).join(topic).join("0");
        let mut files: Vec<(String, Bytes)> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_name().to_str().unwrap().ends_with(LOG_SUFFIX))
            .map(|e| {
                let bytes = std::fs::read(e.path()).unwrap();
                (e.file_name().into_string().unwrap(), Bytes::from(bytes))
            })
            .collect();
        files.sort();
        files
    }

    fn one_partition(name: &str, configs: Overrides, state: RestoredPartition) -> RestoredTopic {
        RestoredTopic {
            name: name.into(),
            partitions: 1,
            configs,
            partition_states: vec![state],
        }
    }

    /// A node with a compact table `users` (a=1, b=2, a=3), a plain topic
    /// `events` and group `billing`'s commit of events-0 at 42, shut down.
    fn old_node(dir: &Path) {
        let broker = open(dir);
        broker.create_topic("users", 1, compact()).unwrap();
        broker.create_topic("events", 1, Overrides::new()).unwrap();
        append(&broker, "users", &[("a", "1"), ("b", "2"), ("a", "3")]);
        broker
            .commit_offsets(
                "billing",
                vec![OffsetCommit {
                    topic: "events".into(),
                    partition: 0,
                    value: CommitValue {
                        offset: 42,
                        metadata: "m".into(),
                        ..Default::default()
                    },
                }],
                crate::coordinator::CommitOrigin::Stateless,
            )
            .unwrap();
        let users = broker.partition("users", 0).unwrap();
        wait_until("the compacted copies", || users.offsets().1 == 3);
        drop(users);
        Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
    }

    /// What [`old_node`] wrote, read back from a broker on `data_dir`: the
    /// table, the committed offset, and new records after `events_next`.
    fn check_restored(data_dir: &Path, events_next: u64) {
        let broker = open(data_dir);
        let users = broker.partition("users", 0).unwrap();
        let read = users.read(0, 100, 1 << 20).unwrap();
        let table: Vec<(u64, &[u8], &[u8])> = read
            .records
            .iter()
            .map(|r| (r.offset(), r.key().unwrap(), r.value().unwrap()))
            .collect();
        assert_eq!(
            table,
            [(0, &b"a"[..], &b"1"[..]), (1, b"b", b"2"), (2, b"a", b"3")]
        );
        let committed = broker.groups.get("billing", None).unwrap();
        assert_eq!(
            committed
                .iter()
                .map(|c| (c.topic.as_str(), c.partition, c.offset))
                .collect::<Vec<_>>(),
            [("events", 0, 42)]
        );
        // New records continue after what the bucket held.
        append(&broker, "events", &[("k", "v")]);
        append(&broker, "users", &[("c", "4")]);
        let events = broker.partition("events", 0).unwrap();
        wait_until("the new records", || {
            events.offsets().1 == events_next + 1 && users.offsets().1 == 4
        });
        assert_eq!(events.offsets(), (events_next, events_next + 1));
        let newest = users.read(3, 100, 1 << 20).unwrap();
        assert_eq!(
            newest
                .records
                .iter()
                .map(|r| r.offset())
                .collect::<Vec<_>>(),
            [3]
        );
        drop((users, events));
        Arc::try_unwrap(broker).unwrap().shutdown().unwrap();

        // And after a restart the restored records are still there.
        let broker = open(data_dir);
        let users = broker.partition("users", 0).unwrap();
        assert_eq!(users.read(0, 100, 1 << 20).unwrap().records.len(), 4);
        drop(users);
        Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
    }

    /// The old node's snapshots restored into a new data dir bring back
    /// the table and the committed offsets, and every partition continues
    /// after the offsets the bucket held.
    #[test]
    fn a_restored_data_dir_serves_snapshots_and_continues_the_offsets() {
        let old = tempfile::tempdir().unwrap();
        old_node(old.path());
        let restored = tempfile::tempdir().unwrap();
        let data_dir = restored.path().join("data");
        let topics = vec![
            one_partition(
                "users",
                compact(),
                RestoredPartition {
                    next_offset: 3,
                    snapshot: compacted_files(old.path(), "users"),
                },
            ),
            one_partition(
                CONSUMER_OFFSETS_TOPIC,
                compact(),
                RestoredPartition {
                    next_offset: 1,
                    snapshot: compacted_files(old.path(), CONSUMER_OFFSETS_TOPIC),
                },
            ),
            one_partition(
                "events",
                Overrides::from([("retention.ms".to_string(), "3600000".to_string())]),
                RestoredPartition {
                    next_offset: 500,
                    snapshot: Vec::new(),
                },
            ),
        ];
        let report = write_data_dir(&data_dir, &topics).unwrap();
        assert_eq!((report.topics, report.partitions), (3, 3));
        assert_eq!(report.snapshot_files, 2);
        assert!(report.commit_log_start > 0, "{report:?}");
        assert!(!data_dir.join(RESTORE_MARKER).exists());
        assert_eq!(data_dir_state(&data_dir).unwrap(), DataDirState::InUse);

        let events = TopicRegistry::load(&data_dir.join(CONFIG_DIR))
            .unwrap()
            .require("events")
            .unwrap();
        assert_eq!(
            events.overrides.get("retention.ms").map(String::as_str),
            Some("3600000")
        );
        check_restored(&data_dir, 500);
    }

    /// The whole path: a bucket (in memory) holding what the old node's
    /// server would have put there, read by `restore`.
    #[test]
    fn restore_reads_topics_manifests_and_snapshots_from_the_remote_tier() {
        use tidelog_tiered::object_store::memory::InMemory;
        use tidelog_tiered::object_store::path::Path as StorePath;
        use tidelog_tiered::{RemoteRecord, TieredConfig};

        let old = tempfile::tempdir().unwrap();
        old_node(old.path());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let tier = RemoteTier::with_store(
            Arc::new(InMemory::new()),
            StorePath::from("node"),
            &TieredConfig::default(),
        );
        let restored = tempfile::tempdir().unwrap();
        let report = runtime.block_on(async {
            let topic = |name: &str, configs: Overrides| RemoteTopic {
                name: name.into(),
                partitions: 1,
                configs,
                updated_ms: 1,
            };
            tier.put_topic(&topic("events", Overrides::new()))
                .await
                .unwrap();
            tier.put_topic(&topic("users", compact())).await.unwrap();
            let records: Vec<RemoteRecord> = (0..7)
                .map(|offset| RemoteRecord {
                    offset,
                    timestamp_ms: 1,
                    key: None,
                    value: Some(Bytes::from_static(b"v")),
                    headers: Vec::new(),
                })
                .collect();
            tier.upload("events", 0, &records).await.unwrap();
            for t in ["users", CONSUMER_OFFSETS_TOPIC] {
                let files = compacted_files(old.path(), t);
                let next = if t == "users" { 3 } else { 1 };
                tier.put_snapshot(t, 0, files, next).await.unwrap();
            }
            // A data dir in use is refused before anything is read.
            let in_use = restore(old.path(), &tier).await.unwrap_err();
            assert!(in_use.to_string().contains("not empty"), "{in_use}");
            restore(restored.path(), &tier).await.unwrap()
        });
        assert_eq!((report.topics, report.snapshot_files), (3, 2), "{report:?}");
        check_restored(restored.path(), 7);
    }

    #[test]
    fn a_data_dir_in_use_is_refused_and_an_interrupted_restore_starts_over() {
        let dir = tempfile::tempdir().unwrap();
        let broker = open(dir.path());
        Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
        let topics = vec![one_partition(
            "t",
            Overrides::new(),
            RestoredPartition::default(),
        )];
        let refused = write_data_dir(dir.path(), &topics).unwrap_err();
        assert!(refused.to_string().contains("not empty"), "{refused}");
        assert!(dir
            .path()
            .join("config")
            .join(registry::REGISTRY_FILE)
            .exists());

        // A restore that died half way: marker, a snapshot dir, no registry.
        let interrupted = tempfile::tempdir().unwrap();
        std::fs::write(interrupted.path().join(RESTORE_MARKER), b"").unwrap();
        std::fs::create_dir_all(interrupted.path().join(COMPACTED_DIR).join("old")).unwrap();
        assert!(needs_restore(interrupted.path()).unwrap());
        write_data_dir(interrupted.path(), &topics).unwrap();
        assert!(!interrupted.path().join(COMPACTED_DIR).join("old").exists());
        assert!(!needs_restore(interrupted.path()).unwrap());
        let broker = open(interrupted.path());
        assert!(broker.registry.get("t").is_some());
        Arc::try_unwrap(broker).unwrap().shutdown().unwrap();
    }

    #[test]
    fn what_the_bucket_holds_is_checked_before_it_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let bad_name = one_partition(
            "t",
            compact(),
            RestoredPartition {
                next_offset: 1,
                snapshot: vec![("../../escape".into(), Bytes::from_static(b"x"))],
            },
        );
        let refused = write_data_dir(dir.path(), &[bad_name]).unwrap_err();
        assert!(
            refused.to_string().contains("not a compacted segment"),
            "{refused}"
        );
        assert!(!dir.path().parent().unwrap().join("escape").exists());
        // Refused before writing: the data dir is an interrupted restore
        // at worst, never served as it is.
        assert!(needs_restore(dir.path()).unwrap());

        let garbage = one_partition(
            "t",
            compact(),
            RestoredPartition {
                next_offset: 1,
                snapshot: vec![(
                    fs_util::offset_file_name(0) + LOG_SUFFIX,
                    Bytes::from_static(b"not a record"),
                )],
            },
        );
        let fresh = tempfile::tempdir().unwrap();
        assert!(write_data_dir(fresh.path(), &[garbage]).is_err());
        assert!(needs_restore(fresh.path()).unwrap());

        let mut mismatched = one_partition("t", Overrides::new(), RestoredPartition::default());
        mismatched.partitions = 2;
        let refused = write_data_dir(fresh.path(), &[mismatched]).unwrap_err();
        assert!(
            refused.to_string().contains("partition states"),
            "{refused}"
        );
        let bad_topic = one_partition("a/b", Overrides::new(), RestoredPartition::default());
        assert!(write_data_dir(fresh.path(), &[bad_topic]).is_err());
    }
}
