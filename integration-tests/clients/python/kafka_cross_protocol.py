"""Records and offsets crossing between HTTP and Kafka, with kafka-python or
confluent-kafka, where kafka_clients.rs's scripts do not go already:

- records produced over HTTP in the json embedded format read by the Kafka
  consumer: the key and value bytes are the compact JSON text API.md
  describes (members sorted, numbers as written, strings in UTF-8), the
  headers (a duplicated name, in order) and timestamps as sent; a null
  value a null;
- records produced over Kafka read over HTTP in the binary format (the
  same bytes, headers, timestamps) and, being JSON text, in the json format;
- an offset committed by a Kafka consumer (with metadata) read by the ext
  route `GET /consumer-groups/{g}/offsets`, and an ext commit (`POST`, with
  metadata) answered by the Kafka consumer's `committed()`.

Usage: kafka_cross_protocol.py kafka-python|confluent-kafka HTTP_URL KAFKA_ADDR
"""

import base64
import sys
import time

import requests

from tidelog_check import BINARY, JSON, REQUEST_TIMEOUT_S, b64, check, create_topic, expect_status, fetch_all, run

CLIENT = sys.argv.pop(1) if len(sys.argv) == 4 else None
KAFKA = sys.argv.pop(2) if len(sys.argv) == 3 else None
DEADLINE_S = 60

# (key JSON as sent or None, value JSON as sent, the key and value bytes a
# Kafka consumer must read), spelled out rather than computed so that the
# canonical form is what is checked.
JSON_SAMPLES = [
    (
        '{"b": 1, "a": [1, 2.50]}',
        '{"z": "h\\u00e9llo \\"q\\"", "n": 1e2, "big": 18446744073709551616}',
        b'{"a":[1,2.50],"b":1}',
        '{"big":18446744073709551616,"n":1e2,"z":"h\u00e9llo \\"q\\""}'.encode(),
    ),
    ('"k2"', '[true, null, "x"]', b'"k2"', b'[true,null,"x"]'),
    (None, "42", None, b"42"),
    ("7", "null", b"7", None),
]
HEADERS = [("h", b"\x01"), ("h", b"\x00\xff"), ("other", b"x")]


def consumer_kafka_python(group):
    from kafka import KafkaConsumer

    return KafkaConsumer(bootstrap_servers=KAFKA, group_id=group, enable_auto_commit=False)


def read_kafka_python(topic, count):
    """`count` records from offset 0 by assign: (offset, key, value,
    headers, timestamp)."""
    from kafka import TopicPartition

    consumer = consumer_kafka_python(None)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got = []
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < count:
            check(time.monotonic() < deadline, f"{topic}: {len(got)} of {count} records consumed")
            for batch in consumer.poll(timeout_ms=500).values():
                got.extend((r.offset, r.key, r.value, list(r.headers), r.timestamp) for r in batch)
        return got
    finally:
        consumer.close()


def read_confluent_kafka(topic, count):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": KAFKA, "group.id": "unused-cross", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = []
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < count:
            check(time.monotonic() < deadline, f"{topic}: {len(got)} of {count} records consumed")
            m = consumer.poll(0.5)
            if m is None:
                continue
            check(m.error() is None, f"{topic}: consume error {m.error()}")
            got.append((m.offset(), m.key(), m.value(), m.headers() or [], m.timestamp()[1]))
        return got
    finally:
        consumer.close()


def produce_kafka_python(topic, records):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=KAFKA, acks="all", enable_idempotence=False)
    futures = [
        producer.send(topic, key=k, value=v, headers=h, partition=0, timestamp_ms=t) for k, v, h, t in records
    ]
    producer.flush(timeout=30)
    offsets = [f.get(timeout=30).offset for f in futures]
    producer.close(timeout=30)
    return offsets


def produce_confluent_kafka(topic, records):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": KAFKA, "acks": "all", "enable.idempotence": False})
    offsets, failures = [None] * len(records), []

    def report(i):
        def on_delivery(err, message):
            if err is not None:
                failures.append(str(err))
            else:
                offsets[i] = message.offset()

        return on_delivery

    for i, (k, v, h, t) in enumerate(records):
        producer.produce(topic, key=k, value=v, headers=h, partition=0, timestamp=t, on_delivery=report(i))
    check(producer.flush(30) == 0, f"{topic}: records not delivered in 30 s")
    check(not failures, f"{topic}: {failures[:3]}")
    return offsets


def commit_kafka_python(group, topic, offset, metadata):
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata

    consumer = consumer_kafka_python(group)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.commit({tp: OffsetAndMetadata(offset, metadata, -1)})
    finally:
        consumer.close()


def committed_kafka_python(group, topic):
    from kafka import TopicPartition

    consumer = consumer_kafka_python(group)
    try:
        found = consumer.committed(TopicPartition(topic, 0), metadata=True)
        return (found.offset, found.metadata) if found is not None else None
    finally:
        consumer.close()


def commit_confluent_kafka(group, topic, offset, metadata):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": KAFKA, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        consumer.commit(offsets=[TopicPartition(topic, 0, offset, metadata=metadata)], asynchronous=False)
    finally:
        consumer.close()


def committed_confluent_kafka(group, topic):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": KAFKA, "group.id": group, "enable.auto.commit": False})
    try:
        [found] = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        check(found.error is None, f"committed() failed: {found.error}")
        return (found.offset, found.metadata)
    finally:
        consumer.close()


CLIENTS = {
    "kafka-python": (read_kafka_python, produce_kafka_python, commit_kafka_python, committed_kafka_python),
    "confluent-kafka": (read_confluent_kafka, produce_confluent_kafka, commit_confluent_kafka, committed_confluent_kafka),
}


def http_json_to_kafka(base_url, topic, read):
    create_topic(base_url, topic, 1)
    records, expected = [], []
    for i, (key, value, key_bytes, value_bytes) in enumerate(JSON_SAMPLES):
        timestamp = 1_660_000_000_000 + 1000 - i  # decreasing: kept as sent
        headers = HEADERS[: i + 1]
        fields = [f'"value": {value}', f'"timestamp": {timestamp}']
        if key is not None:
            fields.append(f'"key": {key}')
        fields.append('"headers": [' + ", ".join(f'{{"name": "{n}", "value": "{b64(v)}"}}' for n, v in headers) + "]")
        records.append("{" + ", ".join(fields) + "}")
        expected.append((i, key_bytes, value_bytes, headers, timestamp))
    response = requests.post(
        f"{base_url}/topics/{topic}/partitions/0",
        data='{"records": [' + ", ".join(records) + "]}",
        headers={"Content-Type": JSON},
        timeout=REQUEST_TIMEOUT_S,
    )
    expect_status(response, 200, f"json produce to {topic}")
    got = read(topic, len(expected))
    for fetched, want in zip(got, expected):
        check(fetched == want, f"{topic}: {CLIENT} read {fetched}, HTTP produced {want}")
    print(f"{topic}: {len(expected)} records produced over HTTP (json format) read by {CLIENT}, the same bytes")


def kafka_to_http(base_url, topic, produce):
    create_topic(base_url, topic, 1)
    sent = [
        (b'{"id":1}', b'{"v":[1,2]}', [("h", b"1"), ("h", b"2")], 1_670_000_000_500),
        (None, b'"text"', [], 1_670_000_000_100),
        (b"2", None, [("only", b"\x80")], 1_670_000_000_300),
    ]
    offsets = produce(topic, sent)
    check(offsets == list(range(len(sent))), f"{topic}: produce answered offsets {offsets}")
    unb64 = lambda text: None if text is None else base64.b64decode(text)  # noqa: E731
    for record, (key, value, headers, timestamp) in zip(fetch_all(base_url, topic, 0, BINARY, len(sent), 100), sent):
        got = (
            unb64(record.get("key")),
            unb64(record.get("value")),
            [(h["name"], unb64(h["value"])) for h in record.get("headers") or []],
            record["timestamp"],
        )
        check(got == (key, value, headers, timestamp), f"{topic}@{record['offset']} over HTTP: {got}")
    # The same records in the json format: their bytes are JSON text.
    as_json = [(r.get("key"), r.get("value")) for r in fetch_all(base_url, topic, 0, JSON, len(sent), 100)]
    check(
        as_json == [({"id": 1}, {"v": [1, 2]}), (None, "text"), (2, None)],
        f"{topic} over HTTP in the json format: {as_json}",
    )
    print(f"{topic}: {len(sent)} records produced by {CLIENT} read over HTTP (binary and json formats)")


def group_offsets(base_url, topic, commit, committed):
    group = f"{topic}-group"
    commit(group, topic, 3, "from kafka")
    # confluent-kafka hands librdkafka the metadata with its C string's
    # terminator counted in its size, so its commit carries that NUL on the
    # wire (kafka-python's does not); the ext route answers the bytes sent.
    sent = "from kafka\x00" if CLIENT == "confluent-kafka" else "from kafka"
    response = requests.get(f"{base_url}/consumer-groups/{group}/offsets", timeout=REQUEST_TIMEOUT_S)
    expect_status(response, 200, "ext group offsets")
    offsets = response.json()["offsets"]
    check(
        offsets == [{"topic": topic, "partition": 0, "offset": 3, "metadata": sent}],
        f"the ext route answers {offsets} for {CLIENT}'s commit of 3",
    )
    response = requests.post(
        f"{base_url}/consumer-groups/{group}/offsets",
        json={"offsets": [{"topic": topic, "partition": 0, "offset": 2, "metadata": "from http"}]},
        timeout=REQUEST_TIMEOUT_S,
    )
    expect_status(response, 204, "ext commit")
    found = committed(group, topic)
    check(found == (2, "from http"), f"{CLIENT}'s committed() answers {found} after the ext commit of 2")
    print(f"{group}: a Kafka commit read by the ext route, an ext commit by {CLIENT}'s committed()")


def main(base_url):
    check(CLIENT in CLIENTS, "usage: kafka_cross_protocol.py kafka-python|confluent-kafka HTTP_URL KAFKA_ADDR")
    read, produce, commit, committed = CLIENTS[CLIENT]
    http_json_to_kafka(base_url, f"xp-json-{CLIENT}", read)
    kafka_to_http(base_url, f"xp-kafka-{CLIENT}", produce)
    group_offsets(base_url, f"xp-kafka-{CLIENT}", commit, committed)
    print("kafka_cross_protocol: every crossing checked")


if __name__ == "__main__":
    run(main)
