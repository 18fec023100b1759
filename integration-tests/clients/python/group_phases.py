"""The group phases every Kafka client's group script runs
(kafka_python_group.py, confluent_kafka_group.py), against a `client`
adapter with:

- `open_member(name)`: a consumer in `GROUP`, subscribed to `TOPIC`,
  committing nothing by itself, `auto.offset.reset` earliest;
- `poll(consumer, name)`: up to 25 records as (partition, offset, value);
- `commit(consumer, {partition: next offset})`: raises when refused;
- `close(consumer)`: leaves the group;
- `produce(topic, [(partition, value)])`: acknowledged before it returns.

Three members, each in its own thread, subscribe to a 6-partition topic;
a third joins (a rebalance) and later one leaves (another), with records
produced in every phase. Each member commits what it consumed after
every poll. Checked: every record is consumed by the group, and a record
delivered again (after a rebalance) is never one the group had committed
past (the uncommitted tail is all a rebalance may repeat); no member
reads its own record twice. Then every member closes, a new one joins and
resumes at the committed offsets; the offsets the Kafka group committed
are the ones the ext HTTP route `GET /consumer-groups/{g}/offsets`
answers; an offset committed over the ext route (`POST`, the group empty)
is where a new Kafka consumer of the group starts.
"""

import threading
import time

import requests

from tidelog_check import REQUEST_TIMEOUT_S, check, create_topic, expect_status

PARTITIONS = 6
DEADLINE_S = 120


class Deliveries:
    """What the group consumed and committed, shared by the member
    threads."""

    def __init__(self, topic):
        self.topic = topic
        self.lock = threading.Lock()
        self.seen = {}  # (partition, offset) -> [member names]
        self.committed = {p: 0 for p in range(PARTITIONS)}  # the group's, by successful commits
        self.errors = []

    def delivered(self, name, partition, offset):
        with self.lock:
            if offset < self.committed[partition]:
                self.errors.append(
                    f"{name} got {self.topic}/{partition}@{offset}, below the group's commit "
                    f"{self.committed[partition]}"
                )
            names = self.seen.setdefault((partition, offset), [])
            if name in names:
                self.errors.append(f"{name} got {self.topic}/{partition}@{offset} twice")
            names.append(name)

    def commit_landed(self, offsets):
        with self.lock:
            for partition, offset in offsets.items():
                self.committed[partition] = max(self.committed[partition], offset)

    def count(self):
        with self.lock:
            return len(self.seen)


class Member(threading.Thread):
    """One consumer: poll, note every record, commit what it polled."""

    def __init__(self, client, name, deliveries):
        super().__init__(name=name, daemon=True)
        self.client = client
        self.deliveries = deliveries
        self.stop = threading.Event()
        self.failure = None
        self.commit_failures = 0

    def run(self):
        consumer = self.client.open_member(self.name)
        try:
            while not self.stop.is_set():
                offsets = {}
                for partition, offset, _value in self.client.poll(consumer, self.name):
                    self.deliveries.delivered(self.name, partition, offset)
                    offsets[partition] = offset + 1
                if not offsets:
                    continue
                try:
                    self.client.commit(consumer, offsets)
                except Exception:  # refused in a rebalance: the tail is read again
                    self.commit_failures += 1
                    continue
                self.deliveries.commit_landed(offsets)
        except Exception as e:  # reported by the main thread
            self.failure = repr(e)
        finally:
            self.client.close(consumer)  # LeaveGroup

    def leave(self):
        self.stop.set()
        self.join(timeout=60)
        check(not self.is_alive(), f"{self.name} did not close within a minute")
        check(self.failure is None, f"{self.name} failed: {self.failure}")


class Phases:
    def __init__(self, base_url, client, topic, group):
        self.base_url = base_url
        self.client = client
        self.topic = topic
        self.group = group

    def produce(self, start, count):
        """`count` records with values `start..start+count`, spread over
        the partitions round robin."""
        self.client.produce(self.topic, [(i % PARTITIONS, str(i).encode()) for i in range(start, start + count)])
        return start + count

    def group_members(self):
        response = requests.get(f"{self.base_url}/consumer-groups/{self.group}", timeout=REQUEST_TIMEOUT_S)
        if response.status_code != 200:
            return -1
        return len(response.json().get("members", []))

    def ext_offsets(self):
        response = requests.get(f"{self.base_url}/consumer-groups/{self.group}/offsets", timeout=REQUEST_TIMEOUT_S)
        expect_status(response, 200, "ext group offsets")
        return {o["partition"]: o["offset"] for o in response.json()["offsets"] if o["topic"] == self.topic}

    def rebalance(self):
        deliveries = Deliveries(self.topic)
        members = [Member(self.client, "c1", deliveries), Member(self.client, "c2", deliveries)]
        for m in members:
            m.start()
        produced = self.produce(0, 120)
        wait_for("120 records consumed by two members", lambda: deliveries.count() == produced)

        joiner = Member(self.client, "c3", deliveries)
        joiner.start()
        members.append(joiner)
        wait_for("three members in the group", lambda: self.group_members() == 3)
        produced = self.produce(produced, 180)
        wait_for("300 records consumed after c3 joined", lambda: deliveries.count() == produced)

        members[1].leave()
        wait_for("two members in the group", lambda: self.group_members() == 2)
        produced = self.produce(produced, 180)
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

    def consume_fresh(self, name, until):
        """A new member of the group reads until `until(records)` and
        commits them; the first offset it read of each partition and every
        record (partition, offset, value)."""
        consumer = self.client.open_member(name)
        records = []
        try:
            deadline = time.monotonic() + DEADLINE_S
            while not until(records):
                check(time.monotonic() < deadline, f"{name}: timed out, {len(records)} records read")
                records.extend(self.client.poll(consumer, name))
            self.client.commit(consumer, {p: o + 1 for p, o, _ in records})
        finally:
            self.client.close(consumer)
        first = {}
        for partition, offset, _ in records:
            first.setdefault(partition, offset)
        return first, records

    def run(self):
        create_topic(self.base_url, self.topic, PARTITIONS)
        produced = self.rebalance()

        # The Kafka group's commits, read over HTTP.
        committed = self.ext_offsets()
        check(
            committed == end_offsets(produced),
            f"ext route answers {committed}, Kafka committed {end_offsets(produced)}",
        )
        print(f"the ext route reads the Kafka group's offsets: {committed}")

        # A restarted consumer resumes at the commits: only the new records.
        before = produced
        produced = self.produce(produced, 60)
        first, records = self.consume_fresh("c4", lambda rs: len(rs) >= produced - before)
        check(first == end_offsets(before), f"c4 started at {first}, the group had committed {end_offsets(before)}")
        values = sorted(int(value) for _, _, value in records)
        check(values == list(range(before, produced)), f"c4 read values {values[:5]}..., not {before}..{produced}")
        print(f"a restarted consumer resumed at the commits and read the {produced - before} new records")

        # An ext commit (the group empty: stateless) is where Kafka starts.
        rewind = {p: max(end - 3, 0) for p, end in end_offsets(produced).items()}
        response = requests.post(
            f"{self.base_url}/consumer-groups/{self.group}/offsets",
            json={"offsets": [{"topic": self.topic, "partition": p, "offset": o} for p, o in rewind.items()]},
            timeout=REQUEST_TIMEOUT_S,
        )
        expect_status(response, 204, "ext commit to the empty Kafka group")
        want = sum(end - rewind[p] for p, end in end_offsets(produced).items())
        first, records = self.consume_fresh("c5", lambda rs: len(rs) >= want)
        check(first == rewind, f"c5 started at {first}, the ext route committed {rewind}")
        check(len(records) == want, f"c5 read {len(records)} records, {want} follow the ext commit")
        print(f"a Kafka consumer started at the ext route's commit {rewind}")


def run_phases(base_url, client, topic, group):
    Phases(base_url, client, topic, group).run()


def end_offsets(produced):
    """Each partition's end after `produced` records spread round robin."""
    return {p: len(range(p, produced, PARTITIONS)) for p in range(PARTITIONS)}


def wait_for(what, condition):
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        check(time.monotonic() < deadline, f"timed out waiting for {what}")
        time.sleep(0.1)
