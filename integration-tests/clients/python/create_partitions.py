"""CreatePartitions from confluent-kafka's (librdkafka) AdminClient against
tidelog's Kafka listener (`AdminClient.create_partitions`, Kafka API 37),
as librdkafka's tests 0044, 0069 and 0081 call it.

A topic `grow` of 2 partitions has a subscribed consumer. Validate-only
changes nothing; then the topic grows to 4. A count not above the
topic's is INVALID_PARTITIONS, an assignment naming another broker
INVALID_REPLICA_ASSIGNMENT, an unknown topic UNKNOWN_TOPIC_OR_PART. A
record produced to new partition 3 reaches the subscribed consumer once
its metadata refresh sees the new partition and the group rebalances,
as with Kafka.

Usage: create_partitions.py http://127.0.0.1:PORT 127.0.0.1:KAFKA_PORT
"""

import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewPartitions

from tidelog_check import admin_error, check, create_topic, run

KAFKA = sys.argv.pop(2)
TOPIC = "grow"
DEADLINE_S = 60


def partitions(admin):
    metadata = admin.list_topics(TOPIC, timeout=30)
    return len(metadata.topics[TOPIC].partitions)


def grow(admin, count, validate_only=False, assignment=None):
    topic = TOPIC if count else "nope"
    extra = {} if assignment is None else {"replica_assignment": assignment}
    futures = admin.create_partitions(
        [NewPartitions(topic, count or 9, **extra)],
        validate_only=validate_only,
        request_timeout=30,
    )
    return admin_error(next(iter(futures.values())))


def main(base_url):
    create_topic(base_url, TOPIC, 2)
    admin = AdminClient({"bootstrap.servers": KAFKA})

    consumer = Consumer(
        {
            "bootstrap.servers": KAFKA,
            "group.id": "grow-group",
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 500,
            "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 300,
        }
    )
    consumer.subscribe([TOPIC])
    deadline = time.monotonic() + DEADLINE_S
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    check(len(consumer.assignment()) == 2, f"first assignment: {consumer.assignment()}")

    check(grow(admin, 4, validate_only=True) is None, "validate-only was refused")
    check(partitions(admin) == 2, "validate-only added partitions")
    error = grow(admin, 4)
    check(error is None, f"growing to 4: {error}")
    check(partitions(admin) == 4, f"after growing: {partitions(admin)} partitions")

    for count, assignment, code in [
        (4, None, KafkaError.INVALID_PARTITIONS),
        (3, None, KafkaError.INVALID_PARTITIONS),
        (5, [[1]], KafkaError.INVALID_REPLICA_ASSIGNMENT),
        (None, None, KafkaError.UNKNOWN_TOPIC_OR_PART),
    ]:
        error = grow(admin, count, assignment=assignment)
        check(
            error is not None and error.code() == code,
            f"count {count}, assignment {assignment}: expected {code}, got {error}",
        )
    check(partitions(admin) == 4, "a refused change added partitions")

    producer = Producer({"bootstrap.servers": KAFKA})
    producer.produce(TOPIC, value=b"in partition 3", partition=3)
    check(producer.flush(30) == 0, "the record to partition 3 was not delivered")

    got = None
    while got is None and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            got = message
    check(got is not None, f"no record; assignment {consumer.assignment()}")
    check(
        (got.partition(), got.value()) == (3, b"in partition 3"),
        f"got {got.partition()}: {got.value()}",
    )
    check(len(consumer.assignment()) == 4, f"assignment: {consumer.assignment()}")
    consumer.close()
    print("create_partitions confluent-kafka: grown, refused as Kafka refuses, consumed from the new one")


run(main)
