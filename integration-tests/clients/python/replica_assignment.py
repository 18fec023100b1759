"""CreateTopics with a manual replica assignment from confluent-kafka's
(librdkafka) AdminClient, as librdkafka's test 0081 creates one on a
single broker: `NewTopic(name, 3, replica_assignment=[[0], [0], [0]])`
(librdkafka sends the partition count and replication factor as -1 with
an assignment, as Kafka requires) makes three partitions on broker 0, the
only broker, as Metadata names it; an assignment naming another broker,
or a partition with two replicas, is INVALID_REPLICA_ASSIGNMENT and makes
nothing.

Usage: replica_assignment.py http://127.0.0.1:PORT 127.0.0.1:KAFKA_PORT
"""

import sys

import requests
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic

from tidelog_check import REQUEST_TIMEOUT_S, admin_error, check, expect_status, run

KAFKA = sys.argv.pop(2)


def main(base_url):
    admin = AdminClient({"bootstrap.servers": KAFKA})
    futures = admin.create_topics(
        [NewTopic("assigned", num_partitions=3, replica_assignment=[[0], [0], [0]])], request_timeout=30
    )
    check(admin_error(futures["assigned"]) is None, "a [0] x 3 assignment was refused")
    response = requests.get(
        f"{base_url}/v3/clusters/tidelog/topics/assigned", timeout=REQUEST_TIMEOUT_S
    )
    expect_status(response, 200, "describe the assigned topic")
    count = response.json()["partitions_count"]
    check(count == 3, f"expected 3 partitions, got {count}")
    metadata = admin.list_topics(topic="assigned", timeout=30)
    replicas = [p.replicas for p in metadata.topics["assigned"].partitions.values()]
    check(replicas == [[0], [0], [0]], f"replicas {replicas}")

    for name, assignment in [("elsewhere", [[1]]), ("twice", [[0, 0]])]:
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment)], request_timeout=30
        )
        error = admin_error(futures[name])
        check(
            error is not None and error.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT,
            f"{name} {assignment}: expected INVALID_REPLICA_ASSIGNMENT, got {error}",
        )
        response = requests.get(
            f"{base_url}/v3/clusters/tidelog/topics/{name}", timeout=REQUEST_TIMEOUT_S
        )
        expect_status(response, 404, f"{name} must not exist")
    print("replica_assignment confluent-kafka: broker 0 accepted, others refused")


run(main)
