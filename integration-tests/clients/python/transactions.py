"""Kafka transactions from confluent-kafka (librdkafka) against tidelog
(issue 38): a transactional producer commits, aborts and commits again
across two partitions; a read_committed consumer sees exactly the
committed records and a read_uncommitted one every record; HTTP's
`isolation_level=read_committed` fetch agrees; a second producer with the
same `transactional.id` fences the first (its next commit fails fatally);
a transaction left open past its `transaction.timeout.ms` is aborted by
the broker, and read_committed readers move past it without its records.

Usage: transactions.py http://127.0.0.1:PORT 127.0.0.1:KAFKA_PORT
"""

import sys
import time

import requests
from confluent_kafka import KafkaException, Producer

from tidelog_check import (
    BINARY,
    REQUEST_TIMEOUT_S,
    check,
    create_topic,
    expect_status,
    read_values,
    run,
)

KAFKA = sys.argv.pop(2)
TOPIC = "txn-out"
DEADLINE_S = 60


def producer(transactional_id, **extra):
    config = {
        "bootstrap.servers": KAFKA,
        "transactional.id": transactional_id,
        "linger.ms": 5,
    }
    config.update(extra)
    p = Producer(config)
    p.init_transactions(30)
    return p


def send(p, values):
    for i, value in enumerate(values):
        p.produce(TOPIC, key=f"k{i}".encode(), value=value.encode(), partition=i % 2)
    p.flush(30)


def http_values(base_url, partition, isolation):
    response = requests.get(
        f"{base_url}/topics/{TOPIC}/partitions/{partition}/records",
        params={"offset": 0, "timeout": 0, "isolation_level": isolation},
        headers={"Accept": BINARY},
        timeout=REQUEST_TIMEOUT_S,
    )
    expect_status(response, 200, f"HTTP fetch at {isolation}")
    import base64

    return sorted(base64.b64decode(r["value"]).decode() for r in response.json())


def main(base_url):
    create_topic(base_url, TOPIC, 2)
    a = producer("tx-a")
    committed = [f"c1-{i}" for i in range(10)]
    a.begin_transaction()
    send(a, committed)
    a.commit_transaction(30)
    aborted = [f"ab-{i}" for i in range(5)]
    a.begin_transaction()
    send(a, aborted)
    a.abort_transaction(30)
    second = [f"c2-{i}" for i in range(3)]
    a.begin_transaction()
    send(a, second)
    a.commit_transaction(30)
    want = sorted(committed + second)
    got = read_values(KAFKA, TOPIC, "read_committed", len(want))
    check(got == want, f"read_committed: expected {want}, got {got}")
    every = sorted(committed + aborted + second)
    got = read_values(KAFKA, TOPIC, "read_uncommitted", len(every))
    check(got == every, f"read_uncommitted: expected {every}, got {got}")
    http = sorted(http_values(base_url, 0, "read_committed") + http_values(base_url, 1, "read_committed"))
    check(http == want, f"HTTP read_committed: expected {want}, got {http}")

    # Zombie fencing: a new producer with the same id fences the old one.
    b = producer("tx-a")
    try:
        a.begin_transaction()
        send(a, ["zombie"])
        a.commit_transaction(10)
        raise AssertionError("the fenced producer's commit succeeded")
    except KafkaException as e:
        error = e.args[0]
        check(error.fatal() or error.code() in (90, 47), f"the zombie failed otherwise: {error}")
    b.begin_transaction()
    send(b, ["from-b"])
    b.commit_transaction(30)
    want = sorted(want + ["from-b"])
    got = read_values(KAFKA, TOPIC, "read_committed", len(want))
    check(got == want, f"after fencing: expected {want}, got {got}")

    # A transaction left open past its timeout is aborted by the broker.
    slow = producer("tx-slow", **{"transaction.timeout.ms": 2000})
    slow.begin_transaction()
    send(slow, ["late-0", "late-1"])
    after = producer("tx-after")
    after.begin_transaction()
    send(after, ["after-0"])
    after.commit_transaction(30)
    want = sorted(want + ["after-0"])
    deadline = time.monotonic() + DEADLINE_S
    while True:
        got = read_values(KAFKA, TOPIC, "read_committed", len(want))
        if got == want or time.monotonic() > deadline:
            break
        time.sleep(1)
    check(got == want, f"past the timeout: expected {want}, got {got}")
    try:
        slow.commit_transaction(10)
        raise AssertionError("a transaction the broker aborted was committed")
    except KafkaException:
        pass
    print("transactions confluent-kafka: committed seen once, aborted never, zombie fenced, timeout aborted")


run(main)
