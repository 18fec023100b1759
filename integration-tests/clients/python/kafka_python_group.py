"""kafka-python consumers in one group against tidelog's Kafka listener:
`KafkaConsumer(group_id=..., enable_auto_commit=False)` members through the
phases of group_phases.py (a join, a leave, commit, resume, offsets shared
with the ext HTTP route).

Usage: kafka_python_group.py http://127.0.0.1:PORT 127.0.0.1:KAFKA_PORT
"""

import sys

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from group_phases import run_phases
from tidelog_check import check, run

KAFKA = sys.argv.pop(2) if len(sys.argv) == 3 else None
TOPIC = "kgroup"
GROUP = "kgroup-consumers"


class KafkaPython:
    def __init__(self):
        self.producer = KafkaProducer(bootstrap_servers=KAFKA, acks="all", enable_idempotence=False)

    def open_member(self, name):
        return KafkaConsumer(
            TOPIC,
            bootstrap_servers=KAFKA,
            group_id=GROUP,
            client_id=name,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=10_000,
            heartbeat_interval_ms=300,
            max_poll_records=25,
        )

    def poll(self, consumer, _name):
        return [
            (tp.partition, r.offset, r.value)
            for tp, records in consumer.poll(timeout_ms=200).items()
            for r in records
        ]

    def commit(self, consumer, offsets):
        # CommitFailedError in a rebalance
        consumer.commit({TopicPartition(TOPIC, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})

    def close(self, consumer):
        consumer.close()

    def produce(self, topic, records):
        futures = [self.producer.send(topic, value=value, partition=p) for p, value in records]
        self.producer.flush(timeout=30)
        for f in futures:
            f.get(timeout=30)


def main(base_url):
    check(KAFKA is not None, "usage: kafka_python_group.py HTTP_URL KAFKA_ADDR")
    client = KafkaPython()
    run_phases(base_url, client, TOPIC, GROUP)
    client.producer.close(timeout=30)
    print("kafka_python_group: every record consumed once per group")


if __name__ == "__main__":
    run(main)
