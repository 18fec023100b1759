"""confluent-kafka (librdkafka) against tidelog's Kafka listener: produce
with acks 1 and all and every codec the wheel has (none, gzip, snappy, lz4,
zstd; idempotence off, as InitProducerId is not served yet), consume with
`assign` and check every key, value, header (duplicates in order) and
timestamp at the offset the produce answered, seek by timestamp
(`offsets_for_times`); records produced over HTTP read by the Kafka
consumer with the same bytes, headers and timestamps, and records produced
over Kafka read over HTTP.

Usage: confluent_kafka_produce_consume.py http://127.0.0.1:PORT 127.0.0.1:KAFKA_PORT
"""

import base64
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from tidelog_check import BINARY, check, create_topic, fetch_all, produce_http_samples, run

KAFKA = sys.argv.pop(2) if len(sys.argv) == 3 else None
DEADLINE_S = 60
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def consume(topic, partition, count):
    """`count` records of `topic`/`partition` from offset 0 by assign,
    within a generous deadline."""
    consumer = Consumer(
        {
            "bootstrap.servers": KAFKA,
            "group.id": "unused-with-assign",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        records = []
        deadline = time.monotonic() + DEADLINE_S
        while len(records) < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            check(message.error() is None, f"{topic}/{partition}: consume error {message.error()}")
            records.append(message)
        check(
            len(records) == count,
            f"{topic}/{partition}: {len(records)} records consumed, {count} produced",
        )
        return records
    finally:
        consumer.close()


def check_record(got, offset, key, value, headers, timestamp, what):
    check(got.offset() == offset, f"{what}: offset {got.offset()}, produced at {offset}")
    check(got.key() == key, f"{what}: key {got.key()!r}, produced {key!r}")
    check(got.value() == value, f"{what}: value {got.value()!r}, produced {value!r}")
    got_headers = got.headers() or []
    check(got_headers == headers, f"{what}: headers {got_headers!r}, produced {headers!r}")
    check(got.timestamp()[1] == timestamp, f"{what}: timestamp {got.timestamp()}, produced {timestamp}")


def sample(i):
    """The i-th record: some keyless, one null value, 0-3 headers with a
    duplicated name, timestamps out of order."""
    key = None if i % 7 == 0 else f"key-{i}".encode()
    value = None if i == 11 else bytes([i, 0xFF, 0x00]) * (i + 1)
    headers = [("h", f"{i}".encode()), ("h", b"duplicate kept"), ("raw", bytes([0x80, i]))][: i % 4]
    timestamp = 1_700_000_000_000 + (i * 7919) % 1000
    return key, value, headers, timestamp


def produce(topic, partition, count, acks, codec):
    """Produces `count` sample records and returns (offset, key, value,
    headers, timestamp) as the delivery reports answered."""
    producer = Producer(
        {
            "bootstrap.servers": KAFKA,
            "acks": acks,
            "compression.codec": codec,
            "enable.idempotence": False,
            "linger.ms": 5,
            # several batches in one Produce request
            "batch.num.messages": 7,
        }
    )
    answered = {}
    failures = []

    def report(index):
        def on_delivery(err, message):
            if err is not None:
                failures.append(f"{topic}: delivery of record {index} failed: {err}")
            else:
                answered[index] = message.offset()

        return on_delivery

    sent = []
    for i in range(count):
        key, value, headers, timestamp = sample(i)
        producer.produce(
            topic,
            key=key,
            value=value,
            headers=headers,
            partition=partition,
            timestamp=timestamp,
            on_delivery=report(i),
        )
        sent.append((key, value, headers, timestamp))
    remaining = producer.flush(30)
    check(remaining == 0, f"{topic}: {remaining} records not delivered in 30 s")
    check(not failures, "; ".join(failures))
    check(len(answered) == count, f"{topic}: {len(answered)} delivery reports, {count} produced")
    return [(answered[i], *sent[i]) for i in range(count)]


def kafka_produce_then_consume(base_url):
    for acks in ["1", "all"]:
        for codec in CODECS:
            topic = f"ck-{acks}-{codec}"
            create_topic(base_url, topic, 2)
            answered = produce(topic, 1, 30, acks, codec)
            offsets = sorted(offset for offset, *_ in answered)
            check(offsets == list(range(30)), f"{topic}: produce answered offsets {offsets}")
            got = {m.offset(): m for m in consume(topic, 1, len(answered))}
            for offset, key, value, headers, timestamp in answered:
                check_record(got[offset], offset, key, value, headers, timestamp, f"{topic}@{offset}")
            print(f"{topic}: 30 records produced with acks={acks}, codec={codec}, consumed back")
    create_topic(base_url, "ck-times", 1)
    by_offset = sorted(produce("ck-times", 0, 30, "all", "none"))
    seek_by_timestamp("ck-times", 0, [t for *_, t in by_offset])
    kafka_produce_http_consume(base_url, "ck-times", by_offset)


def seek_by_timestamp(topic, partition, timestamps):
    """`offsets_for_times` (ListOffsets by timestamp) against a scan of the
    produced timestamps, which are out of order: the first offset whose
    timestamp is at least the target; -1 (the end) past the largest."""
    consumer = Consumer({"bootstrap.servers": KAFKA, "group.id": "unused-times", "enable.auto.commit": False})
    try:
        targets = [0, min(timestamps), max(timestamps), max(timestamps) + 1]
        targets += [timestamps[i] + 1 for i in range(0, len(timestamps), 3)]
        for target in targets:
            [found] = consumer.offsets_for_times([TopicPartition(topic, partition, target)], timeout=10)
            check(found.error is None, f"{topic}: offsets_for_times({target}) failed: {found.error}")
            first = next((i for i, t in enumerate(timestamps) if t >= target), -1)
            check(found.offset == first, f"{topic}: offsets_for_times({target}) = {found.offset}, expected {first}")
        print(f"{topic}: offsets_for_times matched a scan for {len(targets)} targets")
    finally:
        consumer.close()


def kafka_produce_http_consume(base_url, topic, answered):
    """Records produced over Kafka, read over HTTP (binary embedded
    format): the same key/value bytes, headers and timestamps."""
    records = fetch_all(base_url, topic, 0, BINARY, len(answered), 100)

    def unb64(text):
        return None if text is None else base64.b64decode(text)

    for record, (offset, key, value, headers, timestamp) in zip(records, answered):
        what = f"{topic}@{offset} over HTTP"
        check(record["offset"] == offset, f"{what}: offset {record['offset']}")
        check(unb64(record.get("key")) == key, f"{what}: key {record.get('key')!r}, produced {key!r}")
        check(unb64(record.get("value")) == value, f"{what}: value {record.get('value')!r}, produced {value!r}")
        got_headers = [(h["name"], unb64(h["value"])) for h in record.get("headers") or []]
        check(got_headers == headers, f"{what}: headers {got_headers!r}, produced {headers!r}")
        check(record["timestamp"] == timestamp, f"{what}: timestamp {record['timestamp']}, produced {timestamp}")
    print(f"{topic}: {len(answered)} records produced over Kafka, read over HTTP")


def http_produce_kafka_consume(base_url):
    topic = "ck-from-http"
    expected = produce_http_samples(base_url, topic)
    got = consume(topic, 0, len(expected))
    for fetched, (offset, key, value, headers, timestamp) in zip(got, expected):
        check_record(fetched, offset, key, value, headers, timestamp, f"{topic}@{offset}")
    print(f"{topic}: {len(expected)} records produced over HTTP, consumed over Kafka")


def main(base_url):
    check(KAFKA is not None, "usage: confluent_kafka_produce_consume.py HTTP_URL KAFKA_ADDR")
    kafka_produce_then_consume(base_url)
    http_produce_kafka_consume(base_url)
    print("confluent_kafka_produce_consume: every record came back")


if __name__ == "__main__":
    run(main)
