//! Start-up and shutdown of the broker: the store, the compacted logs of
//! compact topics, the topic registry, consumer group offsets, the group
//! coordinator and the LogCleaner, opened in the order recovery needs
//! ([`Broker::open`]) and kept in line with each other while topics come
//! and go.
//!
//! The coordinator has no thread of its own: `tidelog-groups` calls its
//! `tick` at its next deadline (woken early by any call that may have moved
//! one, never sleeping longer than [`GROUPS_TICK_MAX_MS`]), and is stopped
//! and joined by [`Broker::shutdown`] before the store closes.
//!
//! Blocking throughout: a front-end calls it from a blocking thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use event_listener::Listener;

use tidelog_cleaner::{CleanerConfig, CompactTopicConfig, CompactedLogs, LogCleaner};
use tidelog_storage::{DataDirLock, Store, StoreConfig, StoreError};

use crate::config::BrokerConfig;
use crate::coordinator::{Clock, Coordinator, RandomIds, SystemClock};
use crate::error::BrokerError;
use crate::fault::{self, Faults};
use crate::groups::GroupOffsets;
use crate::registry::{Topic, TopicRegistry, CONSUMER_OFFSETS_TOPIC};
use crate::settings::DeclaredTopic;
use crate::topic_config::{self, Overrides, TopicConfig};

/// Directory under the data dir that holds the topic registry.
pub const CONFIG_DIR: &str = "config";

/// Longest sleep of `tidelog-groups` without a deadline (a bound, in case
/// a deadline moved without a wake-up; ticking early is harmless).
pub const GROUPS_TICK_MAX_MS: u64 = 1000;

/// Everything that exists once recovery is done.
pub struct Broker {
    /// As validated at open: auto-create, default partitions, cluster id,
    /// declared topics.
    pub(crate) config: BrokerConfig,
    /// An `Arc` so the cluster metadata log ([`crate::cluster_metadata`])
    /// can append through a weak reference; the broker alone holds it
    /// strongly, and takes it back at shutdown.
    pub(crate) store: Arc<Store>,
    /// An `Arc` so `tidelog-groups` can answer the coordinator's partition
    /// counts without holding the broker.
    pub(crate) registry: Arc<TopicRegistry>,
    pub(crate) groups: GroupOffsets,
    /// Every consumer group's membership (see [`crate::coordinator`]).
    pub(crate) coordinator: Arc<Coordinator>,
    groups_thread: GroupsThread,
    /// Compacted logs of compact topics (fetch, offsets and key query of
    /// those topics read here).
    pub(crate) logs: Arc<CompactedLogs>,
    /// An `Arc` so a request waiting for a pass holds the cleaner, not the
    /// store: shutdown can take the store back and stop the cleaner, which
    /// ends such waits.
    pub(crate) cleaner: Arc<LogCleaner>,
    /// Tiered storage (`tiering.rs`), when `tiered.url` is set (or a test
    /// gave a remote tier to [`Broker::open_tiered`]).
    pub(crate) tiering: Option<crate::tiering::Tiering>,
    /// Who may do what: the ACLs, the users, `security:`
    /// (`crate::access`).
    pub(crate) access: Arc<crate::access::Access>,
    /// Broker and group configs set at run time
    /// ([`crate::dynamic_configs`]).
    pub(crate) dynamic: Arc<crate::dynamic_configs::DynamicConfigs>,
    /// The master's side of the cluster metadata log
    /// ([`crate::cluster_metadata`]): each change of the files above
    /// appends a record, once the broker is in a cluster.
    pub(crate) metadata: Arc<crate::cluster_metadata::ClusterMetadata>,
    /// The transaction coordinator (`crate::transactions::service`).
    pub(crate) txns: crate::transactions::service::TxnCoordinator,
    /// The cluster's gate, when the node runtime put this broker in one
    /// (`crate::cluster`).
    pub(crate) cluster: std::sync::OnceLock<Arc<dyn crate::cluster::ClusterGate>>,
}

/// The coordinator rebuilt from `__transaction_state`, and the ends a
/// crash left to finish.
type TxnsRebuilt = (
    crate::transactions::service::TxnCoordinator,
    Vec<crate::transactions::Transition>,
);

/// The cluster's replication reads and copies the broker's store.
impl AsRef<tidelog_storage::Store> for Broker {
    fn as_ref(&self) -> &tidelog_storage::Store {
        &self.store
    }
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("data_dir", &self.store.data_dir())
            .field("registry", &self.registry)
            .finish_non_exhaustive()
    }
}

impl Broker {
    /// Start-up, blocking. Order matters:
    /// 1. check the store's and the cleaner's settings (so a refused one
    ///    touches nothing), lock the data dir (the store's one lock,
    ///    `<data_dir>/lock`, taken here because the compacted logs open before the store and finish
    ///    or roll back interrupted segment swaps as they do: a second server
    ///    on the same data dir must stop before touching them), load the
    ///    topic registry and open the compacted logs;
    /// 2. declare every compact topic to them (registry, `__consumer_offsets`,
    ///    compact topics of the config file), so that records recovery
    ///    replays are copied too;
    /// 3. open the store with the compacted logs' dispatcher sink (recovery);
    /// 4. create the internal and declared topics, declare compact topics
    ///    again with their final configs, and drop compacted logs of topics
    ///    that no longer exist or no longer compact;
    /// 5. rebuild consumer offsets from `__consumer_offsets`' compacted log;
    /// 6. start the LogCleaner threads.
    pub fn open(
        config: &BrokerConfig,
        store_config: StoreConfig,
        cleaner_config: CleanerConfig,
    ) -> Result<Broker, BrokerError> {
        let remote = match config.tiered.enabled() {
            true => Some(
                tidelog_tiered::RemoteTier::open(&config.tiered).map_err(|e| {
                    BrokerError::InvalidConfig {
                        key: "tiered".into(),
                        reason: e.to_string(),
                    }
                })?,
            ),
            false => None,
        };
        Self::open_tiered(config, store_config, cleaner_config, remote)
    }

    /// [`Broker::open`] with the remote tier given (`None`: off), whatever
    /// `config.tiered` says of the url: tests and the bench use any
    /// object_store backend (`RemoteTier::with_store`).
    pub fn open_tiered(
        config: &BrokerConfig,
        store_config: StoreConfig,
        cleaner_config: CleanerConfig,
        remote: Option<tidelog_tiered::RemoteTier>,
    ) -> Result<Broker, BrokerError> {
        let mut broker = Self::open_inner(
            config,
            store_config,
            cleaner_config,
            Faults::default(),
            Arc::new(SystemClock),
        )?;
        broker.attach_tiering(remote);
        Ok(broker)
    }

    /// Installs tiered storage: its retention hold in the store (before the
    /// store's first retention pass, which waits a whole
    /// `retention.check_interval_ms` after open) and the topic metas of
    /// every tiered topic, queued for the first round.
    fn attach_tiering(&mut self, remote: Option<tidelog_tiered::RemoteTier>) {
        let Some(remote) = remote else {
            return;
        };
        let tiering = crate::tiering::Tiering::new(remote);
        self.store.set_retention_hold(tiering.hold(&self.registry));
        for topic in self.registry.all() {
            if !topic.is_internal() {
                tiering.topic_changed(&topic);
            }
        }
        self.tiering = Some(tiering);
    }

    /// [`Broker::open`] with fault plans for the store and the cleaner
    /// (tests only: the `failpoints` feature).
    #[cfg(feature = "failpoints")]
    pub fn open_with_faults(
        config: &BrokerConfig,
        store_config: StoreConfig,
        cleaner_config: CleanerConfig,
        faults: Faults,
    ) -> Result<Broker, BrokerError> {
        Self::open_inner(
            config,
            store_config,
            cleaner_config,
            faults,
            Arc::new(SystemClock),
        )
    }

    pub(crate) fn open_inner(
        config: &BrokerConfig,
        store_config: StoreConfig,
        cleaner_config: CleanerConfig,
        faults: Faults,
        clock: Arc<dyn Clock>,
    ) -> Result<Broker, BrokerError> {
        // Its own check first, like the store's and the cleaner's below (it
        // also fills in declared topics' partition counts).
        let mut config = config.clone();
        config.validate()?;
        let declared_topics = &config.declared_topics()[..];
        let data_dir = store_config.data_dir.clone();
        let store_err = |source| BrokerError::StoreOpen {
            data_dir: data_dir.clone(),
            source,
        };
        // The store and the cleaner check their settings again when they
        // open; checked here first, a refused setting leaves the data dir
        // untouched (the compacted logs open, and may reconcile swaps,
        // before the store does).
        store_config.validate().map_err(store_err)?;
        cleaner_config
            .validate()
            .map_err(|source| BrokerError::Compaction { source })?;
        let lock = DataDirLock::acquire(&data_dir).map_err(store_err)?;
        let coordinator = Arc::new(Coordinator::new(
            config.groups.clone(),
            clock,
            Box::new(RandomIds::default()),
        )?);
        refuse_orphaned_topics(&data_dir)?;
        let dynamic = Arc::new(crate::dynamic_configs::DynamicConfigs::load(
            &data_dir.join(CONFIG_DIR),
            &config.groups,
        )?);
        for (group, timeouts) in dynamic.group_timeouts() {
            coordinator.set_group_timeouts(&group, timeouts);
        }
        let registry = Arc::new(TopicRegistry::load_with(
            &data_dir.join(CONFIG_DIR),
            dynamic.topic_defaults(),
        )?);
        let access = Arc::new(crate::access::Access::open(
            &data_dir.join(CONFIG_DIR),
            &config.security,
        )?);
        let logs =
            CompactedLogs::open(&data_dir).map_err(|source| BrokerError::CompactedLogsOpen {
                data_dir: data_dir.clone(),
                source,
            })?;
        let declared_early = declare_before_recovery(&logs, &registry, declared_topics);
        // The metadata sink applies the master's records from recovery
        // on (`crate::cluster_metadata`): it installs into the owners
        // loaded above.
        let positions = Arc::new(crate::cluster_metadata::positions::Positions::load(
            &data_dir.join(CONFIG_DIR),
        )?);
        let writer = uuid::Uuid::new_v4().as_u64_pair().0;
        let metadata_sink = Arc::new(crate::cluster_metadata::sink::MetadataSink::new(
            writer,
            crate::cluster_metadata::sink::Owners {
                registry: Arc::clone(&registry),
                dynamic: Arc::clone(&dynamic),
                access: Arc::clone(&access),
                logs: Arc::clone(&logs),
                groups: config.groups.clone(),
            },
            Arc::clone(&positions),
            data_dir.join(CONFIG_DIR),
        ));
        let store = Arc::new(
            fault::open_store(
                store_config,
                vec![logs.sink(), Arc::clone(&metadata_sink) as _],
                lock,
                &faults,
            )
            .map_err(store_err)?,
        );
        let metadata = Arc::new(crate::cluster_metadata::ClusterMetadata::new(
            writer, positions,
        ));
        let prepared_metadata = prepare_metadata(&store, &metadata_sink, &metadata);
        // A compact topic's compacted log keeps records the CommitLog's
        // retention deleted: its aborted transactions stay known
        // (docs/compaction.md, "Transactions"); every other topic's are
        // forgotten once wholly below its beginning. A topic the registry
        // does not know keeps them.
        let compacts = Arc::clone(&registry);
        store.set_aborted_keep(Arc::new(move |topic| {
            compacts
                .get(topic)
                .is_none_or(|t| t.config.cleanup_policy.compacts())
        }));
        let prepared = prepared_metadata.and_then(|()| {
            Self::prepare(
                declared_topics,
                &store,
                &registry,
                &logs,
                &declared_early,
                cleaner_config,
                &faults,
            )
        });
        let started = prepared.and_then(|(groups, cleaner, txns)| {
            match GroupsThread::start(&coordinator, &registry) {
                Ok(groups_thread) => Ok((groups, cleaner, txns, groups_thread)),
                Err(e) => {
                    cleaner.stop();
                    Err(e)
                }
            }
        });
        match started {
            Ok((groups, cleaner, (txns, ending), groups_thread)) => {
                use crate::cluster_metadata::MetadataFile as F;
                registry.set_publisher(metadata.hook(F::Topics));
                dynamic.set_publisher(metadata.hook(F::Dynamic));
                access.users.set_publisher(metadata.security_hook(F::Users));
                access.acls.set_publisher(metadata.security_hook(F::Acls));
                let broker = Broker {
                    config,
                    store,
                    registry,
                    groups,
                    coordinator,
                    groups_thread,
                    logs,
                    cleaner: Arc::new(cleaner),
                    tiering: None,
                    access,
                    dynamic,
                    metadata,
                    txns,
                    cluster: std::sync::OnceLock::new(),
                };
                // Ends a crash left decided are finished before anything
                // is served: no read_committed reader waits on them.
                if let Err(e) = broker.txn_recover(&ending) {
                    tracing::warn!(error = %e, "a transaction's end could not be finished at start; the coordinator retries it");
                }
                Ok(broker)
            }
            Err(e) => {
                // Leave the store as a clean shutdown would: the failure was
                // ours, not the log's, and the next start should be quick.
                drop(metadata);
                let closed = Arc::try_unwrap(store).map_err(|_| StoreError::Closed);
                if let Err(close) = closed.and_then(Store::shutdown) {
                    tracing::error!(error = %close, "closing the store after a failed start");
                }
                Err(e)
            }
        }
    }

    fn prepare(
        declared_topics: &[DeclaredTopic],
        store: &Store,
        registry: &TopicRegistry,
        logs: &Arc<CompactedLogs>,
        declared_early: &[String],
        cleaner_config: CleanerConfig,
        faults: &Faults,
    ) -> Result<(GroupOffsets, LogCleaner, TxnsRebuilt), BrokerError> {
        registry.ensure_internal(&|p| new_partition_base(store, CONSUMER_OFFSETS_TOPIC, p))?;
        registry.apply_declared(declared_topics, &|t, p| new_partition_base(store, t, p))?;
        // Queues of topics the registry no longer has: left by a crash
        // between a topic's deletion from the registry and from the store
        // (or by a tidelog that did not delete them).
        let mut orphans: Vec<String> = store
            .partitions()
            .iter()
            .map(|tp| tp.topic().to_string())
            .filter(|t| registry.get(t).is_none() && t != crate::cluster_metadata::METADATA_TOPIC)
            .collect();
        orphans.dedup();
        for topic in &orphans {
            tracing::info!(%topic, "removing the queues of a deleted topic");
            store
                .delete_topic(topic)
                .map_err(|source| BrokerError::StoreOpen {
                    data_dir: store.data_dir().to_path_buf(),
                    source,
                })?;
        }
        for topic in registry.all() {
            if topic.config.cleanup_policy.compacts() {
                logs.set_topic(&topic.name, topic.config.compact_config());
            }
        }
        let compaction_err = |source| BrokerError::CompactedLogsOpen {
            data_dir: store.data_dir().to_path_buf(),
            source,
        };
        let cleaner = fault::new_cleaner(
            Arc::clone(logs),
            store.data_dir().to_path_buf(),
            cleaner_config,
            Arc::clone(store.commit_log()),
            faults,
        )
        .map_err(compaction_err)?;
        // Compacted logs of topics that are gone or no longer compact: left
        // by a crash during a delete, a fetch racing one, or a declaration
        // the config file took back.
        let mut stale: Vec<String> = logs
            .all_logs()
            .iter()
            .map(|l| l.topic_partition().topic().to_string())
            .chain(declared_early.iter().cloned())
            .filter(|t| {
                registry
                    .get(t)
                    .is_none_or(|t| !t.config.cleanup_policy.compacts())
            })
            .collect();
        stale.sort_unstable();
        stale.dedup();
        for topic in &stale {
            tracing::info!(%topic, "removing compacted logs of a topic that is not compact");
            cleaner.remove_topic(topic).map_err(compaction_err)?;
        }
        let internal = registry.get(CONSUMER_OFFSETS_TOPIC);
        let groups =
            GroupOffsets::rebuild(logs, &|p| internal.as_ref().map_or(0, |t| t.base_offset(p)))
                .map_err(|source| BrokerError::ConsumerOffsets {
                    topic: CONSUMER_OFFSETS_TOPIC,
                    source,
                })?;
        let txn_log = registry.get(crate::transactions::log::TRANSACTION_STATE_TOPIC);
        let txns = crate::transactions::service::rebuild(
            logs,
            txn_log.as_ref().map_or(0, |t| t.base_offset(0)),
        )?;
        // The log starts DeleteRecords moved: `compact,delete` retention
        // deletes the compacted segments wholly below them.
        for log in logs.all_logs() {
            let tp = log.topic_partition();
            log.set_log_start(store.log_start(tp.topic(), tp.partition()));
        }
        cleaner.start().map_err(compaction_err)?;
        Ok((groups, cleaner, txns))
    }

    /// Creates a topic (already validated `overrides`) and makes the
    /// compacted logs follow it. A compact topic is declared to them before
    /// the registry has it, so no record produced in between is missed; a
    /// failed create takes the declaration back. Blocking.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: u32,
        overrides: Overrides,
    ) -> Result<Arc<Topic>, BrokerError> {
        let config = self.registry.resolve(name, &overrides)?;
        crate::config::check_tiered_allowed(&overrides, self.tiering.is_some())?;
        self.check_tiered_create(name)?;
        let compacts = config.cleanup_policy.compacts();
        if compacts && self.registry.get(name).is_none() {
            self.logs.set_topic(name, config.compact_config());
        }
        let created = self.registry.create(name, partitions, overrides, &|p| {
            new_partition_base(&self.store, name, p)
        });
        match created {
            Ok(topic) => {
                self.sync_compaction(&topic)?;
                self.tiered_topic_changed(&topic);
                Ok(topic)
            }
            Err(e) => {
                if compacts {
                    self.resync_compaction(name);
                }
                Err(e)
            }
        }
    }

    /// Grows topic `name` to `count` partitions (`TopicRegistry::
    /// add_partitions`). A compact topic's compacted logs follow by
    /// themselves: they are declared per topic and open a partition's log
    /// on its first record. The remote tier's meta is updated. Blocking.
    pub fn add_partitions(&self, name: &str, count: u32) -> Result<Arc<Topic>, BrokerError> {
        let topic = self
            .registry
            .add_partitions(name, count, &|p| new_partition_base(&self.store, name, p))?;
        self.tiered_topic_changed(&topic);
        tracing::info!(topic = %name, partitions = count, "added partitions");
        Ok(topic)
    }

    /// Queues the topic's meta for the remote tier (never waits for it).
    fn tiered_topic_changed(&self, topic: &Topic) {
        if let Some(tiering) = &self.tiering {
            if !topic.is_internal() {
                tiering.topic_changed(topic);
            }
        }
    }

    /// The tiered-storage rules of a config change: `remote.storage.enable`
    /// needs a remote tier, and, as in Kafka, once on it stays on (the
    /// remote data would be orphaned; delete the topic instead).
    fn check_tiered_change(&self, current: &Topic, next: &TopicConfig) -> Result<(), BrokerError> {
        if next.remote_storage_enable && self.tiering.is_none() {
            crate::config::check_tiered_allowed(
                &[("remote.storage.enable".to_string(), "true".to_string())].into(),
                false,
            )?;
        }
        // The remote tier's objects keep no transaction flags or
        // markers: a transaction's records uploaded would be served as
        // committed, its markers as records.
        if next.remote_storage_enable
            && !current.config.remote_storage_enable
            && self.store.commit_log().txns().has_topic(&current.name)
        {
            return Err(BrokerError::InvalidTopicConfig {
                name: "remote.storage.enable".into(),
                reason: format!(
                    "topic {:?} holds transactions' records, which the remote tier cannot keep yet (KAFKA.md, \"Transactions\")",
                    current.name
                ),
            });
        }
        if current.config.remote_storage_enable && !next.remote_storage_enable {
            return Err(BrokerError::InvalidTopicConfig {
                name: "remote.storage.enable".into(),
                reason: format!(
                    "topic {:?} has remote storage on; it cannot be turned off (its remote data would be orphaned): delete the topic instead",
                    current.name
                ),
            });
        }
        Ok(())
    }

    /// The topic `name`, created with `partitions` and default configs if
    /// it does not exist (auto-create); a create racing this one wins and
    /// its topic is returned. Blocking.
    pub fn get_or_create_topic(
        &self,
        name: &str,
        partitions: u32,
    ) -> Result<Arc<Topic>, BrokerError> {
        if self.registry.get(name).is_none() {
            self.check_tiered_create(name)?;
        }
        let created = self
            .registry
            .create(name, partitions, Overrides::new(), &|p| {
                new_partition_base(&self.store, name, p)
            });
        match created {
            Ok(topic) => {
                self.tiered_topic_changed(&topic);
                tracing::info!(topic = %name, partitions, "auto-created topic");
                Ok(topic)
            }
            // Another request created it first: use theirs.
            Err(BrokerError::TopicExists { .. }) => self.registry.require(name),
            Err(e) => Err(e),
        }
    }

    /// Applies config changes all or nothing (`None` removes an override)
    /// and makes the compacted logs follow. Blocking.
    pub fn alter_topic(
        &self,
        name: &str,
        changes: &[(String, Option<String>)],
    ) -> Result<(), BrokerError> {
        self.alter_topic_with(name, &|_| Ok(changes.to_vec()))
    }

    /// [`Broker::alter_topic`] with the changes computed from the topic as
    /// the registry holds it under its write lock
    /// (`TopicRegistry::alter_with`): a read-modify-write a concurrent
    /// alter cannot lose. `changes_of` also runs once on the topic as it
    /// is now, to declare a topic becoming compact before the registry's
    /// check. Blocking.
    pub(crate) fn alter_topic_with(
        &self,
        name: &str,
        changes_of: &crate::registry::ChangesOf<'_>,
    ) -> Result<(), BrokerError> {
        let current = self.registry.require(name)?;
        let next = changed_config(&self.registry, &current, &changes_of(&current)?)?;
        self.check_tiered_change(&current, &next)?;
        // Becoming compact: copy records from now on, before the registry
        // checks the topic is empty, so none produced in between is missed.
        let becomes_compact =
            next.cleanup_policy.compacts() && !current.config.cleanup_policy.compacts();
        if becomes_compact {
            self.logs.set_topic(name, next.compact_config());
        }
        let altered = self
            .registry
            .alter_with(name, changes_of, &|p| next_offset(&self.store, name, p));
        match altered {
            Ok(topic) => {
                self.tiered_topic_changed(&topic);
                self.sync_compaction(&topic)
            }
            Err(e) => {
                if becomes_compact {
                    self.resync_compaction(name);
                }
                Err(e)
            }
        }
    }

    /// Applies broker or group config changes (`crate::dynamic_configs`),
    /// all or nothing; with `validate_only`, checks them and changes
    /// nothing. A change of topic defaults re-resolves every topic and
    /// makes the compacted logs and the remote tier follow the topics
    /// whose config changed, as an alter of each would. Blocking.
    pub(crate) fn alter_dynamic_configs(
        &self,
        scope: &crate::dynamic_configs::Scope,
        changes_of: &crate::dynamic_configs::ChangesOfValues<'_>,
        validate_only: bool,
    ) -> Result<(), BrokerError> {
        let mut changed: Vec<Arc<Topic>> = Vec::new();
        let mut declared: Vec<String> = Vec::new();
        let result = self.dynamic.alter(
            scope,
            changes_of,
            &self.config.groups,
            validate_only,
            &mut |altered, persist| {
                // Under the dynamic configs' lock: two group alters at once
                // reach the coordinator in the order they were made.
                let group_now = || {
                    if let (false, Some((group, timeouts))) = (validate_only, &altered.group) {
                        self.coordinator.set_group_timeouts(group, *timeouts);
                    }
                };
                let Some(defaults) = &altered.topic_defaults else {
                    persist()?;
                    group_now();
                    return Ok(());
                };
                let refused = |topic: &str, e: BrokerError| match e {
                    BrokerError::DynamicConfig { .. } => e,
                    other => BrokerError::DynamicConfig {
                        resource: scope.to_string(),
                        name: "topic defaults".into(),
                        problem: crate::error::DynamicConfigProblem::RefusedByTopic {
                            topic: topic.to_owned(),
                            reason: other.to_string(),
                        },
                    },
                };
                changed = self.registry.set_defaults(
                    defaults.clone(),
                    validate_only,
                    &mut |next| {
                        // Becoming compact: copy records from now on,
                        // before the registry has the topic so (as an
                        // alter does).
                        for topic in next {
                            let was_compact = self
                                .registry
                                .get(&topic.name)
                                .is_some_and(|t| t.config.cleanup_policy.compacts());
                            if topic.config.cleanup_policy.compacts() && !was_compact {
                                self.logs
                                    .set_topic(&topic.name, topic.config.compact_config());
                                declared.push(topic.name.to_string());
                            }
                        }
                        persist()
                    },
                    &|topic, p| next_offset(&self.store, topic, p),
                    &refused,
                )?;
                Ok(())
            },
        );
        if let Err(e) = result {
            for name in &declared {
                self.resync_compaction(name);
            }
            return Err(e);
        }
        if validate_only {
            return Ok(());
        }
        for topic in &changed {
            self.tiered_topic_changed(topic);
            self.sync_compaction(topic)?;
        }
        if !changed.is_empty() {
            tracing::info!(
                topics = changed.len(),
                "topic defaults changed; topics without their own value follow"
            );
        }
        Ok(())
    }

    /// The configs of `scope` as DescribeConfigs answers them, this
    /// broker's static ones (`statics`) first.
    pub(crate) fn describe_dynamic_configs(
        &self,
        scope: &crate::dynamic_configs::Scope,
        statics: Vec<crate::dynamic_configs::Described>,
    ) -> Vec<crate::dynamic_configs::Described> {
        self.dynamic.describe(scope, statics, &self.config.groups)
    }

    /// The topic defaults in force (the `log.*` broker configs).
    pub fn topic_defaults(&self) -> Arc<topic_config::Defaults> {
        self.registry.defaults()
    }

    /// Checks config changes as [`Broker::alter_topic`] would (names,
    /// values, their combination, a policy change on a topic with
    /// records, an internal topic) and applies nothing: a Kafka alter's
    /// `validate_only`.
    pub(crate) fn check_alter_topic(
        &self,
        name: &str,
        changes: &[(String, Option<String>)],
    ) -> Result<(), BrokerError> {
        let current = self.registry.require(name)?;
        if current.is_internal() {
            return Err(BrokerError::InternalTopicConfigsFixed {
                topic: name.to_string(),
            });
        }
        let next = changed_config(&self.registry, &current, changes)?;
        self.check_tiered_change(&current, &next)?;
        crate::registry::check_policy_change(&current, &next, &|p| {
            next_offset(&self.store, name, p)
        })
    }

    /// Deletes a topic: from the registry, its compacted logs, then its
    /// queues. Blocking.
    pub(crate) fn delete_topic(&self, name: &str) -> Result<(), BrokerError> {
        self.registry.delete(name)?;
        if let Some(tiering) = &self.tiering {
            // Its remote data goes at the next round (retried); a topic of
            // the same name waits for it.
            tiering.topic_deleted(name);
        }
        if self.has_compaction_state(name) {
            self.drop_compaction(name)?;
        }
        // Its ConsumeQueue files are removed and closed; a crash before
        // this is finished at the next start (`Broker::open`).
        self.store.delete_topic(name)?;
        Ok(())
    }

    /// Makes the compacted logs follow `topic` as the registry has it now
    /// (after a create or a config change): a compact topic is declared
    /// with its current config; one that no longer compacts (an empty
    /// topic changed to `delete`) loses its compacted logs. Blocking.
    fn sync_compaction(&self, topic: &Topic) -> Result<(), BrokerError> {
        if topic.config.cleanup_policy.compacts() {
            self.logs
                .set_topic(&topic.name, topic.config.compact_config());
            Ok(())
        } else if self.has_compaction_state(&topic.name) {
            self.drop_compaction(&topic.name)
        } else {
            Ok(())
        }
    }

    /// Makes the compacted logs follow the registry for `name` after a
    /// failed create or alter that declared it early. Blocking.
    fn resync_compaction(&self, name: &str) {
        let result = match self.registry.get(name) {
            Some(topic) => self.sync_compaction(&topic),
            None if self.has_compaction_state(name) => self.drop_compaction(name),
            None => Ok(()),
        };
        if let Err(e) = result {
            tracing::error!(topic = name, error = %e, "cannot bring the compacted logs in line with the registry");
        }
    }

    /// Whether the compacted logs know `name` (declared or with logs).
    pub(crate) fn has_compaction_state(&self, name: &str) -> bool {
        self.logs.is_compact(name)
            || self
                .logs
                .all_logs()
                .iter()
                .any(|l| l.topic_partition().topic() == name)
    }

    /// Stops compacting `name` and deletes its compacted logs and cleaner
    /// checkpoint entries (the topic was deleted). Blocking: waits for a
    /// pass in progress.
    fn drop_compaction(&self, name: &str) -> Result<(), BrokerError> {
        self.cleaner
            .remove_topic(name)
            .map_err(|source| BrokerError::CompactedLogsRemove {
                topic: name.to_string(),
                source,
            })
    }

    /// Whether a remote tier is configured (`tiered.url`).
    pub fn is_tiered(&self) -> bool {
        self.tiering.is_some()
    }

    /// A checkpoint of the store now: what a server that cannot take the
    /// broker back for [`shutdown`](Self::shutdown) (something still holds
    /// it) flushes before it exits. Blocking.
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        self.store.checkpoint()
    }

    /// A crash, for tests: the threads stopped, the store closed without a
    /// checkpoint and with `abort` left, as a `kill -9` leaves it (the
    /// page cache keeps what was written).
    #[cfg(test)]
    pub(crate) fn crash(self) {
        self.groups_thread.stop(&self.coordinator);
        self.cleaner.stop();
        match Arc::try_unwrap(self.store) {
            Ok(store) => store.close_uncleanly(),
            Err(_) => tracing::error!("the store is still held; not closed"),
        }
    }

    /// Stops `tidelog-groups` and the cleaner (joining their threads),
    /// then flushes, checkpoints and removes `abort` (Store::shutdown).
    pub fn shutdown(self) -> Result<(), StoreError> {
        self.groups_thread.stop(&self.coordinator);
        self.cleaner.stop();
        // The metadata log holds the store weakly: the broker's is the
        // only strong reference, unless a change is appending right now
        // (none can: shutdown owns the broker).
        Arc::try_unwrap(self.store)
            .map_err(|_| StoreError::Closed)?
            .shutdown()
    }
}

/// `tidelog-groups`: calls [`Coordinator::tick`] at its next deadline.
struct GroupsThread {
    stop: Arc<AtomicBool>,
    handle: Mutex<Option<JoinHandle<()>>>,
}

impl GroupsThread {
    fn start(
        coordinator: &Arc<Coordinator>,
        registry: &Arc<TopicRegistry>,
    ) -> Result<GroupsThread, BrokerError> {
        let stop = Arc::new(AtomicBool::new(false));
        let (c, r, s) = (
            Arc::clone(coordinator),
            Arc::clone(registry),
            Arc::clone(&stop),
        );
        let handle = std::thread::Builder::new()
            .name("tidelog-groups".into())
            .spawn(move || loop {
                // Supervised as the store's threads are: a panic (a bug)
                // is logged and the loop restarts, so deadlines keep being
                // applied.
                let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    run_groups_ticks(&c, &r, &s);
                }));
                if run.is_ok() || s.load(Ordering::Acquire) {
                    return;
                }
                tracing::error!(
                    thread = "tidelog-groups",
                    "background thread panicked; restarting it"
                );
                std::thread::sleep(Duration::from_millis(100));
            })
            .map_err(|source| BrokerError::ThreadStart {
                thread: "tidelog-groups",
                source,
            })?;
        Ok(GroupsThread {
            stop,
            handle: Mutex::new(Some(handle)),
        })
    }

    fn stop(&self, coordinator: &Coordinator) {
        self.stop.store(true, Ordering::Release);
        coordinator.notify_deadlines();
        let handle = self.handle.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(handle) = handle {
            if handle.join().is_err() {
                tracing::error!("the tidelog-groups thread panicked while stopping");
            }
        }
    }
}

/// The body of `tidelog-groups`, until `stop`.
fn run_groups_ticks(coordinator: &Coordinator, registry: &TopicRegistry, stop: &AtomicBool) {
    let partitions = |topic: &str| registry.get(topic).map(|t| t.partitions.get());
    while !stop.load(Ordering::Acquire) {
        // Taken before the deadline is read, so a change in between wakes
        // the wait below at once.
        let listener = coordinator.listen_deadlines();
        coordinator.tick(&partitions);
        let now_ms = coordinator.now_ms();
        let wait_ms = coordinator
            .next_deadline_ms()
            .map_or(GROUPS_TICK_MAX_MS, |d| d.saturating_sub(now_ms))
            .clamp(1, GROUPS_TICK_MAX_MS);
        if stop.load(Ordering::Acquire) {
            return;
        }
        let _ = listener.wait_timeout(Duration::from_millis(wait_ms));
    }
}

/// The cluster metadata log once the store has recovered
/// (`crate::cluster_metadata`): the files a cut or a lost tail left
/// pending take their last record below again; a diverged one is warned
/// about; and when recovery applied metadata records, a checkpoint past
/// them, so no later recovery replays them over a change this open
/// makes on its own (a declared topic, a bootstrap user). Blocking.
fn prepare_metadata(
    store: &Arc<Store>,
    sink: &crate::cluster_metadata::sink::MetadataSink,
    metadata: &crate::cluster_metadata::ClusterMetadata,
) -> Result<(), BrokerError> {
    metadata.set_store(store);
    sink.open(store)?;
    let diverged = sink.rederive(store)?;
    if !diverged.is_empty() {
        tracing::warn!(
            files = ?diverged,
            "a cut took changes of these metadata files and the log holds no earlier record of them: they keep content the master may not have until its next change of them (docs/CLUSTER.md)"
        );
    }
    if sink.applied() > 0 {
        store.checkpoint()?;
    }
    Ok(())
}

/// Declares compact topics to the compacted logs before recovery, so the
/// records it replays are copied: the registry's compact topics,
/// `__consumer_offsets`, and compact topics of the config file that are new
/// or already compact (a declared change from `delete` is checked by
/// `apply_declared`, and an allowed one finds the topic empty, so there is
/// nothing to replay). Returns the declared topics' names.
fn declare_before_recovery(
    logs: &CompactedLogs,
    registry: &TopicRegistry,
    declared: &[DeclaredTopic],
) -> Vec<String> {
    for topic in registry.all() {
        if topic.config.cleanup_policy.compacts() {
            logs.set_topic(&topic.name, topic.config.compact_config());
        }
    }
    if registry.get(CONSUMER_OFFSETS_TOPIC).is_none() {
        // What `ensure_internal` creates: compact with default configs.
        logs.set_topic(CONSUMER_OFFSETS_TOPIC, CompactTopicConfig::default());
    }
    let mut early = Vec::new();
    for d in declared {
        let existing = registry.get(&d.name);
        let mut overrides = existing
            .as_ref()
            .map(|t| t.overrides.clone())
            .unwrap_or_default();
        overrides.extend(d.overrides.clone());
        // A bad value is reported by `apply_declared`.
        let Ok(config) = registry.resolve(&d.name, &overrides) else {
            continue;
        };
        if config.cleanup_policy.compacts()
            && existing.is_none_or(|t| t.config.cleanup_policy.compacts())
        {
            logs.set_topic(&d.name, config.compact_config());
            early.push(d.name.clone());
        }
    }
    early
}

/// Refuses to start when the topic registry file is gone but the data dir
/// still holds records of user topics (their ConsumeQueue or compacted-log
/// directories). Without the file every topic would be unknown, and the
/// start-up sweep deletes the queues and compacted logs of unknown topics:
/// a lost `config/topics.json` (an operator's mistake, a bad restore)
/// would delete every partition's data. The fix is the operator's: restore
/// the file.
fn refuse_orphaned_topics(data_dir: &std::path::Path) -> Result<(), BrokerError> {
    let path = data_dir
        .join(CONFIG_DIR)
        .join(crate::registry::REGISTRY_FILE);
    if path.exists() {
        return Ok(());
    }
    let mut orphans = std::collections::BTreeSet::new();
    for dir in ["consumequeue", "compacted"] {
        let Ok(entries) = std::fs::read_dir(data_dir.join(dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.path().is_dir()
                && !crate::registry::is_internal(&name)
                && name != crate::cluster_metadata::METADATA_TOPIC
            {
                orphans.insert(name);
            }
        }
    }
    if orphans.is_empty() {
        return Ok(());
    }
    let shown: Vec<&String> = orphans.iter().take(10).collect();
    Err(BrokerError::RegistryFile {
        path,
        reason: format!(
            "missing, but the data dir holds records of {} topic(s) ({shown:?}{}): restore the file (from a backup) before starting; without it every topic would be unknown and their queues and compacted logs deleted",
            orphans.len(),
            if orphans.len() > shown.len() { ", ..." } else { "" }
        ),
    })
}

/// The typed config `topic` would have with `changes` applied (`None`
/// removes an override): names, values and their combination checked.
fn changed_config(
    registry: &TopicRegistry,
    topic: &Topic,
    changes: &[(String, Option<String>)],
) -> Result<TopicConfig, BrokerError> {
    let mut overrides = topic.overrides.clone();
    topic_config::apply(
        &mut overrides,
        changes.iter().map(|(n, v)| (n.as_str(), v.as_deref())),
    )?;
    registry.resolve(&topic.name, &overrides)
}

/// The queue offset the next record of a partition will get. Read from the
/// CommitLog's writer, not the ConsumeQueue, so records appended but not
/// yet dispatched are counted too.
pub fn next_offset(store: &Store, topic: &str, partition: u32) -> u64 {
    tidelog_storage::TopicPartition::new(topic, partition)
        .map(|tp| store.commit_log().next_queue_offset(&tp))
        .unwrap_or(0)
}

/// [`next_offset`] for a partition being created: the base of a topic (or
/// partition) created now (see `registry.rs`). It also lets the store
/// accept appends to a topic it deleted earlier in this run (until then
/// they are refused, `CommitLog::close_topic`), so only creation calls it.
pub fn new_partition_base(store: &Store, topic: &str, partition: u32) -> u64 {
    tidelog_storage::TopicPartition::new(topic, partition)
        .map(|tp| store.commit_log().open_partition(&tp))
        .unwrap_or(0)
}

#[cfg(test)]
#[path = "broker_tests.rs"]
mod tests;
