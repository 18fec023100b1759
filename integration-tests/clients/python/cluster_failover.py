"""confluent-kafka across a failover of a three-node tidelog cluster
(issue 39). The Rust test kills the master (`kill -9`) while this runs.

- An idempotent producer (acks=all) sends 600 values, paced over about 12
  s, to the topic `t` (2 partitions), bootstrapping from all three nodes;
  librdkafka finds the new master by itself (NOT_LEADER_OR_FOLLOWER, a
  metadata refresh) and retries. Every value it reports delivered is
  noted with its partition and offset.
- A consumer of group `g` reads the topic meanwhile, committing as it
  goes; it follows the group coordinator to the new master by itself.
- At the end: every delivered value is in the log at the partition and
  offset the producer was told, once (a fresh reader of the whole topic),
  and the group's consumer saw every delivered value (at least once: a
  rejoin after the failover may read some again).

Usage: cluster_failover.py http://127.0.0.1:PORT BOOTSTRAP_SERVERS
"""

import sys
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from tidelog_check import check, run

BOOTSTRAP = sys.argv.pop(2)
TOPIC = "t"
COUNT = 600
DEADLINE_S = 120


def main(_base_url):
    bootstrap = BOOTSTRAP
    delivered = {}
    failed = []

    def on_delivery(err, msg):
        if err is not None:
            failed.append((msg.value(), str(err)))
        else:
            delivered[msg.value().decode()] = (msg.partition(), msg.offset())

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "message.timeout.ms": 90000,
            "linger.ms": 5,
        }
    )
    seen = set()
    stop = threading.Event()

    def consume():
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "g",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 200,
                "session.timeout.ms": 10000,
            }
        )
        consumer.subscribe([TOPIC])
        try:
            while not stop.is_set():
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    seen.add(msg.value().decode())
        finally:
            consumer.close()

    reader = threading.Thread(target=consume)
    reader.start()
    began = time.monotonic()
    for i in range(COUNT):
        producer.produce(TOPIC, value=f"v{i}".encode(), partition=i % 2, on_delivery=on_delivery)
        producer.poll(0)
        time.sleep(0.02)
    left = producer.flush(90)
    check(left == 0, f"{left} values never reported delivered or failed")
    check(not failed, f"delivery failed: {failed[:5]}")
    check(len(delivered) == COUNT, f"{len(delivered)} of {COUNT} delivered")

    while not set(delivered) <= seen and time.monotonic() - began < DEADLINE_S:
        time.sleep(0.2)
    stop.set()
    reader.join()
    missing = sorted(set(delivered) - seen)
    check(not missing, f"the group never saw {len(missing)} delivered values: {missing[:5]}")

    # A fresh reader of the whole topic: each value at its offset, once.
    at = {}
    fresh = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False})
    fresh.assign([TopicPartition(TOPIC, p, 0) for p in range(2)])
    # (The topic holds the Rust test's probes too.)
    while not set(delivered) <= set(at) and time.monotonic() - began < DEADLINE_S:
        msg = fresh.poll(0.5)
        if msg is None or msg.error() is not None:
            continue
        value = msg.value().decode()
        check(value not in at, f"{value} served twice: {at.get(value)} and {(msg.partition(), msg.offset())}")
        at[value] = (msg.partition(), msg.offset())
    fresh.close()
    for value, where in delivered.items():
        check(at.get(value) == where, f"{value}: delivered at {where}, served at {at.get(value)}")
    print(f"cluster_failover: {COUNT} delivered across the failover, each once at its offset, all consumed by the group")


if __name__ == "__main__":
    run(main)
