"""Reads a tiered topic's partition 0 from offset 0 with kafka-python, the
old offsets coming from the remote tier, and prints what it read for the
Rust test to compare with what it produced: one JSON line per record
{"offset", "key", "value", "headers": [[name, value]]} with keys, values
and header values in base64 (null for null), then "read N records".

Usage: kafka_tiered_fetch.py TOPIC COUNT HTTP_URL KAFKA_ADDR
"""

import base64
import json
import sys
import time

from kafka import KafkaConsumer, TopicPartition

TOPIC, COUNT = sys.argv[1], int(sys.argv[2])
KAFKA = sys.argv[4]
DEADLINE_S = 90


def b64(data):
    return None if data is None else base64.b64encode(data).decode("ascii")


def main():
    consumer = KafkaConsumer(
        bootstrap_servers=KAFKA,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=200,
        request_timeout_ms=30000,
    )
    tp = TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    read = []
    deadline = time.monotonic() + DEADLINE_S
    while len(read) < COUNT and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=1000).values():
            read.extend(records)
    consumer.close()
    for r in read[:COUNT]:
        headers = [[name, b64(value)] for name, value in r.headers]
        print(json.dumps({"offset": r.offset, "key": b64(r.key), "value": b64(r.value), "headers": headers}))
    if len(read) < COUNT:
        sys.exit(f"read {len(read)} of {COUNT} records within {DEADLINE_S} s")
    print(f"read {COUNT} records")


main()
