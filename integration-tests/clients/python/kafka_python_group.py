"""kafka-python consumers in one group against tidelog's Kafka listener.

Three `KafkaConsumer(group_id=..., enable_auto_commit=False)`, each in its
own thread, subscribe to a 6-partition topic; a third joins (a
rebalance) and later one leaves (another), with records produced in every
phase. Each consumer commits what it consumed after every poll. Checked:
every record is consumed by the group, and a record delivered again
(after a rebalance) is never one the group had committed past (the
uncommitted tail is all a rebalance may repeat); no consumer reads its own
record twice. Then every consumer closes, a new one joins and resumes at
the committed offsets; the offsets the Kafka group committed are the ones
the ext HTTP route `GET /consumer-groups/{g}/offsets` answers; an offset
committed over the ext route (`POST`, the group empty) is where a new
Kafka consumer of the group starts.

Usage: kafka_python_group.py http://127.0.0.1:PORT 127.0.0.1:KAFKA_PORT
"""

import sys
import threading
import time

import requests
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from tidelog_check import REQUEST_TIMEOUT_S, check, create_topic, expect_status, run

KAFKA = sys.argv.pop(2) if len(sys.argv) == 3 else None
TOPIC = "kgroup"
PARTITIONS = 6
GROUP = "kgroup-consumers"
DEADLINE_S = 120


class Deliveries:
    """What the group consumed and committed, shared by the consumer
    threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.seen = {}  # (partition, offset) -> [consumer names]
        self.committed = {p: 0 for p in range(PARTITIONS)}  # the group's, by successful commits
        self.errors = []

    def delivered(self, name, partition, offset):
        with self.lock:
            if offset < self.committed[partition]:
                self.errors.append(
                    f"{name} got {TOPIC}/{partition}@{offset}, below the group's commit "
                    f"{self.committed[partition]}"
                )
            names = self.seen.setdefault((partition, offset), [])
            if name in names:
                self.errors.append(f"{name} got {TOPIC}/{partition}@{offset} twice")
            names.append(name)

    def commit_landed(self, offsets):
        with self.lock:
            for partition, offset in offsets.items():
                self.committed[partition] = max(self.committed[partition], offset)

    def count(self):
        with self.lock:
            return len(self.seen)


def new_consumer(name):
    return KafkaConsumer(
        TOPIC,
        bootstrap_servers=KAFKA,
        group_id=GROUP,
        client_id=name,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=10_000,
        heartbeat_interval_ms=300,
        max_poll_records=25,
    )


class Member(threading.Thread):
    """One consumer: poll, note every record, commit what it polled."""

    def __init__(self, name, deliveries):
        super().__init__(name=name, daemon=True)
        self.deliveries = deliveries
        self.stop = threading.Event()
        self.failure = None
        self.commit_failures = 0

    def run(self):
        consumer = new_consumer(self.name)
        try:
            while not self.stop.is_set():
                batches = consumer.poll(timeout_ms=200)
                offsets = {}
                for tp, records in batches.items():
                    for record in records:
                        self.deliveries.delivered(self.name, tp.partition, record.offset)
                    offsets[tp] = OffsetAndMetadata(records[-1].offset + 1, "", -1)
                if not offsets:
                    continue
                try:
                    consumer.commit(offsets)
                except Exception:  # CommitFailedError in a rebalance: the tail is read again
                    self.commit_failures += 1
                    continue
                self.deliveries.commit_landed({tp.partition: om.offset for tp, om in offsets.items()})
        except Exception as e:  # reported by the main thread
            self.failure = repr(e)
        finally:
            consumer.close()  # LeaveGroup

    def leave(self):
        self.stop.set()
        self.join(timeout=60)
        check(not self.is_alive(), f"{self.name} did not close within a minute")
        check(self.failure is None, f"{self.name} failed: {self.failure}")


def produce(producer, start, count):
    """`count` records with values `start..start+count`, spread over the
    partitions round robin; acknowledged before it returns."""
    futures = [
        producer.send(TOPIC, value=str(i).encode(), partition=i % PARTITIONS)
        for i in range(start, start + count)
    ]
    producer.flush(timeout=30)
    for f in futures:
        f.get(timeout=30)
    return start + count


def wait_for(what, condition):
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        check(time.monotonic() < deadline, f"timed out waiting for {what}")
        time.sleep(0.1)


def group_members(base_url):
    response = requests.get(f"{base_url}/consumer-groups/{GROUP}", timeout=REQUEST_TIMEOUT_S)
    if response.status_code != 200:
        return -1
    return len(response.json().get("members", []))


def ext_offsets(base_url):
    response = requests.get(f"{base_url}/consumer-groups/{GROUP}/offsets", timeout=REQUEST_TIMEOUT_S)
    expect_status(response, 200, "ext group offsets")
    return {o["partition"]: o["offset"] for o in response.json()["offsets"] if o["topic"] == TOPIC}


def end_offsets(produced):
    """Each partition's end after `produced` records spread round robin."""
    return {p: len(range(p, produced, PARTITIONS)) for p in range(PARTITIONS)}


def rebalance_phases(base_url, producer):
    deliveries = Deliveries()
    members = [Member("c1", deliveries), Member("c2", deliveries)]
    for m in members:
        m.start()
    produced = produce(producer, 0, 120)
    wait_for("120 records consumed by two members", lambda: deliveries.count() == produced)

    joiner = Member("c3", deliveries)
    joiner.start()
    members.append(joiner)
    wait_for("three members in the group", lambda: group_members(base_url) == 3)
    produced = produce(producer, produced, 180)
    wait_for("300 records consumed after c3 joined", lambda: deliveries.count() == produced)

    members[1].leave()
    wait_for("two members in the group", lambda: group_members(base_url) == 2)
    produced = produce(producer, produced, 180)
    wait_for("480 records consumed after c2 left", lambda: deliveries.count() == produced)
    for m in (members[0], members[2]):
        m.leave()

    check(not deliveries.errors, "; ".join(deliveries.errors[:5]))
    # The rebalances moved partitions: the joiner read some records.
    by_c3 = sum(1 for names in deliveries.seen.values() if "c3" in names)
    check(by_c3 > 0, "c3 joined but was given no records")
    missing = [
        (p, o) for p, end in end_offsets(produced).items() for o in range(end) if (p, o) not in deliveries.seen
    ]
    check(not missing, f"never consumed: {missing[:10]}")
    again = sum(len(names) - 1 for names in deliveries.seen.values())
    print(
        f"{produced} records consumed by a group of three across a join and a leave "
        f"({again} read again from uncommitted tails, "
        f"{sum(m.commit_failures for m in members)} commits refused in rebalances)"
    )
    # Everything was committed by the last owners before they closed.
    wait_for("the group's last commits", lambda: deliveries.committed == end_offsets(produced))
    return produced


def consume_fresh(name, until):
    """A new member of the group reads until `until(records)`; the first
    offset it read of each partition and every record."""
    consumer = new_consumer(name)
    records = []
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not until(records):
            check(time.monotonic() < deadline, f"{name}: timed out, {len(records)} records read")
            for batch in consumer.poll(timeout_ms=200).values():
                records.extend(batch)
        consumer.commit()
    finally:
        consumer.close()
    first = {}
    for r in records:
        first.setdefault(r.partition, r.offset)
    return first, records


def main(base_url):
    check(KAFKA is not None, "usage: kafka_python_group.py HTTP_URL KAFKA_ADDR")
    create_topic(base_url, TOPIC, PARTITIONS)
    producer = KafkaProducer(bootstrap_servers=KAFKA, acks="all", enable_idempotence=False)
    produced = rebalance_phases(base_url, producer)

    # The Kafka group's commits, read over HTTP.
    committed = ext_offsets(base_url)
    check(committed == end_offsets(produced), f"ext route answers {committed}, Kafka committed {end_offsets(produced)}")
    print(f"the ext route reads the Kafka group's offsets: {committed}")

    # A restarted consumer resumes at the commits: only the new records.
    before = produced
    produced = produce(producer, produced, 60)
    first, records = consume_fresh("c4", lambda rs: len(rs) >= produced - before)
    check(first == end_offsets(before), f"c4 started at {first}, the group had committed {end_offsets(before)}")
    values = sorted(int(r.value) for r in records)
    check(values == list(range(before, produced)), f"c4 read values {values[:5]}..., not {before}..{produced}")
    print(f"a restarted consumer resumed at the commits and read the {produced - before} new records")

    # An ext commit (the group empty: stateless) is where Kafka starts.
    rewind = {p: max(end - 3, 0) for p, end in end_offsets(produced).items()}
    response = requests.post(
        f"{base_url}/consumer-groups/{GROUP}/offsets",
        json={"offsets": [{"topic": TOPIC, "partition": p, "offset": o} for p, o in rewind.items()]},
        timeout=REQUEST_TIMEOUT_S,
    )
    expect_status(response, 204, "ext commit to the empty Kafka group")
    want = sum(end - rewind[p] for p, end in end_offsets(produced).items())
    first, records = consume_fresh("c5", lambda rs: len(rs) >= want)
    check(first == rewind, f"c5 started at {first}, the ext route committed {rewind}")
    check(len(records) == want, f"c5 read {len(records)} records, {want} follow the ext commit")
    print(f"a Kafka consumer started at the ext route's commit {rewind}")
    producer.close(timeout=30)
    print("kafka_python_group: every record consumed once per group")


if __name__ == "__main__":
    run(main)
