"""kafka-python against tidelog's Kafka listener: produce with acks 1 and
all (uncompressed and gzip, the codec it has without native add-ons;
idempotence off, as InitProducerId is not served yet), consume with
`assign` + `seek` and check every key, value, header (duplicates in order)
and timestamp at the offset the produce answered, and seek by timestamp
(`offsets_for_times`); then records produced
over HTTP (binary embedded format) read by the Kafka consumer with the
same bytes, headers and timestamps.

Usage: kafka_python_produce_consume.py http://127.0.0.1:PORT 127.0.0.1:KAFKA_PORT
"""

import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tidelog_check import check, create_topic, produce_http_samples, run

KAFKA = sys.argv.pop(2) if len(sys.argv) == 3 else None


def consume(topic, partition, count):
    """`count` records of `topic`/`partition` from offset 0, by assign +
    seek, within a generous deadline."""
    consumer = KafkaConsumer(
        bootstrap_servers=KAFKA,
        group_id=None,
        enable_auto_commit=False,
        consumer_timeout_ms=1000,
    )
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        records = []
        deadline = time.monotonic() + 60
        while len(records) < count and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=1000).values():
                records.extend(batch)
        check(
            len(records) == count,
            f"{topic}/{partition}: {len(records)} records consumed, {count} produced",
        )
        return records
    finally:
        consumer.close()


def check_record(got, offset, key, value, headers, timestamp, what):
    check(got.offset == offset, f"{what}: offset {got.offset}, produced at {offset}")
    check(got.key == key, f"{what}: key {got.key!r}, produced {key!r}")
    check(got.value == value, f"{what}: value {got.value!r}, produced {value!r}")
    check(list(got.headers) == headers, f"{what}: headers {got.headers!r}, produced {headers!r}")
    check(got.timestamp == timestamp, f"{what}: timestamp {got.timestamp}, produced {timestamp}")


def kafka_produce_then_consume(base_url):
    for acks, codec in [(1, None), ("all", None), (1, "gzip"), ("all", "gzip")]:
        topic = f"kp-{acks}-{codec or 'none'}"
        create_topic(base_url, topic, 2)
        producer = KafkaProducer(
            bootstrap_servers=KAFKA,
            acks=acks,
            compression_type=codec,
            enable_idempotence=False,
            linger_ms=5,
        )
        sent = []
        for i in range(30):
            key = None if i % 7 == 0 else f"key-{i}".encode()
            value = None if i == 11 else bytes([i, 0xFF, 0x00]) * (i + 1)
            headers = [("h", f"{i}".encode()), ("h", b"duplicate kept"), ("raw", bytes([0x80, i]))][: i % 4]
            timestamp = 1_700_000_000_000 + (i * 7919) % 1000  # not monotonic
            future = producer.send(
                topic, key=key, value=value, headers=headers, partition=1, timestamp_ms=timestamp
            )
            sent.append((future, key, value, headers, timestamp))
        producer.flush(timeout=30)
        answered = [(f.get(timeout=30), k, v, h, t) for f, k, v, h, t in sent]
        producer.close(timeout=30)
        offsets = [m.offset for m, *_ in answered]
        check(offsets == list(range(30)), f"{topic}: produce answered offsets {offsets}")
        got = consume(topic, 1, len(answered))
        for record, (meta, key, value, headers, timestamp) in zip(got, answered):
            check_record(record, meta.offset, key, value, headers, timestamp, f"{topic}@{meta.offset}")
        print(f"{topic}: 30 records produced with acks={acks}, codec={codec}, consumed back")
        seek_by_timestamp(topic, 1, [t for *_, t in answered])


def seek_by_timestamp(topic, partition, timestamps):
    """`offsets_for_times` (ListOffsets by timestamp) against a scan of the
    produced timestamps, which are out of order: the first offset whose
    timestamp is at least the target, with that timestamp; None past the
    largest."""
    consumer = KafkaConsumer(bootstrap_servers=KAFKA, group_id=None, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, partition)
        targets = [0, min(timestamps), max(timestamps), max(timestamps) + 1]
        targets += [timestamps[i] + 1 for i in range(0, len(timestamps), 3)]
        for target in targets:
            found = consumer.offsets_for_times({tp: target})[tp]
            first = next((i for i, t in enumerate(timestamps) if t >= target), None)
            if first is None:
                check(found is None, f"{topic}: offsets_for_times({target}) = {found}, expected None")
                continue
            check(
                found is not None
                and (found.offset, found.timestamp) == (first, timestamps[first]),
                f"{topic}: offsets_for_times({target}) = {found}, "
                f"expected offset {first} at {timestamps[first]}",
            )
    finally:
        consumer.close()


def http_produce_kafka_consume(base_url):
    topic = "kp-from-http"
    expected = produce_http_samples(base_url, topic)
    got = consume(topic, 0, len(expected))
    for fetched, (offset, key, value, headers, timestamp) in zip(got, expected):
        check_record(fetched, offset, key, value, headers, timestamp, f"{topic}@{offset}")
    print(f"{topic}: {len(expected)} records produced over HTTP, consumed over Kafka")


def main(base_url):
    check(KAFKA is not None, "usage: kafka_python_produce_consume.py HTTP_URL KAFKA_ADDR")
    kafka_produce_then_consume(base_url)
    http_produce_kafka_consume(base_url)
    print("kafka_python_produce_consume: every record came back")


if __name__ == "__main__":
    run(main)
