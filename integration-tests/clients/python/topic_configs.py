"""Every Kafka topic config through confluent-kafka's (librdkafka)
AdminClient and producer, and the ones that take effect, as librdkafka's
tests 0011, 0052, 0077, 0081 and 0092 use them.

* A topic created with Kafka configs tidelog gives no effect
  (`compression.type`, `flush.ms`, `file.delete.delay.ms`,
  `message.format.version`, ...) is created; DescribeConfigs answers them
  as the topic's, and the rest of Kafka's configs at their defaults.
* `message.timestamp.type=LogAppendTime`: the broker's time replaces the
  producer's (a record sent at 1970 + 1 s), in the delivery report and in
  what a consumer reads, both marked as log-append time.
* `message.timestamp.before.max.ms`: a record an hour old is refused with
  INVALID_TIMESTAMP, one of now is written.
* KIP-467: a batch of 100 records to a compact topic, 10 of them keyless:
  those 10 fail with INVALID_RECORD and the other 90 with
  `_INVALID_DIFFERENT_RECORD`; nothing of the batch is written.
* `min.insync.replicas=2`: acks=all is NOT_ENOUGH_REPLICAS, acks=1 writes.
* `compression.type` gzip, snappy, lz4 and zstd: fetches answer in that
  codec, and the consumer reads every record back.

Usage: topic_configs.py http://127.0.0.1:PORT 127.0.0.1:KAFKA_PORT
"""

import sys
import time

from confluent_kafka import (
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewTopic,
)

from tidelog_check import admin_error, check, run

KAFKA = sys.argv.pop(2)
DEADLINE_S = 60


def create(admin, name, config):
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=1, replication_factor=1, config=config)],
        request_timeout=30,
    )
    error = admin_error(futures[name])
    check(error is None, f"creating {name} with {config}: {error}")


def deliveries(config, topic, records):
    producer = Producer({"bootstrap.servers": KAFKA, **config})
    reports = []
    for key, value, timestamp in records:
        extra = {} if timestamp is None else {"timestamp": timestamp}
        producer.produce(
            topic,
            key=key,
            value=value,
            on_delivery=lambda error, message: reports.append((error, message)),
            **extra,
        )
    check(producer.flush(30) == 0, f"{topic}: deliveries still pending")
    check(len(reports) == len(records), f"{topic}: {len(reports)} reports")
    return reports


def code(error):
    return None if error is None else error.code()


def main(_base_url):
    admin = AdminClient({"bootstrap.servers": KAFKA})
    passed_through = {
        "compression.type": "zstd",
        "flush.ms": "1000",
        "flush.messages": "10",
        "file.delete.delay.ms": "30000",
        "message.format.version": "2.8",
        "index.interval.bytes": "8192",
        "preallocate": "true",
        "unclean.leader.election.enable": "false",
        "message.timestamp.type": "LogAppendTime",
    }
    create(admin, "stamped", passed_through)
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "stamped")])
    entries = next(iter(described.values())).result(timeout=30)
    for name, value in passed_through.items():
        entry = entries.get(name)
        check(entry is not None and entry.value == value, f"{name}: {entry}")
        check(
            entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
            f"{name}: source {entry.source}",
        )
    for name in ["segment.jitter.ms", "min.insync.replicas", "message.downconversion.enable"]:
        entry = entries.get(name)
        check(
            entry is not None and entry.source == ConfigSource.DEFAULT_CONFIG.value,
            f"{name}: {entry}",
        )

    # LogAppendTime: the broker's clock, marked so, in both directions.
    before = int(time.time() * 1000)
    reports = deliveries({}, "stamped", [(b"k", b"v", 1000)])
    error, message = reports[0]
    check(error is None, f"stamped: {error}")
    kind, stamped = message.timestamp()
    after = int(time.time() * 1000)
    check(kind == TIMESTAMP_LOG_APPEND_TIME, f"delivery timestamp type {kind}")
    check(before - 1000 <= stamped <= after + 1000, f"stamped {stamped} not in [{before}, {after}]")
    consumer = Consumer(
        {"bootstrap.servers": KAFKA, "group.id": "stamped-reader", "auto.offset.reset": "earliest"}
    )
    consumer.assign([TopicPartition("stamped", 0, 0)])
    got = None
    deadline = time.monotonic() + DEADLINE_S
    while got is None and time.monotonic() < deadline:
        m = consumer.poll(0.2)
        if m is not None and m.error() is None:
            got = m
    consumer.close()
    check(got is not None, "nothing read from stamped")
    check(got.timestamp() == (TIMESTAMP_LOG_APPEND_TIME, stamped), f"read {got.timestamp()}")

    # KIP-937's bound.
    create(admin, "bounded", {"message.timestamp.before.max.ms": "60000"})
    now = int(time.time() * 1000)
    [(old, _)] = deliveries({"retries": 0}, "bounded", [(b"k", b"old", now - 3_600_000)])
    check(code(old) == KafkaError.INVALID_TIMESTAMP, f"an hour old: {old}")
    [(fresh, _)] = deliveries({}, "bounded", [(b"k", b"new", now)])
    check(fresh is None, f"now: {fresh}")

    # KIP-467: per-record errors.
    create(admin, "keyed", {"cleanup.policy": "compact"})
    records = [(None if i % 10 == 3 else b"k%d" % i, b"v", None) for i in range(100)]
    reports = deliveries(
        {"linger.ms": 500, "batch.num.messages": 1000, "retries": 0},
        "keyed",
        records,
    )
    keyless = [code(e) for (e, m) in reports if m.key() is None]
    keyed = [code(e) for (e, m) in reports if m.key() is not None]
    check(keyless == [KafkaError.INVALID_RECORD] * 10, f"keyless: {keyless}")
    check(keyed == [KafkaError._INVALID_DIFFERENT_RECORD] * 90, f"keyed: {set(keyed)}")

    # min.insync.replicas beyond one node's one replica.
    create(admin, "guarded", {"min.insync.replicas": "2"})
    [(refused, _)] = deliveries({"acks": "all", "retries": 0}, "guarded", [(b"k", b"v", None)])
    check(code(refused) == KafkaError.NOT_ENOUGH_REPLICAS, f"acks=all: {refused}")
    [(written, _)] = deliveries({"acks": 1}, "guarded", [(b"k", b"v", None)])
    check(written is None, f"acks=1: {written}")
    # compression.type: the answers are in the topic's codec.
    for codec in ["gzip", "snappy", "lz4", "zstd"]:
        topic = f"packed-{codec}"
        create(admin, topic, {"compression.type": codec})
        values = [b"%d:" % i + b"x" * 500 for i in range(200)]
        reports = deliveries({"linger.ms": 50}, topic, [(None, v, None) for v in values])
        check(all(e is None for e, _ in reports), f"{topic}: produce failed")
        consumer = Consumer({"bootstrap.servers": KAFKA, "group.id": topic})
        consumer.assign([TopicPartition(topic, 0, 0)])
        read = []
        deadline = time.monotonic() + DEADLINE_S
        while len(read) < len(values) and time.monotonic() < deadline:
            m = consumer.poll(0.2)
            if m is not None and m.error() is None:
                read.append(m.value())
        consumer.close()
        check(read == values, f"{topic}: read {len(read)} of {len(values)}")
    print("topic_configs confluent-kafka: Kafka's configs accepted, the applied ones applied")


run(main)
