"""kafka-bridge-client's consumer, in its Confluent mode, against tidelog's
consumer-instance routes; its producer writes the records.

The library deletes its instance before creating it (a 404 is expected the
first time), creates it with Confluent's config names, subscribes, polls
records in the binary embedded format, commits the last offsets it saw (200
in Confluent mode) and deletes the instance on exit. A second consumer of
the same group and name, as after a client restart, continues at the
committed offsets: it gets the new records and none of the old ones.

Usage: bridge_consumer.py http://127.0.0.1:PORT
"""

import asyncio
import base64
import time

from kafka_bridge_client import KafkaBridgeConsumer, KafkaBridgeProducer, Message

from tidelog_check import check, create_topic, run

TOPIC = "bridge-consume"
PARTITIONS = 2
WAIT_S = 60


def consumer(base_url):
    return KafkaBridgeConsumer(
        TOPIC,
        # The library joins paths onto it with urljoin: it must end in "/".
        bootstrap_server=f"{base_url}/",
        group_id="bridge-group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_name="bridge-consumer-1",
        proxy="confluent",
        # No sleep after an empty poll: the records call long-polls.
        sleep_interval_seconds=0,
        client_timeout_seconds=30,
    )


async def read_exactly(consumer, expected):
    """Polls until the values of `expected` ({value bytes}) came back, each
    once; anything else fails."""
    seen = set()
    deadline = time.monotonic() + WAIT_S
    while len(seen) < len(expected):
        check(
            time.monotonic() < deadline,
            f"only {len(seen)} of {len(expected)} messages came back",
        )
        for record in await consumer.poll_records(max_bytes=1 << 16, timeout=500):
            value = base64.b64decode(record["value"])
            key = base64.b64decode(record["key"]).decode()
            check(record["topic"] == TOPIC, f"record of another topic: {record!r}")
            check(value in expected, f"{record!r} was not expected now")
            check(value not in seen, f"{record!r} came back twice")
            check(key == f"k{value[1]}", f"key {key!r} does not belong to {record!r}")
            seen.add(value)
    return seen


async def consume(base_url, producer):
    first = [Message(key=f"k{i}", value=bytes([0xC0, i]) * 4) for i in range(16)]
    check(producer.sends(TOPIC, first, binary=True) is True, "sends did not report success")
    c = consumer(base_url)
    async with c:
        await read_exactly(c, {m["value"] for m in first})
        await c.commit()
    print(f"{TOPIC}: {len(first)} messages consumed and committed")

    # A new client process of the same group continues where it committed.
    second = [Message(key=f"k{i}", value=bytes([0xC0, i]) * 4) for i in range(16, 22)]
    check(producer.sends(TOPIC, second, binary=True) is True, "sends did not report success")
    c = consumer(base_url)
    async with c:
        await read_exactly(c, {m["value"] for m in second})
        await c.commit()
        check(
            await c.poll_records(max_bytes=1 << 16, timeout=300) == [],
            "records came back past the committed ones",
        )
    print(f"{TOPIC}: a restarted consumer got only the {len(second)} new messages")


def main(base_url):
    create_topic(base_url, TOPIC, PARTITIONS)
    producer = KafkaBridgeProducer(base_url, timeout=30)
    asyncio.run(consume(base_url, producer))
    print("bridge_consumer: every message once, across a client restart")


if __name__ == "__main__":
    run(main)
