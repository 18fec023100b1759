"""A compact topic written by transactions, with confluent-kafka (issue 38;
docs/compaction.md, "Transactions"): a transactional producer commits
every key of `compacted-txn` (one partition; the Rust test's config gives
it small segments, a small dirty ratio and a short segment.ms, so the
LogCleaner cleans it by itself), aborts new values of half the keys, then
commits new values of two others. A read_committed consumer never sees an
aborted value; once the cleaner has been through (HTTP reads one record
per key, an aborted one never among them), it reads from the beginning
exactly each key's newest committed value: the aborted records superseded
nothing, and the cleaner dropped them.

Usage: compact_transactions.py HTTP_URL KAFKA_ADDR
"""

import sys
import time

from confluent_kafka import Producer

from tidelog_check import check, http_log, read_values, run

KAFKA = sys.argv.pop(2)
TOPIC = "compacted-txn"
KEYS = 8
DEADLINE_S = 60
# Long enough that each transaction fills several 1 KiB segments.
PAD = "." * 200


def send(p, values):
    for key, value in values.items():
        p.produce(TOPIC, key=key.encode(), value=(value + PAD).encode(), partition=0)
    p.flush(30)


def http_values(base_url):
    """Every value HTTP reads of the partition (read_uncommitted), sorted."""
    return sorted(value.decode().rstrip(".") for _, _, value in http_log(base_url, TOPIC))


def main(base_url):
    p = Producer({"bootstrap.servers": KAFKA, "transactional.id": "tx-compact", "linger.ms": 5})
    p.init_transactions(30)
    newest = {f"k{i}": f"c1-k{i}" for i in range(KEYS)}
    p.begin_transaction()
    send(p, newest)
    p.commit_transaction(30)
    aborted = {f"k{i}": f"ab-k{i}" for i in range(KEYS // 2)}
    p.begin_transaction()
    send(p, aborted)
    p.abort_transaction(30)
    second = {f"k{i}": f"c2-k{i}" for i in (KEYS // 2, KEYS // 2 + 1)}
    p.begin_transaction()
    send(p, second)
    p.commit_transaction(30)
    newest.update(second)
    want = sorted(newest.values())

    # Before or during cleaning: no aborted value, every key's newest
    # committed one among what is read.
    got = [v.rstrip(".") for v in read_values(KAFKA, TOPIC, "read_committed", len(want), partitions=(0,))]
    check(not any(v.startswith("ab-") for v in got), f"read_committed saw an aborted value: {got}")
    check(set(want) <= set(got), f"read_committed: expected {want} among {got}")

    deadline = time.monotonic() + DEADLINE_S
    while True:
        log = http_values(base_url)
        if log == want or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    check(log == want, f"not cleaned to one committed record per key within {DEADLINE_S} s: {log}")
    got = [v.rstrip(".") for v in read_values(KAFKA, TOPIC, "read_committed", len(want), partitions=(0,))]
    check(got == want, f"read_committed after cleaning: expected {want}, got {got}")
    print("compact_transactions: aborted values never read, cleaned to each key's newest committed value")


run(main)
