"""KIP-430's authorized operations through confluent-kafka's (librdkafka)
AdminClient, as librdkafka's test 0081 asks for them: describe_cluster,
describe_topics and describe_consumer_groups with
`include_authorized_operations=True`. With no authorizer running, every
operation Kafka defines for each resource type.

Usage: authorized_operations.py http://127.0.0.1:PORT 127.0.0.1:KAFKA_PORT
"""

import sys

from confluent_kafka import Consumer, TopicCollection, TopicPartition
from confluent_kafka.admin import AclOperation, AdminClient

from tidelog_check import check, create_topic, run

KAFKA = sys.argv.pop(2)
TOPIC = "authops"
GROUP = "authops-group"

TOPIC_OPS = {
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.CREATE,
    AclOperation.DESCRIBE,
    AclOperation.DELETE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
}
CLUSTER_OPS = {
    AclOperation.CREATE,
    AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
}
GROUP_OPS = {AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}


def main(base_url):
    create_topic(base_url, TOPIC, 1)
    # A group with a committed offset and no members, to describe.
    consumer = Consumer({"bootstrap.servers": KAFKA, "group.id": GROUP, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(TOPIC, 0, 0)], asynchronous=False)
    consumer.close()

    admin = AdminClient({"bootstrap.servers": KAFKA})
    cluster = admin.describe_cluster(include_authorized_operations=True, request_timeout=30).result(
        timeout=30
    )
    got = set(cluster.authorized_operations or [])
    check(got == CLUSTER_OPS, f"cluster operations {got}")

    topics = admin.describe_topics(
        TopicCollection([TOPIC]), include_authorized_operations=True, request_timeout=30
    )
    got = set(topics[TOPIC].result(timeout=30).authorized_operations or [])
    check(got == TOPIC_OPS, f"topic operations {got}")

    groups = admin.describe_consumer_groups(
        [GROUP], include_authorized_operations=True, request_timeout=30
    )
    got = set(groups[GROUP].result(timeout=30).authorized_operations or [])
    check(got == GROUP_OPS, f"group operations {got}")

    plain = admin.describe_cluster(request_timeout=30).result(timeout=30)
    check(not plain.authorized_operations, f"not asked, yet {plain.authorized_operations}")
    print("authorized_operations confluent-kafka: every operation without an authorizer")


run(main)
