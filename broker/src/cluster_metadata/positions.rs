//! Where in the CommitLog each metadata file's last records are:
//! `<data_dir>/config/cluster_metadata.json`, replaced atomically after
//! every record a file takes (the master's own, when it appends it; a
//! replica's, when it applies it).
//!
//! What it is for: a cut ([`tidelog_storage::cut`]) or a lost log tail
//! drops records a file may have taken. Recovery truncates every sink at
//! a position (the checkpoint's, lowered to the cut by a cut); a file
//! whose last records lie at or past it ([`Positions::truncate`]) is
//! *pending*, with its last record below. Recovery's scan then hands on
//! again whatever of the dropped records the log still holds (a restart:
//! the file takes them again, and is no longer pending); what stays
//! pending after the scan lost its records (a cut), and the broker puts
//! the file back as its last record below had it
//! (`super::sink::MetadataSink::rederive`), read from the log by its
//! position. A file none of whose known records lies below (more than
//! [`POSITIONS_KEPT`] of its records cut), or whose record below the log
//! no longer holds (retention), is *diverged*: named in the file and
//! warned about at every open until its next record arrives
//! (docs/CLUSTER.md, "A cut and the metadata files").

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use super::MetadataFile;
use crate::error::BrokerError;

/// The file's name in the config directory.
pub const POSITIONS_FILE: &str = "cluster_metadata.json";
const VERSION: u32 = 1;
/// Positions kept per metadata file: the last ones. A cut drops only
/// what the in-sync set did not hold (records past the high watermark),
/// a few changes at most.
pub const POSITIONS_KEPT: usize = 32;
/// The file's bound: four files' positions and names fit in a few KiB.
const FILE_MAX_BYTES: u64 = 1 << 20;

#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    version: u32,
    /// By file name: its last records' physical offsets, ascending.
    #[serde(default)]
    files: BTreeMap<String, Vec<u64>>,
    /// Files whose records past a truncation were dropped, with their
    /// last record below it: to take again unless the scan re-applies.
    #[serde(default)]
    pending: BTreeMap<String, u64>,
    /// Files whose content a cut left without a record below it.
    #[serde(default)]
    diverged: BTreeSet<String>,
}

/// The positions and their file.
#[derive(Debug)]
pub struct Positions {
    path: PathBuf,
    state: Mutex<Stored>,
}

impl Positions {
    /// The config directory: where the metadata files live beside it.
    pub fn config_dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }

    /// Loads `<config_dir>/cluster_metadata.json` (none: no record yet),
    /// checked: its version, known file names, ascending positions
    /// within the bound. Blocking.
    pub fn load(config_dir: &Path) -> Result<Positions, BrokerError> {
        let path = config_dir.join(POSITIONS_FILE);
        let file_err = |reason: String| BrokerError::RegistryFile {
            path: path.clone(),
            reason,
        };
        tidelog_storage::fs_util::create_dir_durable(config_dir)
            .map_err(|e| file_err(e.to_string()))?;
        let bytes = tidelog_storage::fs_util::read_small(&path, FILE_MAX_BYTES)
            .map_err(|e| file_err(e.to_string()))?;
        let state = match bytes {
            None => Stored {
                version: VERSION,
                ..Stored::default()
            },
            Some(bytes) => {
                let stored: Stored = serde_json::from_slice(&bytes)
                    .map_err(|e| file_err(format!("not a metadata positions file: {e}")))?;
                check(&stored).map_err(file_err)?;
                stored
            }
        };
        Ok(Positions {
            path,
            state: Mutex::new(state),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Stored> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `file` took the record at `position`: kept (the last
    /// [`POSITIONS_KEPT`]); the file is no longer diverged, nor pending
    /// if this record is its pending one or later. Durable when it
    /// returns. Blocking.
    pub fn record(&self, file: MetadataFile, position: u64) -> Result<(), BrokerError> {
        let mut state = self.lock();
        let mut next = state.clone();
        let list = next.files.entry(file.name().to_owned()).or_default();
        if let Err(at) = list.binary_search(&position) {
            list.insert(at, position);
        }
        let excess = list.len().saturating_sub(POSITIONS_KEPT);
        list.drain(..excess);
        next.diverged.remove(file.name());
        if next
            .pending
            .get(file.name())
            .is_some_and(|&p| position >= p)
        {
            next.pending.remove(file.name());
        }
        if next != *state {
            self.write(&next)?;
            *state = next;
        }
        Ok(())
    }

    /// Recovery truncates at `end`: forget the positions at or past it;
    /// a file that had some is pending with its last record below (or
    /// diverged without one). Durable when it returns. Blocking.
    pub fn truncate(&self, end: u64) -> Result<(), BrokerError> {
        let mut state = self.lock();
        let mut next = state.clone();
        for (name, list) in &mut next.files {
            let kept = list.partition_point(|&p| p < end);
            if kept == list.len() {
                continue;
            }
            list.truncate(kept);
            match list.last() {
                Some(&below) => {
                    next.pending.insert(name.clone(), below);
                }
                None => {
                    next.pending.remove(name);
                    next.diverged.insert(name.clone());
                }
            }
        }
        if next != *state {
            self.write(&next)?;
            *state = next;
        }
        Ok(())
    }

    /// Files whose dropped records the scan did not hand on again, with
    /// the position of the record to take again.
    pub fn pending(&self) -> Vec<(MetadataFile, u64)> {
        let state = self.lock();
        MetadataFile::ALL
            .into_iter()
            .filter_map(|f| state.pending.get(f.name()).map(|&p| (f, p)))
            .collect()
    }

    /// `file`'s pending record cannot be read: it is diverged. Durable.
    pub fn mark_diverged(&self, file: MetadataFile) -> Result<(), BrokerError> {
        let mut state = self.lock();
        let mut next = state.clone();
        next.pending.remove(file.name());
        next.diverged.insert(file.name().to_owned());
        if next != *state {
            self.write(&next)?;
            *state = next;
        }
        Ok(())
    }

    /// Files a cut left without a record below it (module doc).
    pub fn diverged(&self) -> Vec<String> {
        self.lock().diverged.iter().cloned().collect()
    }

    /// The positions kept for `file`, ascending.
    pub fn of(&self, file: MetadataFile) -> Vec<u64> {
        self.lock()
            .files
            .get(file.name())
            .cloned()
            .unwrap_or_default()
    }

    fn write(&self, state: &Stored) -> Result<(), BrokerError> {
        let bytes = serde_json::to_vec_pretty(state)
            .map_err(|source| BrokerError::RegistryEncode { source })?;
        tidelog_storage::fs_util::write_atomic(&self.path, &bytes)
            .map_err(|source| BrokerError::RegistryWrite { source })
    }
}

/// The rules of the file (see [`Positions::load`]).
fn check(stored: &Stored) -> Result<(), String> {
    if stored.version != VERSION {
        return Err(format!(
            "version {} is not the supported {VERSION}",
            stored.version
        ));
    }
    let known = |name: &str| MetadataFile::ALL.iter().any(|f| f.name() == name);
    for (name, list) in &stored.files {
        if !known(name) {
            return Err(format!("{name:?} is no metadata file"));
        }
        if list.len() > POSITIONS_KEPT || list.windows(2).any(|w| w[0] >= w[1]) {
            return Err(format!(
                "{name:?}: positions must ascend, at most {POSITIONS_KEPT}"
            ));
        }
    }
    if let Some(name) = stored
        .diverged
        .iter()
        .chain(stored.pending.keys())
        .find(|n| !known(n))
    {
        return Err(format!("{name:?} is no metadata file"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_truncation_leaves_files_pending_or_diverged_and_survives_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let p = Positions::load(dir.path()).unwrap();
        for at in [100, 300, 500] {
            p.record(MetadataFile::Topics, at).unwrap();
        }
        p.record(MetadataFile::Acls, 200).unwrap();
        p.record(MetadataFile::Users, 450).unwrap();
        // A replay records what it applies again: no duplicate.
        p.record(MetadataFile::Topics, 300).unwrap();
        assert_eq!(p.of(MetadataFile::Topics), vec![100, 300, 500]);

        // Nothing at or past 600: nothing pending.
        p.truncate(600).unwrap();
        assert!(p.pending().is_empty());
        // Topics lose 500 (back to 300), users lose their only record.
        p.truncate(400).unwrap();
        assert_eq!(p.of(MetadataFile::Topics), vec![100, 300]);
        assert_eq!(p.of(MetadataFile::Acls), vec![200]);
        assert_eq!(p.pending(), vec![(MetadataFile::Topics, 300)]);
        assert_eq!(p.diverged(), vec!["users.json".to_string()]);

        let again = Positions::load(dir.path()).unwrap();
        assert_eq!(again.of(MetadataFile::Topics), vec![100, 300]);
        assert_eq!(again.pending(), vec![(MetadataFile::Topics, 300)]);
        assert_eq!(again.diverged(), vec!["users.json".to_string()]);
        // Taking the pending record again ends it; the next record of a
        // diverged file ends its divergence.
        again.record(MetadataFile::Topics, 300).unwrap();
        assert!(again.pending().is_empty());
        again.record(MetadataFile::Users, 700).unwrap();
        assert!(again.diverged().is_empty());
        again.truncate(250).unwrap();
        again.mark_diverged(MetadataFile::Topics).unwrap();
        assert!(again.pending().is_empty());
        assert_eq!(
            again.diverged(),
            vec!["topics.json".to_string(), "users.json".to_string()]
        );
    }

    #[test]
    fn only_the_last_positions_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let p = Positions::load(dir.path()).unwrap();
        for at in 0..(POSITIONS_KEPT as u64 + 10) {
            p.record(MetadataFile::Dynamic, at * 10).unwrap();
        }
        let kept = p.of(MetadataFile::Dynamic);
        assert_eq!(kept.len(), POSITIONS_KEPT);
        assert_eq!(kept.first(), Some(&100));
    }

    #[test]
    fn a_damaged_file_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(POSITIONS_FILE);
        for bad in [
            "nope",
            r#"{"version":2}"#,
            r#"{"version":1,"files":{"passwd":[1]}}"#,
            r#"{"version":1,"files":{"topics.json":[5,5]}}"#,
            r#"{"version":1,"diverged":["x"]}"#,
            r#"{"version":1,"pending":{"x":1}}"#,
        ] {
            std::fs::write(&path, bad).unwrap();
            let e = Positions::load(dir.path()).unwrap_err();
            assert!(e.to_string().contains(POSITIONS_FILE), "{e}");
        }
    }
}
