//! The topic registry: which topics exist, their partition counts and config
//! overrides. The store knows nothing of topics beyond the names on its
//! records; this is the only authority on them.
//!
//! Persisted as one JSON file, `<data_dir>/config/topics.json`, replaced
//! atomically (temp → fsync → rename → fsync dir) on every change, so a
//! crash leaves the old or the new registry, never a mix. A change is made
//! durable first and published in memory second: nothing a client was told
//! succeeded can be missing after a restart.
//!
//! Invariants:
//! * every name passes [`names::validate_topic_name`] and every override
//!   passes [`TopicConfig::from_overrides`], whether it came from a client,
//!   the YAML file or the registry file on disk;
//! * a topic's `base_offsets` has one entry per partition.
//!
//! Why `base_offsets`: a deleted topic's records stay in the CommitLog until
//! retention removes them, and the store continues a partition's offsets
//! across a deletion (`Store::delete_topic` keeps each partition's next
//! offset). So a topic records, per partition, the end offset the store had
//! when the topic was created; everything below is a previous
//! incarnation's and is never served (fetch, offsets, query by key and read
//! by physical offset all respect it). Offsets therefore keep rising across
//! incarnations, which Kafka clients handle like any gap.
//!
//! Why `id`: Kafka names a topic incarnation by a random 16-byte id
//! (KIP-516), and its newer APIs speak ids, not names (the KIP-848 group
//! protocol assigns partitions by topic id; Metadata v10+ answers and
//! looks up ids). A name cannot tell a recreated topic from the one before
//! it, so the id is made once, at create, and kept in the file; file
//! version 1 had none, and a version-1 registry gets ids at load, written
//! back at once so they never change across restarts.
//!
//! Cluster-wide defaults: a topic's effective config is its own values
//! over [`Defaults`] (Kafka's dynamic `log.*` broker configs,
//! `crate::dynamic_configs`), which the registry holds but does not
//! persist. [`TopicRegistry::set_defaults`] re-resolves every topic under
//! the write lock, so a change of defaults and an alter of a topic never
//! interleave, and refuses a change that would make some topic's config
//! invalid or change the cleanup policy of a topic with records (the rule
//! of an alter). `__consumer_offsets` keeps its own fixed config.
//!
//! Locks: `write` (a mutex) serialises mutations and file writes, and is
//! taken before `topics` (an RwLock held only to clone or swap an `Arc`).
//! Mutations block on fsync: call them from `spawn_blocking`.

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::{BrokerError, PolicyChangeLoss};
use crate::names;
use crate::partitioner::RoundRobin;
use crate::settings::DeclaredTopic;
use crate::topic_config::{self, Defaults, Overrides, TopicConfig};

/// Makes a change of defaults durable, given the topics whose config it
/// changes ([`TopicRegistry::set_defaults`]).
pub type PersistDefaults<'a> = dyn FnMut(&[Arc<Topic>]) -> Result<(), BrokerError> + 'a;

/// Upper bound on partitions per topic: each is a directory and a set of
/// open files, so a typo like `4000000` must not be taken literally.
pub const PARTITIONS_MAX: u32 = 10_000;

/// The internal topic that stores consumer group offsets.
pub const CONSUMER_OFFSETS_TOPIC: &str = "__consumer_offsets";

/// The internal topic of the transaction coordinator's log
/// (`crate::transactions::log`): compact, one partition, made on the
/// first transactional producer.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// Partitions of [`CONSUMER_OFFSETS_TOPIC`]. One: every commit is one small
/// append to the shared CommitLog whatever the partition, so more partitions
/// would buy nothing, and one partition gives every commit a single total
/// order that the in-memory state and the rebuild at start agree on.
pub const CONSUMER_OFFSETS_PARTITIONS: u32 = 1;

/// The registry file under `<data_dir>/config/`.
pub const REGISTRY_FILE: &str = "topics.json";

/// Version of the registry file's layout.
/// 2 added each topic's `id`; version 1 files are read and rewritten.
const REGISTRY_VERSION: u32 = 2;

/// Largest registry file read at start, checked before reading: 10,000
/// topics with every config overridden fit easily.
const REGISTRY_FILE_MAX_BYTES: u64 = 64 << 20;

/// Config changes (`None` removes an override) computed from a topic as
/// it is ([`TopicRegistry::alter_with`]).
pub type ChangesOf<'a> =
    dyn Fn(&Topic) -> Result<Vec<(String, Option<String>)>, BrokerError> + Send + Sync + 'a;

/// A topic as the handlers see it: an immutable snapshot. A config change
/// publishes a new `Arc<Topic>`; requests already holding the old one finish
/// with it.
#[derive(Debug)]
pub struct Topic {
    pub name: Arc<str>,
    /// This incarnation's id (KIP-516): never zero, never reused.
    pub id: Uuid,
    pub partitions: NonZeroU32,
    pub overrides: Overrides,
    pub config: TopicConfig,
    /// Per partition: offsets below this belong to an earlier topic of the
    /// same name and are never served.
    pub base_offsets: Vec<u64>,
    /// Shared by every snapshot of the topic, so round-robin continues
    /// across config changes.
    pub round_robin: Arc<RoundRobin>,
    /// The topic's own flush bounds' state (`flush.messages`,
    /// `flush.ms`), shared by every snapshot likewise.
    pub flush: Arc<TopicFlush>,
}

/// What a topic's own flush bounds need between produces: the records
/// appended since its last flush request, and whether a `flush.ms`
/// timer is pending.
#[derive(Debug, Default)]
pub struct TopicFlush {
    pub unflushed_records: std::sync::atomic::AtomicU64,
    pub timer_pending: std::sync::atomic::AtomicBool,
}

impl Topic {
    pub fn is_internal(&self) -> bool {
        is_internal(&self.name)
    }

    /// 40402 unless `partition` exists.
    pub fn check_partition(&self, partition: u32) -> Result<(), BrokerError> {
        if partition < self.partitions.get() {
            Ok(())
        } else {
            Err(BrokerError::unknown_partition(
                &self.name,
                partition,
                self.partitions.get(),
            ))
        }
    }

    pub fn base_offset(&self, partition: u32) -> u64 {
        self.base_offsets
            .get(partition as usize)
            .copied()
            .unwrap_or(0)
    }
}

/// Whether `name` is one of tidelog's own topics.
pub fn is_internal(name: &str) -> bool {
    name == CONSUMER_OFFSETS_TOPIC || name == TRANSACTION_STATE_TOPIC
}

/// One topic in the registry file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TopicEntry {
    /// Absent in version 1 files only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<Uuid>,
    partitions: u32,
    #[serde(default)]
    configs: Overrides,
    #[serde(default)]
    base_offsets: Vec<u64>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RegistryFile {
    version: u32,
    topics: BTreeMap<String, TopicEntry>,
}

pub struct TopicRegistry {
    path: PathBuf,
    /// Serialises mutations; taken before `topics`.
    write: Mutex<()>,
    topics: RwLock<BTreeMap<String, Arc<Topic>>>,
    /// Changed only under `write`.
    defaults: RwLock<Arc<Defaults>>,
    /// Hands the file's next bytes to the cluster's metadata log before
    /// they are written (`crate::cluster_metadata`).
    publish: crate::cluster_metadata::hook::Hook,
}

impl std::fmt::Debug for TopicRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopicRegistry")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl TopicRegistry {
    /// Loads `<config_dir>/topics.json`, or starts empty if there is none.
    /// Creates `config_dir`. Blocking.
    pub fn load(config_dir: &Path) -> Result<TopicRegistry, BrokerError> {
        Self::load_with(config_dir, Defaults::new())
    }

    /// [`TopicRegistry::load`], every topic resolved over `defaults`.
    pub fn load_with(config_dir: &Path, defaults: Defaults) -> Result<TopicRegistry, BrokerError> {
        let path = config_dir.join(REGISTRY_FILE);
        let file_err = |reason: String| BrokerError::RegistryFile {
            path: path.clone(),
            reason,
        };
        tidelog_storage::fs_util::create_dir_durable(config_dir)
            .map_err(|e| file_err(e.to_string()))?;
        let mut topics = BTreeMap::new();
        let mut upgrade = None;
        let bytes = tidelog_storage::fs_util::read_small(&path, REGISTRY_FILE_MAX_BYTES)
            .map_err(|e| file_err(e.to_string()))?;
        if let Some(bytes) = bytes {
            let file: RegistryFile = serde_json::from_slice(&bytes)
                .map_err(|e| file_err(format!("not a topic registry: {e}")))?;
            if !(1..=REGISTRY_VERSION).contains(&file.version) {
                return Err(file_err(format!(
                    "version {} is not one of the supported 1 to {REGISTRY_VERSION}",
                    file.version
                )));
            }
            if file.version < REGISTRY_VERSION {
                upgrade = Some(file.version);
            }
            for (name, mut entry) in file.topics {
                if entry.id.is_none() {
                    if file.version >= 2 {
                        return Err(file_err(format!("topic {name:?} has no id")));
                    }
                    entry.id = Some(fresh_id(&|id| {
                        topics.values().any(|t: &Arc<Topic>| t.id == id)
                    }));
                }
                let topic = build(&name, &entry, None, &defaults).map_err(|e| {
                    BrokerError::RegistryTopic {
                        path: path.clone(),
                        topic: name.clone(),
                        reason: e.to_string(),
                    }
                })?;
                topics.insert(name, Arc::new(topic));
            }
        }
        let registry = TopicRegistry {
            path,
            write: Mutex::new(()),
            topics: RwLock::new(topics),
            defaults: RwLock::new(Arc::new(defaults)),
            publish: crate::cluster_metadata::hook::Hook::default(),
        };
        if let Some(version) = upgrade {
            // The ids just made must be the ids of every later start.
            let _w = registry.lock_write();
            registry.commit(|_| {})?;
            tracing::info!(
                from = version,
                to = REGISTRY_VERSION,
                topics = registry.len(),
                "topic registry upgraded: every topic has an id now"
            );
        }
        Ok(registry)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// From now on every change hands the file's whole next bytes to
    /// `publish` before writing them, and is refused if it fails
    /// (`crate::cluster_metadata`). Set once.
    pub(crate) fn set_publisher(&self, publish: Arc<crate::cluster_metadata::hook::Publish>) {
        self.publish.set(publish);
    }

    /// Replaces the registry with a registry file's `bytes` from the
    /// cluster's master (`crate::cluster_metadata`): checked as
    /// [`TopicRegistry::load`] checks the file (the current version
    /// only: a master writes no other), every topic resolved over the
    /// defaults in force, written as a change writes the file (not
    /// published) and published in memory. Returns the topics as they
    /// are now. Blocking.
    pub(crate) fn install(&self, bytes: &[u8]) -> Result<Vec<Arc<Topic>>, BrokerError> {
        let file_err = |reason: String| BrokerError::RegistryFile {
            path: self.path.clone(),
            reason,
        };
        if bytes.len() as u64 > REGISTRY_FILE_MAX_BYTES {
            return Err(file_err(format!(
                "{} bytes, more than the {REGISTRY_FILE_MAX_BYTES} read",
                bytes.len()
            )));
        }
        let file: RegistryFile = serde_json::from_slice(bytes)
            .map_err(|e| file_err(format!("not a topic registry: {e}")))?;
        if file.version != REGISTRY_VERSION {
            return Err(file_err(format!(
                "version {} is not the master's {REGISTRY_VERSION}",
                file.version
            )));
        }
        let _w = self.lock_write();
        let defaults = self.defaults();
        let current = self.read().clone();
        let mut next = BTreeMap::new();
        for (name, entry) in file.topics {
            let topic =
                build(&name, &entry, current.get(&name).map(|t| &**t), &defaults).map_err(|e| {
                    BrokerError::RegistryTopic {
                        path: self.path.clone(),
                        topic: name.clone(),
                        reason: e.to_string(),
                    }
                })?;
            next.insert(name, Arc::new(topic));
        }
        tidelog_storage::fs_util::write_atomic(&self.path, bytes)
            .map_err(|source| BrokerError::RegistryWrite { source })?;
        let topics = next.values().cloned().collect();
        *self.topics.write().unwrap_or_else(|e| e.into_inner()) = next;
        Ok(topics)
    }

    /// Re-resolves every topic over `next` (the master's dynamic configs,
    /// installed on a replica): what [`TopicRegistry::set_defaults`]
    /// does, without its refusals (the master made them) and without a
    /// file to write (the registry does not keep defaults). Returns the
    /// topics whose config changed. Blocking.
    pub(crate) fn install_defaults(&self, next: Defaults) -> Result<Vec<Arc<Topic>>, BrokerError> {
        let _w = self.lock_write();
        let current = self.read().clone();
        let mut rebuilt = BTreeMap::new();
        let mut changed = Vec::new();
        for (name, topic) in &current {
            let entry = TopicEntry {
                id: Some(topic.id),
                partitions: topic.partitions.get(),
                configs: topic.overrides.clone(),
                base_offsets: topic.base_offsets.clone(),
            };
            let next_topic = Arc::new(build(name, &entry, Some(topic), &next)?);
            if next_topic.config != topic.config {
                changed.push(Arc::clone(&next_topic));
            }
            rebuilt.insert(name.clone(), next_topic);
        }
        *self.defaults.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(next);
        *self.topics.write().unwrap_or_else(|e| e.into_inner()) = rebuilt;
        Ok(changed)
    }

    /// The cluster-wide topic defaults in force.
    pub fn defaults(&self) -> Arc<Defaults> {
        Arc::clone(&self.defaults.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// The effective config a topic named `name` with `overrides` of its
    /// own would have now.
    pub fn resolve(&self, name: &str, overrides: &Overrides) -> Result<TopicConfig, BrokerError> {
        resolve(name, overrides, &self.defaults())
    }

    /// Replaces the cluster-wide defaults: every topic is resolved over
    /// `next`, all or nothing. Refused, naming the topic, if one would get
    /// an invalid config or a cleanup-policy change its records forbid
    /// ([`check_policy_change`]; `end_offset(topic, p)` as for an alter).
    /// `persist` makes `next` durable; it runs once every check passed,
    /// with the topics whose config changes (as they will be), before
    /// anything changes in memory; with `validate_only` it does not run
    /// and nothing changes. `refused(topic, why)` is the error a
    /// topic's refusal is answered with. Returns the topics whose effective
    /// config changed, as they are now. Blocking.
    pub fn set_defaults(
        &self,
        next: Defaults,
        validate_only: bool,
        persist: &mut PersistDefaults<'_>,
        end_offset: &dyn Fn(&str, u32) -> u64,
        refused: &dyn Fn(&str, BrokerError) -> BrokerError,
    ) -> Result<Vec<Arc<Topic>>, BrokerError> {
        let _w = self.lock_write();
        let current = self.read().clone();
        let mut rebuilt = BTreeMap::new();
        let mut changed = Vec::new();
        for (name, topic) in &current {
            let entry = TopicEntry {
                id: Some(topic.id),
                partitions: topic.partitions.get(),
                configs: topic.overrides.clone(),
                base_offsets: topic.base_offsets.clone(),
            };
            let in_topic = |e: BrokerError| refused(name, e);
            let next_topic = build(name, &entry, Some(topic), &next).map_err(in_topic)?;
            if next_topic.config != topic.config {
                check_policy_change(topic, &next_topic.config, &|p| end_offset(name, p))
                    .map_err(in_topic)?;
                let next_topic = Arc::new(next_topic);
                changed.push(Arc::clone(&next_topic));
                rebuilt.insert(name.clone(), next_topic);
            } else {
                rebuilt.insert(name.clone(), Arc::clone(topic));
            }
        }
        if validate_only {
            return Ok(Vec::new());
        }
        persist(&changed)?;
        *self.defaults.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(next);
        *self.topics.write().unwrap_or_else(|e| e.into_inner()) = rebuilt;
        Ok(changed)
    }

    /// The topic named `name`, if it exists.
    pub fn get(&self, name: &str) -> Option<Arc<Topic>> {
        self.read().get(name).cloned()
    }

    /// The topic, or 40401.
    pub fn require(&self, name: &str) -> Result<Arc<Topic>, BrokerError> {
        self.get(name)
            .ok_or_else(|| BrokerError::unknown_topic(name))
    }

    /// The topic whose id is `id`, if it exists. A scan of every topic:
    /// ids come from admin and metadata calls, not the data path.
    pub fn by_id(&self, id: Uuid) -> Option<Arc<Topic>> {
        self.read().values().find(|t| t.id == id).cloned()
    }

    /// Every topic, sorted by name.
    pub fn all(&self) -> Vec<Arc<Topic>> {
        self.read().values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// Creates a topic. `end_offset(p)` is the store's end offset of
    /// partition `p` now (see the module doc on base offsets). Blocking.
    pub fn create(
        &self,
        name: &str,
        partitions: u32,
        overrides: Overrides,
        end_offset: &dyn Fn(u32) -> u64,
    ) -> Result<Arc<Topic>, BrokerError> {
        names::validate_topic_name(name)?;
        check_partitions(partitions)?;
        let _w = self.lock_write();
        if self.read().contains_key(name) {
            return Err(BrokerError::topic_exists(name));
        }
        let entry = TopicEntry {
            id: Some(fresh_id(&|id| self.by_id(id).is_some())),
            partitions,
            configs: overrides,
            base_offsets: (0..partitions).map(end_offset).collect(),
        };
        let topic = Arc::new(build(name, &entry, None, &self.defaults())?);
        self.commit(|topics| {
            topics.insert(name.to_string(), Arc::clone(&topic));
        })?;
        Ok(topic)
    }

    /// Removes a topic; its records become unreachable. Blocking.
    pub fn delete(&self, name: &str) -> Result<(), BrokerError> {
        let _w = self.lock_write();
        let topic = self.require(name)?;
        if topic.is_internal() {
            return Err(BrokerError::InternalTopicNotDeletable {
                topic: name.to_string(),
            });
        }
        self.commit(|topics| {
            topics.remove(name);
        })
    }

    /// Applies config changes all or nothing (`None` removes an override)
    /// and returns the topic as it is now. `end_offset(p)` is the store's
    /// end offset of partition `p`: a change of `cleanup.policy` between
    /// `delete` and a compacting policy is refused once the topic has
    /// records ([`check_policy_change`]). Blocking.
    pub fn alter(
        &self,
        name: &str,
        changes: &[(String, Option<String>)],
        end_offset: &dyn Fn(u32) -> u64,
    ) -> Result<Arc<Topic>, BrokerError> {
        self.alter_with(name, &|_| Ok(changes.to_vec()), end_offset)
    }

    /// [`TopicRegistry::alter`] with the changes computed by `changes_of` from
    /// the topic as it is under the registry's write lock: a
    /// read-modify-write (a list config's APPEND or SUBTRACT, AlterConfigs'
    /// replacement of the overrides it does not name) that no concurrent
    /// alter of the topic can slip between, so neither is lost. Blocking.
    pub fn alter_with(
        &self,
        name: &str,
        changes_of: &ChangesOf<'_>,
        end_offset: &dyn Fn(u32) -> u64,
    ) -> Result<Arc<Topic>, BrokerError> {
        let _w = self.lock_write();
        let topic = self.require(name)?;
        if topic.is_internal() {
            return Err(BrokerError::InternalTopicConfigsFixed {
                topic: name.to_string(),
            });
        }
        let changes = changes_of(&topic)?;
        let mut overrides = topic.overrides.clone();
        topic_config::apply(
            &mut overrides,
            changes.iter().map(|(n, v)| (n.as_str(), v.as_deref())),
        )?;
        let entry = TopicEntry {
            id: Some(topic.id),
            partitions: topic.partitions.get(),
            configs: overrides,
            base_offsets: topic.base_offsets.clone(),
        };
        let next = Arc::new(build(name, &entry, Some(&topic), &self.defaults())?);
        check_policy_change(&topic, &next.config, end_offset)?;
        self.commit(|topics| {
            topics.insert(name.to_string(), Arc::clone(&next));
        })?;
        Ok(next)
    }

    /// Grows topic `name` to `count` partitions (Kafka's CreatePartitions)
    /// and returns it as it is now. `end_offset(p)` is the base of new
    /// partition `p` (see the module doc on base offsets); it is called
    /// only for the new ones, only once every rule passed. Existing
    /// partitions and their records are untouched; keyed records produced
    /// from now on spread over every partition, as in Kafka. Blocking.
    pub fn add_partitions(
        &self,
        name: &str,
        count: u32,
        end_offset: &dyn Fn(u32) -> u64,
    ) -> Result<Arc<Topic>, BrokerError> {
        let _w = self.lock_write();
        let topic = self.require(name)?;
        check_growth(&topic, count)?;
        let entry = TopicEntry {
            id: Some(topic.id),
            partitions: count,
            configs: topic.overrides.clone(),
            base_offsets: grown_bases(&topic, count, end_offset),
        };
        let next = Arc::new(build(name, &entry, Some(&topic), &self.defaults())?);
        self.commit(|topics| {
            topics.insert(name.to_string(), Arc::clone(&next));
        })?;
        Ok(next)
    }

    /// Creates `__consumer_offsets` (compact) if absent. Blocking.
    pub fn ensure_internal(&self, end_offset: &dyn Fn(u32) -> u64) -> Result<(), BrokerError> {
        if self.get(CONSUMER_OFFSETS_TOPIC).is_some() {
            return Ok(());
        }
        let overrides = Overrides::from([("cleanup.policy".to_string(), "compact".to_string())]);
        self.create(
            CONSUMER_OFFSETS_TOPIC,
            CONSUMER_OFFSETS_PARTITIONS,
            overrides,
            end_offset,
        )
        .map(|_| ())
        .map_err(|e| BrokerError::DeclaredTopic {
            topic: CONSUMER_OFFSETS_TOPIC.into(),
            reason: e.to_string(),
        })
    }

    /// Applies the topics of the config file (OPERATIONS.md): created if absent;
    /// if present, the configs the file names are set (the file wins for
    /// those keys, API changes to other keys stay). A larger partition count
    /// adds partitions (as Kafka's `--alter --partitions`); a smaller one is
    /// refused, because partitions cannot be removed. Blocking.
    pub fn apply_declared(
        &self,
        declared: &[DeclaredTopic],
        end_offset: &dyn Fn(&str, u32) -> u64,
    ) -> Result<(), BrokerError> {
        for d in declared {
            let bad = |reason: String| BrokerError::DeclaredTopic {
                topic: d.name.clone(),
                reason,
            };
            if is_internal(&d.name) {
                return Err(bad("is an internal topic and cannot be declared".into()));
            }
            let Some(existing) = self.get(&d.name) else {
                self.create(&d.name, d.partitions, d.overrides.clone(), &|p| {
                    end_offset(&d.name, p)
                })
                .map_err(|e| bad(e.to_string()))?;
                tracing::info!(topic = %d.name, partitions = d.partitions, "created declared topic");
                continue;
            };
            let current = existing.partitions.get();
            if d.partitions < current {
                return Err(bad(format!(
                    "declares {} partitions but the topic has {current}; partitions cannot be removed",
                    d.partitions
                )));
            }
            let mut overrides = existing.overrides.clone();
            overrides.extend(d.overrides.clone());
            if overrides == existing.overrides && d.partitions == current {
                continue;
            }
            let _w = self.lock_write();
            if d.partitions > current {
                tracing::warn!(
                    topic = %d.name,
                    from = current,
                    to = d.partitions,
                    "adding partitions to a declared topic: keys now map to different partitions"
                );
            }
            let entry = TopicEntry {
                id: Some(existing.id),
                partitions: d.partitions,
                configs: overrides,
                base_offsets: grown_bases(&existing, d.partitions, &|p| end_offset(&d.name, p)),
            };
            let next = Arc::new(
                build(&d.name, &entry, Some(&existing), &self.defaults())
                    .map_err(|e| bad(e.to_string()))?,
            );
            check_policy_change(&existing, &next.config, &|p| end_offset(&d.name, p))
                .map_err(|e| bad(e.to_string()))?;
            self.commit(|topics| {
                topics.insert(d.name.clone(), next);
            })
            .map_err(|e| bad(e.to_string()))?;
            tracing::info!(topic = %d.name, "applied declared configs");
        }
        Ok(())
    }

    /// Writes the registry with `change` applied, then publishes it. The
    /// caller holds `write`.
    fn commit(
        &self,
        change: impl FnOnce(&mut BTreeMap<String, Arc<Topic>>),
    ) -> Result<(), BrokerError> {
        let mut next = self.read().clone();
        change(&mut next);
        let file = RegistryFile {
            version: REGISTRY_VERSION,
            topics: next
                .iter()
                .map(|(name, t)| {
                    (
                        name.clone(),
                        TopicEntry {
                            id: Some(t.id),
                            partitions: t.partitions.get(),
                            configs: t.overrides.clone(),
                            base_offsets: t.base_offsets.clone(),
                        },
                    )
                })
                .collect(),
        };
        let bytes = serde_json::to_vec_pretty(&file)
            .map_err(|source| BrokerError::RegistryEncode { source })?;
        // In a cluster: into the CommitLog first, so a replica gets the
        // change, and before any record of a topic it creates (those
        // wait for the topic to be published in memory, below).
        self.publish.publish(&bytes)?;
        tidelog_storage::fs_util::write_atomic(&self.path, &bytes)
            .map_err(|source| BrokerError::RegistryWrite { source })?;
        *self.topics.write().unwrap_or_else(|e| e.into_inner()) = next;
        Ok(())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<Topic>>> {
        // A panic while holding the lock cannot leave the map half-changed
        // (it is only ever swapped whole), so poisoning is ignored.
        self.topics.read().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_write(&self) -> std::sync::MutexGuard<'_, ()> {
        self.write.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// 40002 if `next` moves `topic` between `delete` and a compacting
/// `cleanup.policy` while any partition holds a record (end offset above
/// its base). Records of a compact topic are served from its compacted
/// logs, which only get records written while the topic compacts: records
/// written under `delete` were never copied (and may already be gone from
/// the CommitLog), and records of a compact topic would be left to CommitLog
/// retention, their compacted copies no longer served. On an empty topic
/// nothing is lost, so the change is allowed. `compact` ↔ `compact,delete`
/// is always allowed (docs/compaction.md).
pub fn check_policy_change(
    topic: &Topic,
    next: &TopicConfig,
    end_offset: &dyn Fn(u32) -> u64,
) -> Result<(), BrokerError> {
    let (from, to) = (topic.config.cleanup_policy, next.cleanup_policy);
    if from.compacts() == to.compacts() {
        return Ok(());
    }
    let holding = (0..topic.partitions.get()).find_map(|p| {
        let (base, end) = (topic.base_offset(p), end_offset(p));
        (end > base).then_some((p, end - base))
    });
    let Some((partition, records)) = holding else {
        return Ok(());
    };
    let loss = if to.compacts() {
        PolicyChangeLoss::NotCopied
    } else {
        PolicyChangeLoss::NotServed
    };
    Err(BrokerError::PolicyChangeWithRecords {
        topic: topic.name.to_string(),
        from: from.as_str(),
        to: to.as_str(),
        partition,
        records,
        loss,
    })
}

/// The rules of growing `topic` to `count` partitions: not an internal
/// topic (`__consumer_offsets` keeps its one partition, see
/// [`CONSUMER_OFFSETS_PARTITIONS`]), a count in `1..=PARTITIONS_MAX`, and
/// more partitions than it has: partitions are never removed, and asking
/// for the count it has is a mistake too (Kafka's INVALID_PARTITIONS).
pub fn check_growth(topic: &Topic, count: u32) -> Result<(), BrokerError> {
    if topic.is_internal() {
        return Err(BrokerError::InternalTopicPartitionsFixed {
            topic: topic.name.to_string(),
        });
    }
    check_partitions(count)?;
    let current = topic.partitions.get();
    if count <= current {
        return Err(BrokerError::PartitionCountNotIncreased {
            topic: topic.name.to_string(),
            current,
            requested: count,
        });
    }
    Ok(())
}

/// `topic`'s base offsets with those of its new partitions up to `count`
/// appended.
fn grown_bases(topic: &Topic, count: u32, end_offset: &dyn Fn(u32) -> u64) -> Vec<u64> {
    let current = topic.partitions.get();
    let mut bases = topic.base_offsets.clone();
    bases.extend((current..count).map(end_offset));
    bases
}

/// 40002 unless `partitions` is in `1..=PARTITIONS_MAX`.
pub fn check_partitions(partitions: u32) -> Result<(), BrokerError> {
    if partitions == 0 || partitions > PARTITIONS_MAX {
        return Err(BrokerError::InvalidPartitionCount {
            requested: i64::from(partitions),
            max: PARTITIONS_MAX,
        });
    }
    Ok(())
}

/// Ids Kafka never gives a topic: zero ("no id" in its messages) and
/// one (its metadata log's).
fn reserved_id(id: Uuid) -> bool {
    id.as_u128() <= 1
}

/// A new random topic id that `taken` does not hold.
fn fresh_id(taken: &dyn Fn(Uuid) -> bool) -> Uuid {
    loop {
        let id = Uuid::new_v4();
        if !reserved_id(id) && !taken(id) {
            return id;
        }
    }
}

/// The effective config of topic `name` with `overrides` of its own over
/// `defaults`; an internal topic's config is its own alone.
fn resolve(
    name: &str,
    overrides: &Overrides,
    defaults: &Defaults,
) -> Result<TopicConfig, BrokerError> {
    if is_internal(name) {
        TopicConfig::from_overrides(overrides)
    } else {
        TopicConfig::resolve(defaults, overrides)
    }
}

/// A topic snapshot from its registry entry, resolved over `defaults`;
/// `previous`, the snapshot it replaces, hands on the state shared across
/// snapshots.
fn build(
    name: &str,
    entry: &TopicEntry,
    previous: Option<&Topic>,
    defaults: &Defaults,
) -> Result<Topic, BrokerError> {
    names::validate_topic_name(name)?;
    check_partitions(entry.partitions)?;
    let partitions =
        NonZeroU32::new(entry.partitions).ok_or(BrokerError::InvalidPartitionCount {
            requested: i64::from(entry.partitions),
            max: PARTITIONS_MAX,
        })?;
    let config = resolve(name, &entry.configs, defaults)?;
    // Canonicalize, so what is stored and shown is the validated form.
    let mut overrides = Overrides::new();
    for (k, v) in &entry.configs {
        overrides.insert(k.clone(), topic_config::validate(k, v)?);
    }
    let mut base_offsets = entry.base_offsets.clone();
    base_offsets.resize(entry.partitions as usize, 0);
    let id = entry
        .id
        .filter(|id| !reserved_id(*id))
        .ok_or_else(|| BrokerError::InvalidConfig {
            key: "id".into(),
            reason: format!("topic {name:?} has no usable id ({:?})", entry.id),
        })?;
    Ok(Topic {
        name: Arc::from(name),
        id,
        partitions,
        overrides,
        config,
        base_offsets,
        round_robin: previous
            .map(|t| Arc::clone(&t.round_robin))
            .unwrap_or_default(),
        flush: previous.map(|t| Arc::clone(&t.flush)).unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn zero(_: u32) -> u64 {
        0
    }

    #[test]
    fn create_alter_delete_survive_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let reg = TopicRegistry::load(dir.path()).unwrap();
        assert!(reg.is_empty());
        reg.create("orders", 3, Overrides::new(), &zero).unwrap();
        reg.create("gone", 1, Overrides::new(), &|_| 7).unwrap();
        assert!(matches!(
            reg.create("orders", 1, Overrides::new(), &zero)
                .unwrap_err(),
            BrokerError::TopicExists { .. }
        ));
        reg.alter(
            "orders",
            &[("retention.ms".into(), Some("1000".into()))],
            &zero,
        )
        .unwrap();
        reg.delete("gone").unwrap();
        assert!(matches!(
            reg.delete("gone").unwrap_err(),
            BrokerError::UnknownTopic { .. }
        ));

        let again = TopicRegistry::load(dir.path()).unwrap();
        let t = again.require("orders").unwrap();
        assert_eq!(t.partitions.get(), 3);
        assert_eq!(
            t.overrides.get("retention.ms").map(String::as_str),
            Some("1000")
        );
        assert_eq!(t.config.retention_ms, 1000);
        assert!(again.get("gone").is_none());
    }

    /// Partitions are added, never removed: the old ones keep their
    /// bases, the new ones get theirs from the store, and the count and
    /// bases survive a reload; a count not above the topic's, one over the
    /// bound, and any change of the internal topic's are refused and change
    /// nothing.
    #[test]
    fn partitions_are_added_with_their_bases_and_survive_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let reg = TopicRegistry::load(dir.path()).unwrap();
        reg.create("orders", 2, Overrides::new(), &|p| u64::from(p) + 10)
            .unwrap();
        reg.ensure_internal(&zero).unwrap();
        let asked = std::sync::Mutex::new(Vec::new());
        let grown = reg
            .add_partitions("orders", 4, &|p| {
                asked.lock().unwrap().push(p);
                100 + u64::from(p)
            })
            .unwrap();
        assert_eq!(
            *asked.lock().unwrap(),
            vec![2, 3],
            "only new partitions get a base"
        );
        assert_eq!(grown.partitions.get(), 4);
        assert_eq!(grown.base_offsets, vec![10, 11, 102, 103]);

        for (count, what) in [
            (4, "has 4 partitions and 4 is not more"),
            (3, "3 is not more"),
        ] {
            let e = reg.add_partitions("orders", count, &zero).unwrap_err();
            assert!(
                matches!(e, BrokerError::PartitionCountNotIncreased { .. }),
                "{e:?}"
            );
            assert!(e.to_string().contains(what), "{e}");
        }
        assert!(matches!(
            reg.add_partitions("orders", PARTITIONS_MAX + 1, &zero)
                .unwrap_err(),
            BrokerError::InvalidPartitionCount { .. }
        ));
        assert!(matches!(
            reg.add_partitions(CONSUMER_OFFSETS_TOPIC, 2, &zero)
                .unwrap_err(),
            BrokerError::InternalTopicPartitionsFixed { .. }
        ));
        assert!(matches!(
            reg.add_partitions("nope", 2, &zero).unwrap_err(),
            BrokerError::UnknownTopic { .. }
        ));

        let again = TopicRegistry::load(dir.path()).unwrap();
        let t = again.require("orders").unwrap();
        assert_eq!(t.partitions.get(), 4);
        assert_eq!(t.base_offsets, vec![10, 11, 102, 103]);
        let internal = again.require(CONSUMER_OFFSETS_TOPIC).unwrap();
        assert_eq!(internal.partitions.get(), CONSUMER_OFFSETS_PARTITIONS);
    }

    #[test]
    fn bad_alters_change_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let reg = TopicRegistry::load(dir.path()).unwrap();
        reg.create("t", 1, Overrides::new(), &zero).unwrap();
        let err = reg
            .alter(
                "t",
                &[
                    ("retention.ms".into(), Some("5".into())),
                    ("nope".into(), Some("1".into())),
                ],
                &zero,
            )
            .unwrap_err();
        assert!(
            matches!(err, BrokerError::InvalidTopicConfig { .. }),
            "{err:?}"
        );
        assert!(reg.require("t").unwrap().overrides.is_empty());
    }

    #[test]
    fn recreated_topic_starts_above_its_predecessor() {
        let dir = tempfile::tempdir().unwrap();
        let reg = TopicRegistry::load(dir.path()).unwrap();
        reg.create("t", 2, Overrides::new(), &zero).unwrap();
        reg.delete("t").unwrap();
        let t = reg
            .create("t", 2, Overrides::new(), &|p| 10 + u64::from(p))
            .unwrap();
        assert_eq!(t.base_offsets, vec![10, 11]);
    }

    #[test]
    fn declared_topics_are_created_then_file_wins_for_named_keys() {
        let dir = tempfile::tempdir().unwrap();
        let reg = TopicRegistry::load(dir.path()).unwrap();
        let declared = vec![DeclaredTopic {
            name: "users".into(),
            partitions: 2,
            overrides: Overrides::from([("cleanup.policy".into(), "compact".into())]),
        }];
        reg.apply_declared(&declared, &|_, _| 0).unwrap();
        // An API change to another key and to the declared key.
        reg.alter(
            "users",
            &[
                ("retention.ms".into(), Some("5".into())),
                ("cleanup.policy".into(), Some("delete".into())),
            ],
            &zero,
        )
        .unwrap();
        let reg = TopicRegistry::load(dir.path()).unwrap();
        reg.apply_declared(&declared, &|_, _| 0).unwrap();
        let t = reg.require("users").unwrap();
        assert_eq!(
            t.overrides.get("cleanup.policy").map(String::as_str),
            Some("compact")
        );
        assert_eq!(
            t.overrides.get("retention.ms").map(String::as_str),
            Some("5")
        );

        let fewer = vec![DeclaredTopic {
            partitions: 1,
            ..declared[0].clone()
        }];
        assert!(reg.apply_declared(&fewer, &|_, _| 0).is_err());
        let internal = vec![DeclaredTopic {
            name: CONSUMER_OFFSETS_TOPIC.into(),
            ..declared[0].clone()
        }];
        assert!(reg.apply_declared(&internal, &|_, _| 0).is_err());
    }

    #[test]
    fn policy_changes_between_delete_and_compact_need_an_empty_topic() {
        let dir = tempfile::tempdir().unwrap();
        let reg = TopicRegistry::load(dir.path()).unwrap();
        reg.create("t", 2, Overrides::new(), &|p| u64::from(p) * 10)
            .unwrap();
        let to = |policy: &str| vec![("cleanup.policy".to_string(), Some(policy.to_string()))];
        // Partition 1 has one record above its base of 10.
        let has_records = |p: u32| if p == 1 { 11 } else { 0 };
        let m = reg
            .alter("t", &to("compact"), &has_records)
            .unwrap_err()
            .to_string();
        assert!(
            m.contains("already has records") && m.contains("create a new topic"),
            "{m}"
        );
        assert!(!reg.require("t").unwrap().config.cleanup_policy.compacts());
        // Empty (end offsets at the bases): allowed, and compact <-> compact,delete always.
        let empty = |p: u32| u64::from(p) * 10;
        reg.alter("t", &to("compact"), &empty).unwrap();
        reg.alter("t", &to("compact,delete"), &has_records).unwrap();
        reg.alter("t", &to("compact"), &has_records).unwrap();
        assert!(matches!(
            reg.alter("t", &to("delete"), &has_records).unwrap_err(),
            BrokerError::PolicyChangeWithRecords { .. }
        ));
        // The config file follows the same rule.
        let declared = vec![DeclaredTopic {
            name: "t".into(),
            partitions: 2,
            overrides: Overrides::from([("cleanup.policy".into(), "delete".into())]),
        }];
        let err = reg
            .apply_declared(&declared, &|_, p| has_records(p))
            .unwrap_err();
        assert!(err.to_string().contains("already has records"), "{err}");
        reg.apply_declared(&declared, &|_, p| empty(p)).unwrap();
    }

    #[test]
    fn internal_topic_is_protected() {
        let dir = tempfile::tempdir().unwrap();
        let reg = TopicRegistry::load(dir.path()).unwrap();
        reg.ensure_internal(&zero).unwrap();
        reg.ensure_internal(&zero).unwrap();
        let t = reg.require(CONSUMER_OFFSETS_TOPIC).unwrap();
        assert!(t.is_internal());
        assert!(t.config.cleanup_policy.compacts());
        assert!(matches!(
            reg.delete(CONSUMER_OFFSETS_TOPIC).unwrap_err(),
            BrokerError::InternalTopicNotDeletable { .. }
        ));
    }

    #[test]
    fn a_corrupt_or_hostile_registry_file_stops_start_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(REGISTRY_FILE);
        for bad in [
            "not json",
            r#"{"version":3,"topics":{}}"#,
            r#"{"version":0,"topics":{}}"#,
            r#"{"version":2,"topics":{"t":{"partitions":1}}}"#,
            r#"{"version":2,"topics":{"t":{"id":"00000000-0000-0000-0000-000000000000","partitions":1}}}"#,
            r#"{"version":2,"topics":{"t":{"id":"not an id","partitions":1}}}"#,
            r#"{"version":1,"topics":{"../x":{"partitions":1}}}"#,
            r#"{"version":1,"topics":{"t":{"partitions":0}}}"#,
            r#"{"version":1,"topics":{"t":{"partitions":1,"configs":{"cleanup.policy":"purge"}}}}"#,
        ] {
            std::fs::write(&path, bad).unwrap();
            let err = TopicRegistry::load(dir.path()).unwrap_err();
            assert!(err.to_string().contains("topics.json"), "{err}");
        }
    }

    #[test]
    fn ids_are_made_once_and_kept_through_every_change() {
        let dir = tempfile::tempdir().unwrap();
        let reg = TopicRegistry::load(dir.path()).unwrap();
        let a = reg.create("a", 1, Overrides::new(), &zero).unwrap();
        let b = reg.create("b", 1, Overrides::new(), &zero).unwrap();
        assert_ne!(a.id, b.id);
        assert!(!reserved_id(a.id) && !reserved_id(b.id));
        let altered = reg
            .alter("a", &[("retention.ms".into(), Some("1000".into()))], &zero)
            .unwrap();
        assert_eq!(altered.id, a.id);
        assert_eq!(reg.add_partitions("a", 3, &zero).unwrap().id, a.id);
        assert_eq!(reg.by_id(a.id).unwrap().name.as_ref(), "a");
        drop(reg);
        let reg = TopicRegistry::load(dir.path()).unwrap();
        assert_eq!(reg.get("a").unwrap().id, a.id);
        assert_eq!(reg.get("b").unwrap().id, b.id);
        // A recreated topic is another incarnation: another id.
        reg.delete("a").unwrap();
        assert!(reg.by_id(a.id).is_none());
        let again = reg.create("a", 1, Overrides::new(), &zero).unwrap();
        assert_ne!(again.id, a.id);
    }

    #[test]
    fn a_version_1_registry_gets_ids_at_load_and_keeps_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(REGISTRY_FILE);
        std::fs::write(
            &path,
            r#"{"version":1,"topics":{"a":{"partitions":2,"base_offsets":[5,7]},"b":{"partitions":1}}}"#,
        )
        .unwrap();
        let reg = TopicRegistry::load(dir.path()).unwrap();
        let (a, b) = (reg.get("a").unwrap(), reg.get("b").unwrap());
        assert_ne!(a.id, b.id);
        assert_eq!(a.base_offsets, vec![5, 7]);
        let written = std::fs::read_to_string(&path).unwrap();
        assert!(written.contains(r#""version": 2"#), "{written}");
        assert!(written.contains(&a.id.to_string()), "{written}");
        drop(reg);
        let reg = TopicRegistry::load(dir.path()).unwrap();
        assert_eq!(reg.get("a").unwrap().id, a.id);
        assert_eq!(reg.get("b").unwrap().id, b.id);
    }
}
