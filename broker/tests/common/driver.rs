//! The model tests' one door into the broker: every call the tests make
//! into `tidelog_broker` is a method of [`Driver`], made as a front-end
//! makes it today:
//!
//! * [`Driver::produce_http`]: HTTP's produce through the door
//!   (`Door::produce`), a list of per-record JSON records (each with its
//!   own optional partition) and an optional path partition, allowed to
//!   auto-create (`api/src/handlers/produce.rs`).
//! * [`Driver::produce_kafka`]: Kafka's produce through the door, one
//!   partition's records built one by one (`Records`) with or without an
//!   idempotent producer, never auto-creating
//!   (`kafka/src/handlers/produce.rs`).
//! * [`Driver::fetch`]: a read that begins with the read-your-writes wait
//!   (`Broker::visible`; the front-ends bound it by `VISIBILITY_WAIT`,
//!   the test by [`VISIBLE_WAIT`]), then reads as
//!   either front-end does ([`FetchPath`]); [`Driver::offset_for_timestamp`]
//!   (Kafka's ListOffsets by timestamp, after the same wait).
//! * [`Driver::delete_records`], [`Driver::compact`] (request, then wait
//!   for the passes as the HTTP compaction route does), [`Driver::commit`]
//!   and [`Driver::fetch_offsets`] (a commit without membership, as HTTP's
//!   offsets route and Kafka's generation −1), [`Driver::restart`].
//!
//! The answers are the test's own plain types, so when the broker's API
//! changes (one async call per operation with typed requests) only this
//! file changes. Methods block: the async calls run on the driver's own
//! runtime.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tidelog_broker::groups::{CommitValue, Committer, OffsetCommit};
use tidelog_broker::produce::{ProduceRecord, ProduceRequest, Records as ProduceRecords};
use tidelog_broker::read::{RecordRef, Records};
use tidelog_broker::store::{
    BatchMeta, CleanerConfig, FlushMode, Header, ProducerBatch, RunStats, StoreConfig, StoredRecord,
};
use tidelog_broker::topic_config::Overrides;
use tidelog_broker::{Broker, BrokerConfig, BrokerError, Principal};

/// How long a compaction request waits for its passes (the machine is
/// shared; a pass over the test's few records takes milliseconds).
const COMPACTION_WAIT: Duration = Duration::from_secs(60);

/// How long a read waits for what was acknowledged to be visible: far
/// longer than the front-ends' `VISIBILITY_WAIT` (5 s), since on a shared
/// two-core machine a dispatcher can be descheduled for seconds, and the
/// model checks what is served, not how fast. A wait that runs out fails
/// the test.
const VISIBLE_WAIT: Duration = Duration::from_secs(60);

/// A record as the model writes it and a fetch returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// `None`: keyless.
    pub key: Option<Vec<u8>>,
    /// `None`: a tombstone.
    pub value: Option<Vec<u8>>,
    /// In order, duplicates kept; a `None` value is a null header.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// Written: `None` asks for the append time. Fetched: always `Some`.
    pub timestamp_ms: Option<i64>,
}

/// One record of HTTP's produce body: the record and its own `partition`.
#[derive(Debug, Clone)]
pub struct HttpRecord {
    pub partition: Option<u32>,
    pub record: Record,
}

/// A Kafka produce's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaAck {
    /// The offsets written, in order (none for a duplicate).
    pub offsets: Vec<u64>,
    /// An idempotent producer's retry: the original batch.
    pub duplicate_of: Option<BatchMeta>,
}

/// How a fetch reads, as each front-end does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchPath {
    /// HTTP's fetch (`api/src/handlers/fetch.rs`): `read_cached` (a
    /// compacted log's bytes in the page cache), else `read`.
    Http,
    /// Kafka's Fetch (`kafka/src/handlers/fetch.rs`): `read_into` a sink
    /// for a queue partition, `read_async` for a compact one.
    Kafka,
}

/// A fetch's answer.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub records: Vec<(u64, Record)>,
    pub next_offset: u64,
}

/// A partition's offsets as the front-ends answer them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offsets {
    /// `PartitionRef::offsets().0`: HTTP's beginning offset.
    pub beginning: u64,
    /// Kafka's log start offset (`log_start_and_end`).
    pub log_start: u64,
    /// The offset the next record gets (the high watermark).
    pub end: u64,
}

/// What a compaction request came to, per partition.
#[derive(Debug, Clone)]
pub struct Compacted {
    pub partition: u32,
    /// A pass started after the request finished (or the partition is
    /// uncleanable).
    pub completed: bool,
    pub last_run: Option<RunStats>,
}

/// A committed offset: topic, partition, offset, metadata.
pub type Commit = (String, u32, u64, String);

/// The broker under test, in `dir`, and a runtime for its async calls.
pub struct Driver {
    dir: PathBuf,
    config: BrokerConfig,
    rt: tokio::runtime::Runtime,
    broker: Option<Arc<Broker>>,
}

impl Driver {
    /// Opens a broker on `dir` (auto-create on, with `default_partitions`).
    pub fn open(dir: &Path, default_partitions: u32) -> Driver {
        let config = BrokerConfig {
            auto_create_topics: true,
            default_partitions,
            ..BrokerConfig::default()
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let mut driver = Driver {
            dir: dir.to_path_buf(),
            config,
            rt,
            broker: None,
        };
        driver.start();
        driver
    }

    fn start(&mut self) {
        let broker = Broker::open(&self.config, store_config(&self.dir), cleaner_config()).unwrap();
        self.broker = Some(Arc::new(broker));
    }

    fn broker(&self) -> &Arc<Broker> {
        self.broker.as_ref().unwrap()
    }

    /// A clean shutdown and a new start on the same data dir.
    pub fn restart(&mut self) {
        self.close();
        self.start();
    }

    /// A clean shutdown.
    pub fn close(&mut self) {
        if let Some(broker) = self.broker.take() {
            let broker = Arc::try_unwrap(broker).expect("the test holds no other broker handle");
            broker.shutdown().unwrap();
        }
    }

    /// Creates a topic (an operator's create).
    pub fn create_topic(&self, name: &str, partitions: u32, overrides: &[(&str, String)]) {
        let overrides: Overrides = overrides
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        self.broker()
            .create_topic(name, partitions, overrides)
            .unwrap();
    }

    /// The topic's partition count, `None` if it does not exist.
    pub fn partitions(&self, topic: &str) -> Option<u32> {
        let door = self.broker().door(&Principal::Anonymous);
        door.describe_topic(topic).ok().map(|t| t.partitions.get())
    }

    /// HTTP's produce: `(partition, offset)` of each record, in order.
    pub fn produce_http(
        &self,
        topic: &str,
        path_partition: Option<u32>,
        records: Vec<HttpRecord>,
    ) -> Result<Vec<(u32, u64)>, BrokerError> {
        let records: Vec<ProduceRecord> = records
            .into_iter()
            .map(|r| ProduceRecord {
                key: r.record.key.map(Bytes::from),
                value: r.record.value.map(Bytes::from),
                partition: r.partition,
                headers: r
                    .record
                    .headers
                    .into_iter()
                    .map(|(name, value)| (name, value.map(Bytes::from)))
                    .collect(),
                timestamp_ms: r.record.timestamp_ms,
            })
            .collect();
        let request = ProduceRequest {
            topic: topic.to_owned(),
            partition: path_partition,
            records: records.into_iter().collect(),
            producer: None,
            create_missing_topic: true,
            acks_all: true,
        };
        let door = self.broker().door(&Principal::Anonymous);
        let produced = self.rt.block_on(door.produce(request))?;
        Ok(produced.offsets().collect())
    }

    /// Kafka's produce of one partition's batch, as `producer`'s batch
    /// when given.
    pub fn produce_kafka(
        &self,
        topic: &str,
        partition: u32,
        records: Vec<Record>,
        producer: Option<ProducerBatch>,
    ) -> Result<KafkaAck, BrokerError> {
        let mut batch = ProduceRecords::new();
        batch.reserve(records.len());
        for r in records {
            batch.push(
                None,
                r.key.map(Bytes::from),
                r.value.map(Bytes::from),
                r.headers
                    .into_iter()
                    .map(|(name, value)| Header {
                        name,
                        value: value.map(Bytes::from),
                    })
                    .collect(),
                r.timestamp_ms,
            );
        }
        let request = ProduceRequest {
            topic: topic.to_owned(),
            partition: Some(partition),
            records: batch,
            producer,
            create_missing_topic: false,
            acks_all: true,
        };
        let door = self.broker().door(&Principal::Anonymous);
        let produced = self.rt.block_on(door.produce(request))?;
        Ok(KafkaAck {
            offsets: produced.offsets().map(|(_, o)| o).collect(),
            duplicate_of: produced.duplicate_of(),
        })
    }

    /// InitProducerId: a new producer, or the next epoch of `current`.
    pub fn init_producer_id(&self, current: Option<(i64, i16)>) -> (i64, i16) {
        let door = self.broker().door(&Principal::Anonymous);
        self.rt.block_on(door.init_producer_id(current)).unwrap()
    }

    /// A fetch of up to `max_records` from `from`, after every record
    /// acknowledged before it is visible.
    pub fn fetch(
        &self,
        topic: &str,
        partition: u32,
        from: u64,
        max_records: usize,
        max_bytes: usize,
        path: FetchPath,
    ) -> Result<Fetched, BrokerError> {
        let broker = self.broker();
        let part = broker.partition(topic, partition)?;
        self.wait_visible();
        let (records, next_offset) = match path {
            FetchPath::Http => {
                let batch = match part.read_cached(from, max_records, max_bytes)? {
                    Some(batch) => batch,
                    // On the blocking pool in the server.
                    None => part.read(from, max_records, max_bytes)?,
                };
                (fetched(&batch.records), batch.next_offset)
            }
            FetchPath::Kafka => {
                let mut sink: Vec<StoredRecord> = Vec::new();
                match part.read_into(from, max_records, max_bytes, &mut sink)? {
                    Some(next) => (
                        sink.iter().map(|r| record(RecordRef::Stored(r))).collect(),
                        next,
                    ),
                    None => {
                        let batch =
                            self.rt
                                .block_on(part.read_async(from, max_records, max_bytes))?;
                        (fetched(&batch.records), batch.next_offset)
                    }
                }
            }
        };
        Ok(Fetched {
            records,
            next_offset,
        })
    }

    /// Until every record acknowledged so far is visible (fetchable): what
    /// a read waits for before it answers (at most [`VISIBLE_WAIT`]).
    pub fn wait_visible(&self) {
        let broker = self.broker();
        self.rt.block_on(async {
            let point = broker.acknowledged();
            tokio::time::timeout(VISIBLE_WAIT, broker.visible(point))
                .await
                .expect("acknowledged records become visible");
        });
    }

    /// The partition's offsets, after every acknowledged record is visible.
    pub fn offsets(&self, topic: &str, partition: u32) -> Result<Offsets, BrokerError> {
        let part = self.broker().partition(topic, partition)?;
        self.wait_visible();
        let (beginning, _) = part.offsets();
        let (log_start, end) = part.log_start_and_end();
        Ok(Offsets {
            beginning,
            log_start,
            end,
        })
    }

    /// ListOffsets by timestamp (Kafka's, after the read-your-writes wait
    /// its handler makes): the first offset whose record's timestamp is at
    /// least `timestamp_ms`, or the end.
    pub fn offset_for_timestamp(
        &self,
        topic: &str,
        partition: u32,
        timestamp_ms: i64,
    ) -> Result<u64, BrokerError> {
        let part = self.broker().partition(topic, partition)?;
        self.wait_visible();
        // On the blocking pool in the server.
        part.offset_for_timestamp(timestamp_ms)
    }

    /// DeleteRecords: the low watermark after it.
    pub fn delete_records(
        &self,
        topic: &str,
        partition: u32,
        offset: i64,
    ) -> Result<u64, BrokerError> {
        let door = self.broker().door(&Principal::Anonymous);
        self.rt
            .block_on(door.delete_records(topic, partition, offset))
    }

    /// Compaction on request, waited for (HTTP's compaction route with
    /// `wait`): what was acknowledged before is in the compacted logs
    /// first, then every partition is requested (`roll_active`: the active
    /// segments rolled first) and each pass waited for.
    pub fn compact(&self, topic: &str, roll_active: bool) -> Result<Vec<Compacted>, BrokerError> {
        // The door waits for visibility too, bounded by VISIBILITY_WAIT;
        // the test's own wait is longer (VISIBLE_WAIT).
        self.wait_visible();
        let door = self.broker().door(&Principal::Anonymous);
        let waited = self.rt.block_on(async {
            let ticket = door.compact(topic, roll_active).await?;
            ticket.wait(COMPACTION_WAIT).await
        })?;
        Ok(waited
            .into_iter()
            .map(|w| Compacted {
                partition: w.partition,
                completed: w.completed,
                last_run: w.status.and_then(|s| s.last_run),
            })
            .collect())
    }

    /// A commit without membership (HTTP's offsets route, Kafka's
    /// OffsetCommit with generation −1).
    pub fn commit(&self, group: &str, offsets: Vec<Commit>) -> Result<(), BrokerError> {
        let offsets = offsets
            .into_iter()
            .map(|(topic, partition, offset, metadata)| OffsetCommit {
                topic,
                partition,
                value: CommitValue {
                    offset,
                    metadata,
                    ..Default::default()
                },
            })
            .collect();
        let door = self.broker().door(&Principal::Anonymous);
        self.rt
            .block_on(door.commit(group.to_owned(), offsets, Committer::Stateless))
    }

    /// The group's committed offsets, sorted by topic and partition (Kafka's
    /// OffsetFetch of every partition); `None` if it has none.
    pub fn fetch_offsets(&self, group: &str) -> Option<Vec<Commit>> {
        self.broker().committed_offsets(group, None).map(|list| {
            list.into_iter()
                .map(|c| (c.topic, c.partition, c.offset, c.metadata))
                .collect()
        })
    }
}

fn fetched(records: &Records) -> Vec<(u64, Record)> {
    records.iter().map(record).collect()
}

fn record(r: RecordRef<'_>) -> (u64, Record) {
    (
        r.offset(),
        Record {
            key: r.key().map(<[u8]>::to_vec),
            value: r.value().map(<[u8]>::to_vec),
            headers: r
                .headers()
                .into_iter()
                .map(|h| (h.name, h.value.map(|v| v.to_vec())))
                .collect(),
            timestamp_ms: Some(r.timestamp_ms()),
        },
    )
}

impl Drop for Driver {
    fn drop(&mut self) {
        // A failed test leaves the broker to its Drop; a passing one closed it.
        if std::thread::panicking() {
            return;
        }
        self.close();
    }
}

/// Small files, so a few hundred records span several of them.
fn store_config(dir: &Path) -> StoreConfig {
    let mut c = StoreConfig::new(dir);
    c.commitlog_segment_bytes = 1 << 20;
    c.consume_queue_units_per_file = 1000;
    c.index_slots = 1000;
    c.index_entries = 4000;
    c.preallocate_next_segment = false;
    c.flush = FlushMode::Async;
    // How full this shared machine's disk is must not refuse writes.
    c.retention.disk = Arc::new(tidelog_broker::store::FixedDiskUsage::new(0.1));
    c
}

fn cleaner_config() -> CleanerConfig {
    CleanerConfig {
        threads: 1,
        dedupe_buffer_bytes: 1 << 20,
        ..CleanerConfig::default()
    }
}
