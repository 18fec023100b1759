"""KIP-848's consumer group protocol (`group.protocol=consumer`) through
confluent-kafka (librdkafka), beside a classic group on the same topic.

Two consumers of one KIP-848 group: the second's arrival moves only the
partitions it takes (the first is never told to give up the partitions
it keeps, so no stop-the-world), the two never own a partition at once,
and together they read every record exactly once (each commits every
record before the next poll, so a handed-over partition resumes after
the last one read). The admin client describes the group as a consumer
group with both members, lists it by type, and HTTP's describe shows it.
When the second leaves, the first gets its partitions back. A classic
group reads the same topic meanwhile, on its own offsets.

Usage: consumer_group_protocol.py http://127.0.0.1:PORT 127.0.0.1:KAFKA_PORT
"""

import sys
import time

import requests
from confluent_kafka import Consumer, ConsumerGroupType, Producer
from confluent_kafka.admin import AdminClient

from tidelog_check import REQUEST_TIMEOUT_S, check, create_topic, run

KAFKA = sys.argv.pop(2)
TOPIC = "kip848"
GROUP = "kip848-group"
PARTITIONS = 6
RECORDS = 600
DEADLINE_S = 60


class Member:
    """One KIP-848 consumer and what it saw: records, and every assign
    and revoke callback with its partitions."""

    def __init__(self, name, read):
        self.name = name
        self.read = read
        self.events = []
        self.consumer = Consumer(
            {
                "bootstrap.servers": KAFKA,
                "group.id": GROUP,
                "group.protocol": "consumer",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "client.id": name,
            }
        )
        self.consumer.subscribe(
            [TOPIC], on_assign=self.on_assign, on_revoke=self.on_revoke
        )

    # librdkafka also calls back with no partitions (an incremental step
    # that changed nothing): only the steps that move partitions count.
    def on_assign(self, consumer, partitions):
        if partitions:
            self.events.append(("assign", sorted(p.partition for p in partitions)))

    def on_revoke(self, consumer, partitions):
        if partitions:
            self.events.append(("revoke", sorted(p.partition for p in partitions)))

    def owned(self):
        return sorted(p.partition for p in self.consumer.assignment())

    def poll(self):
        message = self.consumer.poll(0.1)
        if message is None:
            return
        check(message.error() is None, f"{self.name}: {message.error()}")
        key = (message.partition(), message.offset())
        check(key not in self.read, f"{self.name} read {key} a second time")
        self.read[key] = self.name
        # Committed before the next poll: a partition handed over resumes
        # after the last record read.
        self.consumer.commit(message=message, asynchronous=False)


def poll_until(members, done, what):
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        check(time.monotonic() < deadline, f"timed out: {what}")
        for m in members:
            m.poll()
        owned = [p for m in members for p in m.owned()]
        check(len(owned) == len(set(owned)), f"a partition owned twice: {owned}")


def classic_reads_everything():
    consumer = Consumer(
        {
            "bootstrap.servers": KAFKA,
            "group.id": "kip848-classic",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 300,
        }
    )
    consumer.subscribe([TOPIC])
    seen = set()
    deadline = time.monotonic() + DEADLINE_S
    while len(seen) < RECORDS:
        check(time.monotonic() < deadline, f"classic group read {len(seen)}")
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            seen.add((message.partition(), message.offset()))
    consumer.commit(asynchronous=False)
    consumer.close()


def main(base_url):
    create_topic(base_url, TOPIC, PARTITIONS)
    producer = Producer({"bootstrap.servers": KAFKA})
    for i in range(RECORDS):
        producer.produce(TOPIC, key=f"k{i}", value=f"v{i}", partition=i % PARTITIONS)
    check(producer.flush(30) == 0, "records left unsent")

    read = {}
    first = Member("first", read)
    poll_until([first], lambda: len(first.owned()) == PARTITIONS and len(read) >= 60, "first member")
    check(first.events == [("assign", list(range(PARTITIONS)))], f"first: {first.events}")

    second = Member("second", read)
    poll_until(
        [first, second],
        lambda: len(first.owned()) == 3 and len(second.owned()) == 3,
        "the second member's share",
    )
    # Incremental: the first gave up exactly what the second took, once,
    # and was never told to drop the partitions it kept.
    check(
        first.events[1:] == [("revoke", second.owned())],
        f"first member's callbacks: {first.events}",
    )
    check(second.events == [("assign", second.owned())], f"second: {second.events}")

    poll_until([first, second], lambda: len(read) == RECORDS, "every record read")
    by = {name: sum(1 for v in read.values() if v == name) for name in ("first", "second")}
    check(by["second"] > 0, f"the second member read nothing: {by}")

    admin = AdminClient({"bootstrap.servers": KAFKA})
    described = admin.describe_consumer_groups([GROUP], request_timeout=30)[GROUP].result(timeout=30)
    check(described.type == ConsumerGroupType.CONSUMER, f"described type {described.type}")
    check(str(described.state.name) == "STABLE", f"described state {described.state}")
    check(described.partition_assignor == "uniform", f"assignor {described.partition_assignor}")
    check(len(described.members) == 2, f"described members {described.members}")
    for member in described.members:
        check(
            len(member.assignment.topic_partitions) == 3,
            f"{member.client_id}: {member.assignment.topic_partitions}",
        )
    listed = admin.list_consumer_groups(
        types={ConsumerGroupType.CONSUMER}, request_timeout=30
    ).result(timeout=30)
    check(
        [g.group_id for g in listed.valid] == [GROUP],
        f"consumer groups listed: {[(g.group_id, g.type) for g in listed.valid]}",
    )

    response = requests.get(f"{base_url}/consumer-groups/{GROUP}", timeout=REQUEST_TIMEOUT_S)
    check(response.status_code == 200, f"HTTP describe: {response.status_code}")
    members = response.json()["members"]
    check(len(members) == 2, f"HTTP members {members}")

    # The second leaves: the first gets its partitions back.
    second.consumer.close()
    poll_until([first], lambda: len(first.owned()) == PARTITIONS, "the first member again")
    check(
        first.events[2:] == [("assign", first.events[1][1])],
        f"first member's callbacks: {first.events}",
    )
    first.consumer.close()

    classic_reads_everything()
    offsets = requests.get(
        f"{base_url}/consumer-groups/{GROUP}/offsets", timeout=REQUEST_TIMEOUT_S
    ).json()["offsets"]
    check(
        sum(o["offset"] for o in offsets) == RECORDS,
        f"the KIP-848 group's committed offsets: {offsets}",
    )
    print("consumer_group_protocol confluent-kafka: KIP-848 group handed over incrementally, every record once")


run(main)
