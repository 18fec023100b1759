"""A transaction open when the server is killed with `kill -9` (issue 38),
from confluent-kafka, in two phases the Rust test runs around the kill:

- `before`: a transactional producer (`tx-kill`) commits transaction A
  (a0..a9), then begins B, sends b0..b9 (acknowledged under `flush:
  sync`) and exits without ending it: B is open when the server dies.
- `after` (the server restarted): a new producer of the same
  transactional id initializes, which makes the broker abort B and fence
  its epoch (the client retries its CONCURRENT_TRANSACTIONS by itself),
  and commits C (c0..c9). A read_committed reader then finds exactly A's
  and C's records, once each, none of B's; a read_uncommitted one finds
  B's too, in the log as written.

Usage: transaction_kill9.py before|after http://127.0.0.1:PORT 127.0.0.1:KAFKA_PORT
"""

import sys

from confluent_kafka import Producer

from tidelog_check import check, create_topic, read_values, run

PHASE = sys.argv.pop(1)
KAFKA = sys.argv.pop(2)
TOPIC = "txkill"


def producer():
    p = Producer({"bootstrap.servers": KAFKA, "transactional.id": "tx-kill", "linger.ms": 5})
    p.init_transactions(60)
    return p


def send(p, tag):
    for i in range(10):
        p.produce(TOPIC, value=f"{tag}{i}".encode(), partition=i % 2)
    check(p.flush(30) == 0, f"{tag}: records not acknowledged")


def main(base_url):
    if PHASE == "before":
        create_topic(base_url, TOPIC, 2)
        p = producer()
        p.begin_transaction()
        send(p, "a")
        p.commit_transaction(30)
        p.begin_transaction()
        send(p, "b")
        # Left open: the server is killed next.
        print("transaction_kill9 before: A committed, B open")
        return
    p = producer()
    p.begin_transaction()
    send(p, "c")
    p.commit_transaction(30)
    tag = lambda t: [f"{t}{i}" for i in range(10)]
    want = sorted(tag("a") + tag("c"))
    got = read_values(KAFKA, TOPIC, "read_committed", len(want))
    check(got == want, f"read_committed after the kill: expected {want}, got {got}")
    every = sorted(tag("a") + tag("b") + tag("c"))
    got = read_values(KAFKA, TOPIC, "read_uncommitted", len(every))
    check(got == every, f"read_uncommitted after the kill: expected {every}, got {got}")
    print("transaction_kill9 after: A and C once each, B aborted")


run(main)
