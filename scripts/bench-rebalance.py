"""A rebalance of a 10-member consumer group, classic against KIP-848, in
one run (issue 40's benchmark): nine confluent-kafka (librdkafka)
members share a topic's partitions; a tenth joins. Two figures: the time
from the tenth member's subscribe() to every partition being assigned
again, one member each, the tenth holding its share; and the
partition-time no member owned meanwhile (how much consumption the
rebalance stopped).

Both protocols heartbeat at the same interval (the classic members'
`heartbeat.interval.ms`, the KIP-848 coordinator's
`groups.consumer_heartbeat_interval_ms`, set by the caller), so what
differs is the protocol: a classic (eager) rebalance takes every
partition from every member and waits for all ten to rejoin and sync
(stop-the-world); a KIP-848 rebalance moves only the partitions the new
member takes, and the others are never stopped. Rounds alternate the
protocols, so drift on a shared machine hits both; each round uses a new
group. Prints each round, then each protocol's median and the ratio.

Every member runs its own poll loop (a thread each), as an application
would; assignments are read from each member's own thread. With
WORK_MS > 0 each record read costs that much (the application's
processing: a member hears of a rebalance only when its poll loop comes
back), and a producer keeps every partition fed meanwhile.

    python bench-rebalance.py BOOTSTRAP TOPIC PARTITIONS HEARTBEAT_MS [ROUNDS] [WORK_MS]
"""

import random
import statistics
import sys
import threading
import time

from confluent_kafka import Consumer, Producer

MEMBERS = 10
STABLE_TIMEOUT_S = 120.0


class Member(threading.Thread):
    def __init__(self, bootstrap, topic, group, protocol, heartbeat_ms, work_ms):
        super().__init__(daemon=True)
        self.work_s = work_ms / 1000
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "latest",
        }
        if protocol == "consumer":
            config["group.protocol"] = "consumer"
        else:
            config["session.timeout.ms"] = max(6000, heartbeat_ms * 10)
            config["heartbeat.interval.ms"] = heartbeat_ms
        self.consumer = Consumer(config)
        self.topic = topic
        self.owned = frozenset()
        self.stop = threading.Event()
        self.subscribed_at = None

    def run(self):
        self.subscribed_at = time.monotonic()
        self.consumer.subscribe([self.topic])
        while not self.stop.is_set():
            message = self.consumer.poll(0.02)
            self.owned = frozenset(p.partition for p in self.consumer.assignment())
            if message is not None and self.work_s > 0:
                time.sleep(self.work_s)
        self.consumer.close()


def settled(members, partitions):
    """Every partition owned by exactly one member, each member with some."""
    owned = [p for m in members for p in m.owned]
    return (
        len(owned) == partitions
        and set(owned) == set(range(partitions))
        and all(m.owned for m in members)
    )


def wait(members, partitions, what):
    """Waits until `settled`; returns when, and the partition-milliseconds
    no member owned meanwhile (sampled every 2 ms)."""
    deadline = time.monotonic() + STABLE_TIMEOUT_S
    unowned_ms = 0.0
    last = time.monotonic()
    while not settled(members, partitions):
        now = time.monotonic()
        if now > deadline:
            sys.exit(f"{what}: not settled in {STABLE_TIMEOUT_S} s: {[sorted(m.owned) for m in members]}")
        owned = set().union(*(m.owned for m in members))
        unowned_ms += (partitions - len(owned)) * (now - last) * 1000
        last = now
        time.sleep(0.002)
    return time.monotonic(), unowned_ms


class Feed(threading.Thread):
    """A record to every partition every 20 ms, while members work."""

    def __init__(self, bootstrap, topic, partitions):
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic, self.partitions = topic, partitions
        self.stop = threading.Event()

    def run(self):
        while not self.stop.wait(0.02):
            for p in range(self.partitions):
                self.producer.produce(self.topic, value=b"x", partition=p)
            self.producer.poll(0)
        self.producer.flush(10)


def round_once(bootstrap, topic, partitions, protocol, heartbeat_ms, work_ms, n):
    group = f"bench-rebalance-{protocol}-{n}-{time.time_ns()}"
    members = [
        Member(bootstrap, topic, group, protocol, heartbeat_ms, work_ms) for _ in range(MEMBERS - 1)
    ]
    for m in members:
        m.start()
    wait(members, partitions, f"{protocol}: nine members")
    # Let the group sit stable for a couple of heartbeats first, then
    # join at a random phase of the members' heartbeats (a whole number
    # of intervals would always land just after, or before, them).
    time.sleep((2 + random.random()) * heartbeat_ms / 1000)
    tenth = Member(bootstrap, topic, group, protocol, heartbeat_ms, work_ms)
    tenth.start()
    while tenth.subscribed_at is None:
        time.sleep(0.001)
    done, unowned_ms = wait(members + [tenth], partitions, f"{protocol}: ten members")
    took_ms = (done - tenth.subscribed_at) * 1000
    for m in members + [tenth]:
        m.stop.set()
    for m in members + [tenth]:
        m.join(timeout=30)
    return took_ms, unowned_ms


def main():
    bootstrap, topic = sys.argv[1], sys.argv[2]
    partitions, heartbeat_ms = int(sys.argv[3]), int(sys.argv[4])
    rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 5
    work_ms = int(sys.argv[6]) if len(sys.argv) > 6 else 0
    if not (
        MEMBERS <= partitions <= 10_000
        and 10 <= heartbeat_ms <= 60_000
        and 1 <= rounds <= 100
        and 0 <= work_ms <= 10_000
    ):
        sys.exit("PARTITIONS 10..10000, HEARTBEAT_MS 10..60000, ROUNDS 1..100, WORK_MS 0..10000")
    feed = None
    if work_ms > 0:
        feed = Feed(bootstrap, topic, partitions)
        feed.start()
    took = {"classic": [], "consumer": []}
    unowned = {"classic": [], "consumer": []}
    for n in range(rounds):
        for protocol in ("classic", "consumer") if n % 2 == 0 else ("consumer", "classic"):
            ms, idle = round_once(bootstrap, topic, partitions, protocol, heartbeat_ms, work_ms, n)
            took[protocol].append(ms)
            unowned[protocol].append(idle)
            print(
                f"round {n + 1}/{rounds} {protocol:8} rebalance {ms:6.0f} ms, "
                f"partitions without an owner {idle:7.0f} partition-ms",
                flush=True,
            )
    for protocol in ("classic", "consumer"):
        t, u = took[protocol], unowned[protocol]
        print(
            f"{protocol:8} median rebalance {statistics.median(t):.0f} ms "
            f"(min {min(t):.0f}, max {max(t):.0f}); median without an owner "
            f"{statistics.median(u):.0f} partition-ms"
        )
    if feed is not None:
        feed.stop.set()
        feed.join(timeout=30)
    ratio = statistics.median(took["consumer"]) / statistics.median(took["classic"])
    idle_ratio = statistics.median(unowned["consumer"]) / max(1.0, statistics.median(unowned["classic"]))
    print(f"KIP-848 / classic: rebalance {ratio:.2f}, partition-time without an owner {idle_ratio:.3f}")


main()
