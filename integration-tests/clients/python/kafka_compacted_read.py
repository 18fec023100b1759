"""A compact topic read after its cleaning, with kafka-python or
confluent-kafka: keyed records with repeats and a tombstone produced over
Kafka to `compacted-CLIENT` (one partition; the Rust test's config gives it
small segments, a small dirty ratio and a short segment.ms, so the
LogCleaner cleans it by itself), a bounded wait until HTTP reads the
cleaned log (one record per key), then the client consumes from the
beginning: exactly the last record of each key at its original offset
(the offsets between them are gaps the client steps over), the tombstone
kept as a null value (inside delete.retention.ms).

Usage: kafka_compacted_read.py kafka-python|confluent-kafka HTTP_URL KAFKA_ADDR
"""

import sys
import time

from tidelog_check import check, http_log, run

CLIENT = sys.argv.pop(1) if len(sys.argv) == 4 else None
KAFKA = sys.argv.pop(2) if len(sys.argv) == 3 else None
KEYS = 8
VERSIONS = 6
TOMBSTONE_KEY = b"key-3"
DEADLINE_S = 60


def records():
    """(key, value) in produce order: every key VERSIONS times, values
    long enough that the records fill several 1 KiB segments; the last
    version of TOMBSTONE_KEY is a tombstone."""
    out = []
    for version in range(VERSIONS):
        for k in range(KEYS):
            key = f"key-{k}".encode()
            value = f"{key.decode()} version {version} ".encode() * 4
            if key == TOMBSTONE_KEY and version == VERSIONS - 1:
                value = None
            out.append((key, value))
    return out


def produce_kafka_python(topic, sent):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=KAFKA, acks="all", enable_idempotence=False, linger_ms=5)
    futures = [producer.send(topic, key=key, value=value, partition=0) for key, value in sent]
    producer.flush(timeout=30)
    offsets = [f.get(timeout=30).offset for f in futures]
    producer.close(timeout=30)
    return offsets


def produce_confluent_kafka(topic, sent):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": KAFKA, "acks": "all", "enable.idempotence": False, "linger.ms": 5})
    offsets, failures = [None] * len(sent), []

    def report(index):
        def on_delivery(err, message):
            if err is not None:
                failures.append(f"record {index}: {err}")
            else:
                offsets[index] = message.offset()

        return on_delivery

    for i, (key, value) in enumerate(sent):
        producer.produce(topic, key=key, value=value, partition=0, on_delivery=report(i))
    check(producer.flush(30) == 0, "records not delivered in 30 s")
    check(not failures, "; ".join(failures[:3]))
    return offsets


def consume_kafka_python(topic, last_offset):
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=KAFKA, group_id=None, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got = []
        deadline = time.monotonic() + DEADLINE_S
        while not got or got[-1][0] < last_offset:
            check(time.monotonic() < deadline, f"{topic}: consumed only up to {got[-1:] or 'nothing'}")
            for batch in consumer.poll(timeout_ms=500).values():
                got.extend((r.offset, r.key, r.value) for r in batch)
        return got
    finally:
        consumer.close()


def consume_confluent_kafka(topic, last_offset):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": KAFKA, "group.id": "unused-compacted", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got = []
        deadline = time.monotonic() + DEADLINE_S
        while not got or got[-1][0] < last_offset:
            check(time.monotonic() < deadline, f"{topic}: consumed only up to {got[-1:] or 'nothing'}")
            message = consumer.poll(0.5)
            if message is None:
                continue
            check(message.error() is None, f"{topic}: consume error {message.error()}")
            got.append((message.offset(), message.key(), message.value()))
        return got
    finally:
        consumer.close()


def main(base_url):
    check(CLIENT in ("kafka-python", "confluent-kafka"), "usage: kafka_compacted_read.py CLIENT HTTP_URL KAFKA_ADDR")
    topic = f"compacted-{CLIENT}"
    produce = produce_kafka_python if CLIENT == "kafka-python" else produce_confluent_kafka
    consume = consume_kafka_python if CLIENT == "kafka-python" else consume_confluent_kafka

    sent = records()
    offsets = produce(topic, sent)
    check(offsets == list(range(len(sent))), f"{topic}: produce answered offsets {offsets}")
    latest = {}
    for offset, (key, value) in zip(offsets, sent):
        latest[key] = (offset, key, value)
    expected = sorted(latest.values())

    # The cleaner runs by itself (backoff, segment.ms): wait for its result.
    deadline = time.monotonic() + DEADLINE_S
    while (log := http_log(base_url, topic)) != expected:
        check(
            time.monotonic() < deadline,
            f"{topic}: not compacted within {DEADLINE_S} s: HTTP reads {len(log)} records, "
            f"{len(expected)} keys were produced",
        )
        time.sleep(0.2)
    print(f"{topic}: the cleaner left {len(expected)} of {len(sent)} records, one per key")

    got = consume(topic, expected[-1][0])
    check(got == expected, f"{topic}: {CLIENT} read {got}, the compacted log is {expected}")
    tombstone = next(r for r in got if r[1] == TOMBSTONE_KEY)
    check(tombstone[2] is None, f"{topic}: the tombstone came back as {tombstone[2]!r}")
    gaps = expected[-1][0] + 1 - len(expected)
    print(f"{topic}: {CLIENT} read one record per key at its original offset across {gaps} gaps, the tombstone null")
    print("kafka_compacted_read: the compacted log read back")


if __name__ == "__main__":
    run(main)
