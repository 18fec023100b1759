"""Broker and group configs through confluent-kafka's (librdkafka)
AdminClient, as librdkafka's test 0081 and kafka-configs.sh use them.

* IncrementalAlterConfigs of broker "0": a Kerberos config (accepted
  without effect) and `log.retention.ms` (the default of every topic
  without its own), `background.threads`; of group "orders":
  `consumer.session.timeout.ms`. All succeed.
* A topic without its own retention follows the broker's, described as
  a dynamic broker default; one with its own keeps it.
* DescribeConfigs of the broker and the group answer each value with its
  source.
* Refusals: a config read at start-up (`num.partitions`) is
  INVALID_REQUEST, an unknown name and a session timeout out of bounds are
  INVALID_CONFIG, and nothing of them is kept.
* DELETE takes the broker's value back to Kafka's default.

Usage: dynamic_configs.py http://127.0.0.1:PORT 127.0.0.1:KAFKA_PORT
"""

import sys

from confluent_kafka import KafkaError
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)

from tidelog_check import admin_error, check, run

KAFKA = sys.argv.pop(2)
BROKER = ConfigResource.Type.BROKER
GROUP = ConfigResource.Type.GROUP
TOPIC = ConfigResource.Type.TOPIC


def alter(admin, resource_type, name, changes):
    """Alter one resource; the KafkaError it failed with, or None."""
    entries = [
        ConfigEntry(
            key,
            value,
            incremental_operation=(
                AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
            ),
        )
        for key, value in changes
    ]
    resource = ConfigResource(resource_type, name, incremental_configs=entries)
    futures = admin.incremental_alter_configs([resource], request_timeout=30)
    return admin_error(next(iter(futures.values())))


def describe(admin, resource_type, name):
    futures = admin.describe_configs([ConfigResource(resource_type, name)], request_timeout=30)
    return next(iter(futures.values())).result(timeout=30)


def value_and_source(entries, name):
    entry = entries.get(name)
    check(entry is not None, f"{name} is not described: {sorted(entries)}")
    return entry.value, entry.source


def main(_base_url):
    admin = AdminClient({"bootstrap.servers": KAFKA})
    futures = admin.create_topics(
        [
            NewTopic("follows", num_partitions=1, replication_factor=1),
            NewTopic("own", num_partitions=1, replication_factor=1, config={"retention.ms": "60000"}),
        ],
        request_timeout=30,
    )
    for name, future in futures.items():
        check(admin_error(future) is None, f"creating {name}")

    error = alter(
        admin,
        BROKER,
        "0",
        [("sasl.kerberos.min.time.before.relogin", "58000"), ("log.retention.ms", "3600000")],
    )
    check(error is None, f"broker 0: {error}")
    # confluent-kafka refuses the cluster-wide default's empty name
    # itself; the protocol tests alter it.
    error = alter(admin, BROKER, "0", [("background.threads", "9")])
    check(error is None, f"background.threads: {error}")
    error = alter(admin, GROUP, "orders", [("consumer.session.timeout.ms", "50000")])
    check(error is None, f"group orders: {error}")

    broker = describe(admin, BROKER, "0")
    check(
        value_and_source(broker, "log.retention.ms")
        == ("3600000", ConfigSource.DYNAMIC_BROKER_CONFIG.value),
        f"log.retention.ms: {broker.get('log.retention.ms')}",
    )
    check(
        value_and_source(broker, "background.threads")
        == ("9", ConfigSource.DYNAMIC_BROKER_CONFIG.value),
        f"background.threads: {broker.get('background.threads')}",
    )
    check(
        value_and_source(broker, "num.partitions")[1] == ConfigSource.STATIC_BROKER_CONFIG.value,
        f"num.partitions: {broker.get('num.partitions')}",
    )
    group = describe(admin, GROUP, "orders")
    check(
        value_and_source(group, "consumer.session.timeout.ms")[0] == "50000",
        f"consumer.session.timeout.ms: {group.get('consumer.session.timeout.ms')}",
    )
    follows = describe(admin, TOPIC, "follows")
    check(
        value_and_source(follows, "retention.ms")
        == ("3600000", ConfigSource.DYNAMIC_BROKER_CONFIG.value),
        f"follows retention.ms: {follows.get('retention.ms')}",
    )
    own = describe(admin, TOPIC, "own")
    check(
        value_and_source(own, "retention.ms") == ("60000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
        f"own retention.ms: {own.get('retention.ms')}",
    )

    # Refusals, each with Kafka's code; nothing of them is kept.
    for resource_type, name, changes, expected in [
        (BROKER, "0", [("num.partitions", "3")], KafkaError.INVALID_REQUEST),
        (BROKER, "0", [("log.retention.mss", "1")], KafkaError.INVALID_CONFIG),
        (GROUP, "orders", [("consumer.session.timeout.ms", "10")], KafkaError.INVALID_CONFIG),
    ]:
        error = alter(admin, resource_type, name, changes)
        check(
            error is not None and error.code() == expected,
            f"{changes}: expected {expected}, got {error}",
        )
    group = describe(admin, GROUP, "orders")
    check(value_and_source(group, "consumer.session.timeout.ms")[0] == "50000", "kept")

    error = alter(admin, BROKER, "0", [("log.retention.ms", None)])
    check(error is None, f"delete: {error}")
    follows = describe(admin, TOPIC, "follows")
    check(
        value_and_source(follows, "retention.ms")
        == ("604800000", ConfigSource.DEFAULT_CONFIG.value),
        f"follows retention.ms after the delete: {follows.get('retention.ms')}",
    )
    print("dynamic_configs confluent-kafka: broker and group configs altered and described")


run(main)
