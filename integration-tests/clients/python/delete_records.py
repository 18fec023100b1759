"""DeleteRecords from a real Kafka admin client against tidelog: kafka-python's
`KafkaAdminClient.delete_records` or confluent-kafka's (librdkafka)
`AdminClient.delete_records`.

Phase `delete`: create a one-partition topic and produce 10 records over
HTTP; the client deletes the records below 4 (its answer: low watermark 4),
then tries past the high watermark (refused with OFFSET_OUT_OF_RANGE, nothing
moved). Then, and in phase `after-restart` (the Rust test restarted tidelog
with kill -9 in between), every view of the beginning agrees: a consumer
from the beginning starts at 4, ListOffsets' earliest is 4, HTTP's
`beginning_offset` is 4 and its fetch from 0 starts at 4. Phase
`after-restart` then deletes up to the high watermark (-1): low watermark 10,
and a consumer from the beginning finds nothing.

Usage: delete_records.py http://127.0.0.1:PORT 127.0.0.1:KAFKA_PORT
       kafka-python|confluent-kafka delete|after-restart
"""

import sys
import time

import requests

from tidelog_check import BINARY, REQUEST_TIMEOUT_S, b64, check, create_topic, expect_status, run

PHASE = sys.argv.pop(4)
CLIENT = sys.argv.pop(3)
KAFKA = sys.argv.pop(2)
TOPIC = f"delrec-{CLIENT}"
COUNT = 10
DELETED_BELOW = 4
DEADLINE_S = 60


class KafkaPython:
    """kafka-python 3: KafkaAdminClient and KafkaConsumer."""

    def __init__(self):
        from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
        from kafka.errors import OffsetOutOfRangeError

        self.tp = TopicPartition(TOPIC, 0)
        self.out_of_range = OffsetOutOfRangeError
        self.admin = KafkaAdminClient(bootstrap_servers=KAFKA, request_timeout_ms=20000)
        self.consumer = KafkaConsumer(
            bootstrap_servers=KAFKA, enable_auto_commit=False, auto_offset_reset="earliest"
        )

    def delete_records(self, before):
        """The low watermark answered, or the exception raised."""
        try:
            answer = self.admin.delete_records({self.tp: before})
        except self.out_of_range as e:
            return e
        return answer[self.tp]["low_watermark"]

    def earliest(self):
        return self.consumer.beginning_offsets([self.tp])[self.tp]

    def first_offset_from_the_beginning(self, expect_none):
        self.consumer.assign([self.tp])
        self.consumer.seek_to_beginning(self.tp)
        deadline = time.monotonic() + (3 if expect_none else DEADLINE_S)
        while time.monotonic() < deadline:
            for records in self.consumer.poll(timeout_ms=500).values():
                if records:
                    return records[0].offset
        return None

    def close(self):
        self.consumer.close()
        self.admin.close()


class ConfluentKafka:
    """confluent-kafka (librdkafka): AdminClient and Consumer."""

    def __init__(self):
        from confluent_kafka import Consumer, KafkaException, TopicPartition
        from confluent_kafka.admin import AdminClient

        self.TopicPartition = TopicPartition
        self.KafkaException = KafkaException
        self.admin = AdminClient({"bootstrap.servers": KAFKA})
        self.consumer = Consumer(
            {
                "bootstrap.servers": KAFKA,
                "group.id": "delrec-unused-with-assign",
                "enable.auto.commit": False,
                "enable.partition.eof": False,
                "auto.offset.reset": "earliest",
            }
        )

    def delete_records(self, before):
        futures = self.admin.delete_records([self.TopicPartition(TOPIC, 0, before)])
        (future,) = futures.values()
        try:
            return future.result(timeout=30).low_watermark
        except self.KafkaException as e:
            return e

    def earliest(self):
        low, _high = self.consumer.get_watermark_offsets(
            self.TopicPartition(TOPIC, 0), timeout=30, cached=False
        )
        return low

    def first_offset_from_the_beginning(self, expect_none):
        from confluent_kafka import OFFSET_BEGINNING

        self.consumer.assign([self.TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + (3 if expect_none else DEADLINE_S)
        while time.monotonic() < deadline:
            message = self.consumer.poll(0.5)
            if message is None:
                continue
            check(message.error() is None, f"consume error {message.error()}")
            return message.offset()
        return None

    def close(self):
        self.consumer.close()


def produce_over_http(base_url):
    create_topic(base_url, TOPIC, 1)
    records = [{"value": b64(f"v{i}".encode())} for i in range(COUNT)]
    response = requests.post(
        f"{base_url}/topics/{TOPIC}/partitions/0",
        json={"records": records},
        headers={"Content-Type": BINARY},
        timeout=REQUEST_TIMEOUT_S,
    )
    expect_status(response, 200, f"produce to {TOPIC}")
    deadline = time.monotonic() + DEADLINE_S
    while http_offsets(base_url)[1] < COUNT:
        check(time.monotonic() < deadline, "the records never became visible")
        time.sleep(0.1)


def http_offsets(base_url):
    response = requests.get(
        f"{base_url}/topics/{TOPIC}/partitions/0/offsets", timeout=REQUEST_TIMEOUT_S
    )
    expect_status(response, 200, "offsets")
    body = response.json()
    return body["beginning_offset"], body["end_offset"]


def http_first_offset(base_url):
    response = requests.get(
        f"{base_url}/topics/{TOPIC}/partitions/0/records",
        params={"offset": 0, "timeout": 200},
        headers={"Accept": BINARY},
        timeout=REQUEST_TIMEOUT_S,
    )
    expect_status(response, 200, "fetch from 0")
    page = response.json()
    return page[0]["offset"] if page else None


def check_beginning(base_url, client, beginning, first):
    got = client.earliest()
    check(got == beginning, f"ListOffsets earliest answered {got}, expected {beginning}")
    got = client.first_offset_from_the_beginning(expect_none=first is None)
    check(got == first, f"a consumer from the beginning started at {got}, expected {first}")
    got = http_offsets(base_url)
    check(got == (beginning, COUNT), f"HTTP offsets {got}, expected ({beginning}, {COUNT})")
    got = http_first_offset(base_url)
    check(got == first, f"HTTP fetch from 0 started at {got}, expected {first}")
    print(f"{CLIENT}: the beginning is {beginning} everywhere")


def main(base_url):
    client = {"kafka-python": KafkaPython, "confluent-kafka": ConfluentKafka}[CLIENT]()
    try:
        if PHASE == "delete":
            produce_over_http(base_url)
            got = client.delete_records(DELETED_BELOW)
            check(got == DELETED_BELOW, f"delete_records answered {got!r}, expected {DELETED_BELOW}")
            refused = client.delete_records(COUNT + 5)
            check(
                isinstance(refused, Exception) and "OFFSET_OUT_OF_RANGE" in str(refused).upper().replace(" ", "_")
                or type(refused).__name__ == "OffsetOutOfRangeError",
                f"delete_records past the high watermark answered {refused!r}",
            )
            check_beginning(base_url, client, DELETED_BELOW, DELETED_BELOW)
        else:
            check_beginning(base_url, client, DELETED_BELOW, DELETED_BELOW)
            got = client.delete_records(-1)
            check(got == COUNT, f"delete_records(-1) answered {got!r}, expected {COUNT}")
            check_beginning(base_url, client, COUNT, None)
    finally:
        client.close()
    print(f"delete_records {CLIENT} {PHASE}: every view agrees")


if __name__ == "__main__":
    run(main)
