"""kafka-python's transactional producer against tidelog (issue 38): a
commit, an abort and a commit across two partitions; kafka-python's
consumer at `isolation_level="read_committed"` sees exactly the
committed records, once each, and at read_uncommitted every record.

Usage: kafka_python_transactions.py http://127.0.0.1:PORT 127.0.0.1:KAFKA_PORT
"""

import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tidelog_check import check, create_topic, run

KAFKA = sys.argv.pop(2)
TOPIC = "txn-kafka-python"
DEADLINE_S = 60


def send(p, tag, count):
    for i in range(count):
        p.send(TOPIC, value=f"{tag}{i}".encode(), partition=i % 2)
    p.flush(30)


def read(isolation, expected):
    c = KafkaConsumer(
        bootstrap_servers=KAFKA,
        isolation_level=isolation,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    c.assign([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)])
    c.seek_to_beginning()
    values = []
    deadline = time.monotonic() + DEADLINE_S
    quiet_since = None
    while time.monotonic() < deadline:
        polled = c.poll(timeout_ms=300)
        batch = [r.value.decode() for rs in polled.values() for r in rs]
        values.extend(batch)
        if len(values) >= expected:
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since > 1:
                break
    c.close()
    return sorted(values)


def main(base_url):
    create_topic(base_url, TOPIC, 2)
    p = KafkaProducer(bootstrap_servers=KAFKA, transactional_id="kafka-python-tx")
    p.init_transactions()
    p.begin_transaction()
    send(p, "c1-", 6)
    p.commit_transaction()
    p.begin_transaction()
    send(p, "ab-", 4)
    p.abort_transaction()
    p.begin_transaction()
    send(p, "c2-", 4)
    p.commit_transaction()
    p.close()
    want = sorted([f"c1-{i}" for i in range(6)] + [f"c2-{i}" for i in range(4)])
    got = read("read_committed", len(want))
    check(got == want, f"read_committed: expected {want}, got {got}")
    every = sorted(want + [f"ab-{i}" for i in range(4)])
    got = read("read_uncommitted", len(every))
    check(got == every, f"read_uncommitted: expected {every}, got {got}")
    print("kafka_python_transactions: committed seen once, aborted never")


run(main)
