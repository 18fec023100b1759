"""Fences the transaction testdata/datadir-v2 holds open: a producer with
its transactional id `tx-v2` comes back (init_transactions), and the
coordinator, rebuilt from the data dir, aborts the previous epoch's open
transaction before it answers (unless its timeout had aborted it first).

Usage: datadir_v2_fence.py HTTP_URL KAFKA_ADDR
"""

import sys

from confluent_kafka import Producer

from tidelog_check import run

KAFKA = sys.argv.pop(2)


def main(_base_url):
    p = Producer({"bootstrap.servers": KAFKA, "transactional.id": "tx-v2"})
    p.init_transactions(60)
    print("datadir_v2_fence: tx-v2 is back at a new epoch")


run(main)
