"""Group ids as Kafka takes them, through confluent-kafka (librdkafka):
any non-empty string. librdkafka's 0132 names a group
`roundrobin,range`; here one also holds a slash, a space and a
non-ASCII letter. FindCoordinator, the group protocol, OffsetCommit,
OffsetFetch, ListGroups and DescribeGroups all take it, and HTTP's group
routes find it percent-encoded.

The rest of librdkafka's 0081 on groups: a committed leader epoch comes
back from OffsetFetch; a group whose consumers all left is listed and
described as a consumer group (Kafka keeps its protocol type), while one
that only ever had offsets committed without membership is "simple".

Usage: group_ids.py http://127.0.0.1:PORT 127.0.0.1:KAFKA_PORT
"""

import sys
import time
import urllib.parse

import requests
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from tidelog_check import BINARY, REQUEST_TIMEOUT_S, b64, check, create_topic, expect_status, run

KAFKA = sys.argv.pop(2)
TOPIC = "groupids"
DEADLINE_S = 60
GROUPS = ["roundrobin,range", "team/a b ü"]


def main(base_url):
    create_topic(base_url, TOPIC, 1)
    response = requests.post(
        f"{base_url}/topics/{TOPIC}/partitions/0",
        json={"records": [{"value": b64(b"one")}, {"value": b64(b"two")}]},
        headers={"Content-Type": BINARY},
        timeout=REQUEST_TIMEOUT_S,
    )
    expect_status(response, 200, "produce")

    for group in GROUPS:
        consumer = Consumer(
            {
                "bootstrap.servers": KAFKA,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": 300,
            }
        )
        consumer.subscribe([TOPIC])
        got = []
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < 2 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message)
        check(len(got) == 2, f"{group!r}: read {len(got)} records")
        consumer.commit(message=got[-1], asynchronous=False)
        committed = consumer.committed([TopicPartition(TOPIC, 0)], timeout=30)
        check(committed[0].offset == 2, f"{group!r}: committed {committed[0].offset}")
        consumer.commit(
            offsets=[TopicPartition(TOPIC, 0, 2, leader_epoch=0)], asynchronous=False
        )
        committed = consumer.committed([TopicPartition(TOPIC, 0)], timeout=30)
        check(
            (committed[0].offset, committed[0].leader_epoch) == (2, 0),
            f"{group!r}: committed epoch {committed[0].leader_epoch}",
        )
        consumer.close()

    # A group with offsets only, committed over HTTP without membership.
    response = requests.post(
        f"{base_url}/consumer-groups/offsets-only/offsets",
        json={"offsets": [{"topic": TOPIC, "partition": 0, "offset": 1}]},
        timeout=REQUEST_TIMEOUT_S,
    )
    expect_status(response, 204, "HTTP commit without membership")

    admin = AdminClient({"bootstrap.servers": KAFKA})
    listed = admin.list_consumer_groups(request_timeout=30).result(timeout=30)
    simple = {g.group_id: g.is_simple_consumer_group for g in listed.valid}
    check(
        all(simple.get(g) is False for g in GROUPS),
        f"emptied groups must stay consumer groups: {simple}",
    )
    check(simple.get("offsets-only") is True, f"offsets-only: {simple}")
    described = admin.describe_consumer_groups(GROUPS, request_timeout=30)
    for group, future in described.items():
        description = future.result(timeout=30)
        check(description.group_id == group, f"described {description.group_id!r}")
        check(
            description.is_simple_consumer_group is False,
            f"{group!r} described as simple",
        )

    for group in GROUPS:
        path = urllib.parse.quote(group, safe="")
        response = requests.get(
            f"{base_url}/consumer-groups/{path}/offsets", timeout=REQUEST_TIMEOUT_S
        )
        expect_status(response, 200, f"HTTP offsets of {group!r}")
        offsets = response.json()["offsets"]
        check(
            [(o["topic"], o["partition"], o["offset"]) for o in offsets] == [(TOPIC, 0, 2)],
            f"HTTP offsets of {group!r}: {offsets}",
        )
    print("group_ids confluent-kafka: any non-empty group id is a group")


run(main)
