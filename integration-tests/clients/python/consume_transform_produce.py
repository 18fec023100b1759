"""Exactly-once consume-transform-produce with confluent-kafka (KIP-98,
KIP-447) against tidelog (issue 38): a consumer in group `ctp` reads
`ctp-in`, a transactional producer writes each record upper-cased to
`ctp-out` and commits the consumer's offsets in the same transaction
(`send_offsets_to_transaction`: AddOffsetsToTxn, TxnOffsetCommit). One
transaction is aborted midway, and the consumer rewinds to its committed
offsets, as an application that failed would. At the end a read_committed
reader of `ctp-out` finds every input record transformed exactly once,
none of the aborted ones, and the group's committed offsets are the input's
end, as HTTP reports them too.

Usage: consume_transform_produce.py http://127.0.0.1:PORT 127.0.0.1:KAFKA_PORT
"""

import sys
import time

import requests
from confluent_kafka import Consumer, Producer, TopicPartition

from tidelog_check import (
    BINARY,
    REQUEST_TIMEOUT_S,
    b64,
    check,
    create_topic,
    expect_status,
    read_values,
    run,
)

KAFKA = sys.argv.pop(2)
SOURCE = "ctp-in"
SINK = "ctp-out"
GROUP = "ctp"
RECORDS = 30
DEADLINE_S = 60


def produce_input(base_url):
    for partition in (0, 1):
        records = [
            {"value": b64(f"p{partition}-r{i}".encode())} for i in range(RECORDS // 2)
        ]
        response = requests.post(
            f"{base_url}/topics/{SOURCE}/partitions/{partition}",
            json={"records": records},
            headers={"Content-Type": BINARY},
            timeout=REQUEST_TIMEOUT_S,
        )
        expect_status(response, 200, "produce the input")


def consumer():
    c = Consumer(
        {
            "bootstrap.servers": KAFKA,
            "group.id": GROUP,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 300,
        }
    )
    c.subscribe([SOURCE])
    return c


def poll_some(c, up_to):
    """Up to `up_to` records, polling until some come (bounded)."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        batch = [m for m in c.consume(up_to, 0.5) if m.error() is None]
        if batch:
            return batch
    raise AssertionError("no input record within the deadline")


def transform(p, batch):
    for m in batch:
        p.produce(SINK, key=m.value(), value=m.value().upper(), partition=m.partition())


def positions(c):
    return c.position(c.assignment())


def main(base_url):
    create_topic(base_url, SOURCE, 2)
    create_topic(base_url, SINK, 2)
    produce_input(base_url)
    p = Producer({"bootstrap.servers": KAFKA, "transactional.id": "ctp-app", "linger.ms": 5})
    p.init_transactions(30)
    c = consumer()
    done = 0
    aborted_once = False
    deadline = time.monotonic() + DEADLINE_S
    while done < RECORDS and time.monotonic() < deadline:
        batch = poll_some(c, 7)
        p.begin_transaction()
        transform(p, batch)
        p.send_offsets_to_transaction(positions(c), c.consumer_group_metadata(), 30)
        if not aborted_once and done >= 7:
            # The application fails here: nothing of this transaction
            # counts, and it resumes from its committed offsets.
            p.abort_transaction(30)
            aborted_once = True
            committed = c.committed(c.assignment(), timeout=30)
            for tp in committed:
                c.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))
            continue
        p.commit_transaction(30)
        done += len(batch)
    check(aborted_once, "no transaction was aborted")
    check(done == RECORDS, f"transformed {done} of {RECORDS} input records")
    want = sorted(f"P{p_}-R{i}" for p_ in (0, 1) for i in range(RECORDS // 2))
    got = read_values(KAFKA, SINK, "read_committed", RECORDS)
    check(got == want, f"read_committed output: expected {want}, got {got}")
    committed = c.committed([TopicPartition(SOURCE, 0), TopicPartition(SOURCE, 1)], timeout=30)
    offsets = sorted((tp.partition, tp.offset) for tp in committed)
    check(offsets == [(0, RECORDS // 2), (1, RECORDS // 2)], f"committed offsets: {offsets}")
    response = requests.get(
        f"{base_url}/consumer-groups/{GROUP}/offsets",
        params={"topic": SOURCE},
        timeout=REQUEST_TIMEOUT_S,
    )
    expect_status(response, 200, "HTTP committed offsets")
    http = sorted((o["partition"], o["offset"]) for o in response.json()["offsets"])
    check(http == offsets, f"HTTP committed offsets: {http}, Kafka: {offsets}")
    c.close()
    print("consume_transform_produce confluent-kafka: every input once in the output, offsets committed with it")


run(main)
