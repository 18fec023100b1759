"""confluent-kafka (librdkafka) consumers in one group against tidelog's
Kafka listener: `Consumer({"group.id": ..., "enable.auto.commit": False})`
members through the phases of group_phases.py (a join, a leave, commit,
resume, offsets shared with the ext HTTP route), with librdkafka's group
protocol (its JoinGroup/SyncGroup versions, the range assignor's bytes, its
commits and offset fetches).

Usage: confluent_kafka_group.py http://127.0.0.1:PORT 127.0.0.1:KAFKA_PORT
"""

import sys

from confluent_kafka import Consumer, Producer, TopicPartition

from group_phases import run_phases
from tidelog_check import check, run

KAFKA = sys.argv.pop(2) if len(sys.argv) == 3 else None
TOPIC = "ckgroup"
GROUP = "ckgroup-consumers"


class ConfluentKafka:
    def __init__(self):
        self.producer = Producer({"bootstrap.servers": KAFKA, "acks": "all", "enable.idempotence": False})

    def open_member(self, name):
        consumer = Consumer(
            {
                "bootstrap.servers": KAFKA,
                "group.id": GROUP,
                "client.id": name,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": 300,
            }
        )
        consumer.subscribe([TOPIC])
        return consumer

    def poll(self, consumer, name):
        """An error event fails the member."""
        messages = consumer.consume(num_messages=25, timeout=0.2)
        for m in messages:
            check(m.error() is None, f"{name}: consume error {m.error()}")
        return [(m.partition(), m.offset(), m.value()) for m in messages]

    def commit(self, consumer, offsets):
        # KafkaException in a rebalance
        consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()], asynchronous=False)

    def close(self, consumer):
        consumer.close()

    def produce(self, topic, records):
        failures = []

        def report(err, _message):
            if err is not None:
                failures.append(str(err))

        for partition, value in records:
            self.producer.produce(topic, value=value, partition=partition, on_delivery=report)
        check(self.producer.flush(30) == 0, f"{len(records)} records not delivered in 30 s")
        check(not failures, f"delivery failed: {failures[:3]}")


def main(base_url):
    check(KAFKA is not None, "usage: confluent_kafka_group.py HTTP_URL KAFKA_ADDR")
    run_phases(base_url, ConfluentKafka(), TOPIC, GROUP)
    print("confluent_kafka_group: every record consumed once per group")


if __name__ == "__main__":
    run(main)
