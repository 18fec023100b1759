"""kafka-python's KafkaAdminClient against tidelog's Kafka listener, with
SASL/PLAIN (the server's admin_token as password).

A wrong password is refused (no admin client comes up); then, logged in:
create topics with configs (and a replication factor of 3 refused),
describe their configs (the override with its source, the defaults), alter
them incrementally (SET and DELETE) and see the change over HTTP's
configs route too, list and describe a consumer group that committed
offsets, delete one of its offsets (OffsetDelete), delete a topic and see
it gone over HTTP.

Usage: kafka_python_admin.py http://127.0.0.1:PORT 127.0.0.1:KAFKA_PORT TOKEN
"""

import sys

import requests
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import (
    AlterConfigOp,
    ConfigResource,
    ConfigResourceType,
    KafkaAdminClient,
    NewTopic,
)
from kafka import errors as Errors
from kafka.errors import InvalidReplicationFactorError, KafkaError
from kafka.structs import OffsetAndMetadata

from tidelog_check import REQUEST_TIMEOUT_S, check, expect_status, run

TOKEN = sys.argv.pop(3)
KAFKA = sys.argv.pop(2)
TOPIC = "kadmin"
GROUP = "kadmin-group"
SASL = {
    "security_protocol": "SASL_PLAINTEXT",
    "sasl_mechanism": "PLAIN",
    "sasl_plain_username": "admin",
}


def admin(password, timeout_ms=20000):
    return KafkaAdminClient(
        bootstrap_servers=KAFKA,
        sasl_plain_password=password,
        request_timeout_ms=timeout_ms,
        **SASL,
    )


def http_configs(base_url, topic):
    response = requests.get(
        f"{base_url}/v3/clusters/tidelog/topics/{topic}/configs", timeout=REQUEST_TIMEOUT_S
    )
    expect_status(response, 200, f"configs of {topic}")
    return {e["name"]: e["value"] for e in response.json()["data"]}


def main(base_url):
    # A wrong password: the client never gets an admin connection.
    try:
        # The client retries a refused login until its timeout.
        wrong = admin("not-the-token", timeout_ms=5000)
        wrong.create_topics([NewTopic("kadmin-wrong", 1, 1)])
        wrong.close()
        raise AssertionError("an admin client with a wrong password was let in")
    except AssertionError:
        raise
    except KafkaError as e:
        print(f"wrong password refused: {type(e).__name__}")
    check(
        requests.get(
            f"{base_url}/v3/clusters/tidelog/topics/kadmin-wrong", timeout=REQUEST_TIMEOUT_S
        ).status_code
        == 404,
        "a topic was created with a wrong password",
    )

    client = admin(TOKEN)
    client.create_topics(
        [
            NewTopic(TOPIC, 3, 1, topic_configs={"retention.ms": "3600000"}),
            NewTopic("kadmin-gone", 1, 1),
        ]
    )
    try:
        client.create_topics([NewTopic("kadmin-rf3", 1, 3)])
        raise AssertionError("replication factor 3 was accepted")
    except InvalidReplicationFactorError:
        pass
    check(http_configs(base_url, TOPIC)["retention.ms"] == "3600000", "retention.ms over HTTP")

    described = client.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, TOPIC)], config_filter="all"
    )
    configs = described["topic"][TOPIC]
    check(configs["retention.ms"]["value"] == "3600000", f"described: {configs['retention.ms']}")
    check(
        configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG",
        f"retention.ms source: {configs['retention.ms']}",
    )
    check(
        configs["cleanup.policy"]["value"] == "delete"
        and configs["cleanup.policy"]["config_source"] == "DEFAULT_CONFIG",
        f"cleanup.policy: {configs['cleanup.policy']}",
    )

    result = client.alter_configs(
        [
            ConfigResource(
                ConfigResourceType.TOPIC,
                TOPIC,
                configs={
                    "retention.bytes": (AlterConfigOp.SET, "1048576"),
                    "retention.ms": (AlterConfigOp.DELETE, None),
                },
            )
        ],
        incremental=True,
    )
    check(result == {"topic": {TOPIC: "OK"}}, f"incremental alter answered {result}")
    after = http_configs(base_url, TOPIC)
    check(after["retention.bytes"] == "1048576", f"retention.bytes over HTTP: {after}")
    check(after["retention.ms"] == "604800000", f"retention.ms back to its default: {after}")

    # A group with committed offsets, listed and described.
    producer = KafkaProducer(bootstrap_servers=KAFKA, enable_idempotence=False)
    for i in range(3):
        producer.send(TOPIC, value=f"v{i}".encode(), partition=0).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=KAFKA, group_id=GROUP, enable_auto_commit=False)
    consumer.assign([TopicPartition(TOPIC, 0)])
    consumer.commit(
        {
            TopicPartition(TOPIC, 0): OffsetAndMetadata(2, "", -1),
            TopicPartition(TOPIC, 1): OffsetAndMetadata(0, "", -1),
        }
    )
    consumer.close()
    groups = client.list_groups()
    names = [g["group_id"] if isinstance(g, dict) else g[0] for g in groups]
    check(GROUP in names, f"list_groups: {groups}")
    described = client.describe_groups([GROUP])[GROUP]
    check(
        described["group_state"] == "Empty" and described["members"] == [],
        f"describe_groups: {described}",
    )
    offsets = client.list_group_offsets({GROUP: None})[GROUP]
    check(
        offsets[TopicPartition(TOPIC, 0)].offset == 2
        and offsets[TopicPartition(TOPIC, 1)].offset == 0,
        f"list_group_offsets: {offsets}",
    )
    # OffsetDelete: partition 1's offset goes (the group has no members),
    # an unknown partition is answered on its own, partition 0 stays.
    deleted = client.delete_group_offsets(
        GROUP, [TopicPartition(TOPIC, 1), TopicPartition(TOPIC, 7)]
    )
    check(
        deleted[TopicPartition(TOPIC, 1)] is Errors.NoError
        and deleted[TopicPartition(TOPIC, 7)] is Errors.UnknownTopicOrPartitionError,
        f"delete_group_offsets: {deleted}",
    )
    offsets = client.list_group_offsets({GROUP: None})[GROUP]
    check(
        set(offsets) == {TopicPartition(TOPIC, 0)},
        f"list_group_offsets after delete_group_offsets: {offsets}",
    )

    client.delete_topics(["kadmin-gone"])
    response = requests.get(
        f"{base_url}/v3/clusters/tidelog/topics/kadmin-gone", timeout=REQUEST_TIMEOUT_S
    )
    expect_status(response, 404, "the deleted topic")
    client.close()
    print("kafka_python_admin: every admin call checked")


if __name__ == "__main__":
    run(main)
