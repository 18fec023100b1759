"""The transactions of testdata/datadir-v2 (issue 38's formats), written by
confluent-kafka's transactional producer for `generate_datadir_v2`: one
transaction committed and one aborted across `orders` (delete, two
partitions) and `ledger` (compact, one partition), and one left open in
`orders` partition 0 with a 15-minute timeout (the longest), which the
data dir keeps open: whoever starts it later finds it past its timeout.

Usage: datadir_v2_transactions.py HTTP_URL KAFKA_ADDR
"""

import sys

from confluent_kafka import Producer

from tidelog_check import check, run

KAFKA = sys.argv.pop(2)


def send(p, topic, partition, key, value):
    p.produce(topic, key=key.encode(), value=value.encode(), partition=partition)


def main(_base_url):
    p = Producer(
        {
            "bootstrap.servers": KAFKA,
            "transactional.id": "tx-v2",
            "transaction.timeout.ms": 900000,
            "linger.ms": 0,
        }
    )
    p.init_transactions(30)
    p.begin_transaction()
    send(p, "orders", 0, "o", "c0")
    send(p, "orders", 0, "o", "c1")
    send(p, "orders", 1, "o", "c2")
    send(p, "ledger", 0, "k1", "l1")
    send(p, "ledger", 0, "k2", "l2")
    check(p.flush(30) == 0, "the committed transaction's records were not delivered")
    p.commit_transaction(30)
    p.begin_transaction()
    send(p, "orders", 0, "o", "a0")
    send(p, "orders", 1, "o", "a1")
    send(p, "ledger", 0, "k1", "bad")
    check(p.flush(30) == 0, "the aborted transaction's records were not delivered")
    p.abort_transaction(30)
    p.begin_transaction()
    send(p, "orders", 0, "o", "o0")
    check(p.flush(30) == 0, "the open transaction's record was not delivered")
    print("datadir_v2_transactions: committed, aborted, one left open")


run(main)
