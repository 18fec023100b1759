"""Null header values across protocols, with confluent-kafka (librdkafka
sends a header `("a", None)` as value length -1; kafka-python 3's `send`
refuses a None header value, so it is not used here): a Kafka produce of a null value
between two headers of the same name reads over HTTP (binary and json
fetch) as `"value": null`, in order; an HTTP produce with `"value": null`
(binary and json embedded formats) reads in the Kafka consumer as `None`;
and on a compact topic the null survives a compaction.

Usage: null_headers.py http://127.0.0.1:PORT 127.0.0.1:KAFKA_PORT
"""

import sys
import time

import requests
from confluent_kafka import Consumer, Producer, TopicPartition

from tidelog_check import (
    BINARY,
    JSON,
    REQUEST_TIMEOUT_S,
    b64,
    check,
    create_topic,
    expect_status,
    fetch_all,
    run,
)

KAFKA = sys.argv.pop(2) if len(sys.argv) == 3 else None

# What the Kafka producer sends: a null between two "a"s, then an empty one.
KAFKA_HEADERS = [("a", b"1"), ("a", None), ("a", b"2"), ("e", b"")]
# The same, as HTTP answers it.
KAFKA_HEADERS_JSON = [
    {"name": "a", "value": b64(b"1")},
    {"name": "a", "value": None},
    {"name": "a", "value": b64(b"2")},
    {"name": "e", "value": ""},
]


def kafka_produce(topic, records):
    """Sends (key, value, headers) records to partition 0, in order;
    returns their offsets."""
    producer = Producer({"bootstrap.servers": KAFKA, "acks": "all", "enable.idempotence": False})
    answered, failures = {}, []

    def report(index):
        def on_delivery(err, message):
            if err is not None:
                failures.append(f"{topic}: delivery of record {index} failed: {err}")
            else:
                answered[index] = message.offset()

        return on_delivery

    for i, (key, value, headers) in enumerate(records):
        producer.produce(
            topic, key=key, value=value, headers=headers, partition=0, on_delivery=report(i)
        )
    remaining = producer.flush(30)
    check(remaining == 0, f"{topic}: {remaining} records not delivered in 30 s")
    check(not failures, "; ".join(failures))
    return [answered[i] for i in range(len(records))]


def kafka_consume(topic, count):
    """`count` records of partition 0 from offset 0 (assign), within a
    generous deadline."""
    consumer = Consumer(
        {
            "bootstrap.servers": KAFKA,
            "group.id": "unused-with-assign",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            # After the compaction offset 0 is gone; a fetch there reads on
            # from the next record kept (as Kafka), and if anything ever
            # answered out of range, start from the earliest, not the end.
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        records = []
        deadline = time.monotonic() + 60
        while len(records) < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            check(message.error() is None, f"{topic}: consume error {message.error()}")
            records.append(message)
        check(len(records) == count, f"{topic}: {len(records)} records consumed, {count} expected")
        return records
    finally:
        consumer.close()


def kafka_to_http(base_url):
    create_topic(base_url, "nh-kafka", 1)
    # A JSON value, so the json fetch can render it too.
    kafka_produce("nh-kafka", [(None, b'"v"', KAFKA_HEADERS)])
    for accept in (BINARY, JSON):
        got = fetch_all(base_url, "nh-kafka", 0, accept, 1, 10)[0]["headers"]
        check(got == KAFKA_HEADERS_JSON, f"HTTP fetch ({accept}) answered headers {got!r}")


def http_to_kafka(base_url):
    create_topic(base_url, "nh-http", 1)
    headers = [{"name": "b", "value": None}, {"name": "b", "value": b64(b"x")}]
    for content_type, value in ((BINARY, b64(b"bin")), (JSON, "json")):
        response = requests.post(
            f"{base_url}/topics/nh-http/partitions/0",
            json={"records": [{"value": value, "headers": headers}]},
            headers={"Content-Type": content_type},
            timeout=REQUEST_TIMEOUT_S,
        )
        expect_status(response, 200, f"produce ({content_type}) with a null header value")
    for record in kafka_consume("nh-http", 2):
        got = record.headers() or []
        check(got == [("b", None), ("b", b"x")], f"Kafka consumer read headers {got!r}")


def after_compaction(base_url):
    response = requests.post(
        f"{base_url}/v3/clusters/tidelog/topics",
        json={
            "topic_name": "nh-table",
            "partitions_count": 1,
            "configs": [{"name": "cleanup.policy", "value": "compact"}],
        },
        timeout=REQUEST_TIMEOUT_S,
    )
    expect_status(response, 201, "create compact topic nh-table")
    records = [(b"k", b"old", [("a", b"old")]), (b"k", b"new", KAFKA_HEADERS), (b"j", b"j", [])]
    offsets = kafka_produce("nh-table", records)
    # All three readable (copied into the compacted log) before the run.
    before = fetch_all(base_url, "nh-table", 0, BINARY, 3, 10)
    check(before[1]["headers"] == KAFKA_HEADERS_JSON, f"headers before {before[1]['headers']!r}")
    response = requests.post(
        f"{base_url}/v3/clusters/tidelog/topics/nh-table/compaction",
        json={"wait": True, "roll_active": True},
        timeout=REQUEST_TIMEOUT_S,
    )
    expect_status(response, 200, "compaction of nh-table")
    check(response.json().get("timed_out") is False, f"compaction answered {response.json()!r}")
    kept = fetch_all(base_url, "nh-table", 0, BINARY, 2, 10)
    check(
        [r["offset"] for r in kept] == offsets[1:],
        f"compaction kept offsets {[r['offset'] for r in kept]}, not {offsets[1:]}",
    )
    check(kept[0]["headers"] == KAFKA_HEADERS_JSON, f"compacted headers {kept[0]['headers']!r}")
    got = kafka_consume("nh-table", 2)[0].headers() or []
    check(got == KAFKA_HEADERS, f"Kafka consumer read compacted headers {got!r}")


def main(base_url):
    kafka_to_http(base_url)
    http_to_kafka(base_url)
    after_compaction(base_url)
    print("null_headers: null header values kept across Kafka, HTTP and compaction")


if __name__ == "__main__":
    run(main)
