"""Fetch's byte limit as librdkafka's 0082 checks it, through
confluent-kafka: `fetch.max.bytes` 1,000,000 and 900 KiB records on two
partitions. librdkafka refuses any answer larger than
`receive.message.max.bytes` (here the least it allows, fetch.max.bytes +
512), so an answer carrying two of these records (1.84 MB) would fail the
consumer. Kafka lets only the first partition with records exceed the
limit; every record must arrive, one answer at a time.

Usage: fetch_max_bytes.py http://127.0.0.1:PORT 127.0.0.1:KAFKA_PORT
"""

import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from tidelog_check import check, create_topic, run

KAFKA = sys.argv.pop(2)
TOPIC = "bigrecords"
PER_PARTITION = 3
RECORD_BYTES = 900 * 1024
DEADLINE_S = 90


def main(base_url):
    create_topic(base_url, TOPIC, 2)
    producer = Producer({"bootstrap.servers": KAFKA, "message.max.bytes": 2_000_000})
    for partition in range(2):
        for i in range(PER_PARTITION):
            producer.produce(TOPIC, value=bytes([i]) * RECORD_BYTES, partition=partition)
    check(producer.flush(60) == 0, "records not delivered")

    errors = []
    consumer = Consumer(
        {
            "bootstrap.servers": KAFKA,
            "group.id": "fetch-max-bytes",
            "fetch.max.bytes": 1_000_000,
            "receive.message.max.bytes": 1_000_512,
            "error_cb": errors.append,
        }
    )
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(2)])
    got = []
    deadline = time.monotonic() + DEADLINE_S
    while len(got) < 2 * PER_PARTITION and time.monotonic() < deadline and not errors:
        message = consumer.poll(0.2)
        if message is None:
            continue
        if message.error() is not None:
            errors.append(message.error())
            continue
        got.append((message.partition(), message.offset(), len(message.value())))
    consumer.close()
    check(not errors, f"the consumer failed: {errors}")
    expected = sorted((p, o, RECORD_BYTES) for p in range(2) for o in range(PER_PARTITION))
    check(sorted(got) == expected, f"read {sorted(got)}")
    print("fetch_max_bytes confluent-kafka: every record, no answer over the limit")


run(main)
