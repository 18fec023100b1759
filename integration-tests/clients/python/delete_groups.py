"""DeleteGroups from confluent-kafka's (librdkafka) AdminClient against
tidelog's Kafka listener (`AdminClient.delete_consumer_groups`, Kafka API
42), as librdkafka's test 0081 calls it.

Three groups: `dg-done` committed an offset and its consumer closed (no
members, offsets kept), `dg-live` has a member polling, `dg-never` never
existed. One call deletes all three: `dg-done` is deleted, `dg-live` is
refused with NON_EMPTY_GROUP, `dg-never` with GROUP_ID_NOT_FOUND. Then
`dg-done` is gone from ListGroups and from HTTP, and a new consumer of it
finds no committed offset; `dg-live` still has its member.

Usage: delete_groups.py http://127.0.0.1:PORT 127.0.0.1:KAFKA_PORT
"""

import sys
import time

import requests
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from tidelog_check import (
    BINARY,
    REQUEST_TIMEOUT_S,
    admin_error,
    b64,
    check,
    create_topic,
    expect_status,
    run,
)

KAFKA = sys.argv.pop(2)
TOPIC = "delgroups"
DEADLINE_S = 60


def consumer(group):
    return Consumer(
        {
            "bootstrap.servers": KAFKA,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 300,
        }
    )


def consume_one(c):
    """Polls until one record comes (bounded)."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        message = c.poll(0.5)
        if message is not None and message.error() is None:
            return message
    raise AssertionError("no record within the deadline")


def main(base_url):
    create_topic(base_url, TOPIC, 1)
    response = requests.post(
        f"{base_url}/topics/{TOPIC}/partitions/0",
        json={"records": [{"value": b64(b"one")}]},
        headers={"Content-Type": BINARY},
        timeout=REQUEST_TIMEOUT_S,
    )
    expect_status(response, 200, "produce")

    done = consumer("dg-done")
    done.subscribe([TOPIC])
    message = consume_one(done)
    done.commit(message=message, asynchronous=False)
    done.close()

    live = consumer("dg-live")
    live.subscribe([TOPIC])
    consume_one(live)

    admin = AdminClient({"bootstrap.servers": KAFKA})
    futures = admin.delete_consumer_groups(["dg-done", "dg-live", "dg-never"], request_timeout=30)
    check(admin_error(futures["dg-done"]) is None, "dg-done was not deleted")
    live_error = admin_error(futures["dg-live"])
    check(
        live_error is not None and live_error.code() == KafkaError.NON_EMPTY_GROUP,
        f"dg-live: expected NON_EMPTY_GROUP, got {live_error}",
    )
    never_error = admin_error(futures["dg-never"])
    check(
        never_error is not None and never_error.code() == KafkaError.GROUP_ID_NOT_FOUND,
        f"dg-never: expected GROUP_ID_NOT_FOUND, got {never_error}",
    )

    listed = admin.list_consumer_groups(request_timeout=30).result(timeout=30)
    names = {g.group_id for g in listed.valid}
    check("dg-done" not in names, f"dg-done still listed: {names}")
    check("dg-live" in names, f"dg-live not listed: {names}")
    response = requests.get(
        f"{base_url}/v3/clusters/tidelog/consumer-groups/dg-done", timeout=REQUEST_TIMEOUT_S
    )
    expect_status(response, 404, "HTTP describe of the deleted group")

    again = consumer("dg-done")
    committed = again.committed([TopicPartition(TOPIC, 0)], timeout=30)
    check(committed[0].offset < 0, f"dg-done's offset survived: {committed[0].offset}")
    again.close()
    live.close()
    print("delete_groups confluent-kafka: deleted, refused while live, unknown refused")


run(main)
