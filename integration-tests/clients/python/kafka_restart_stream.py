"""A bounded numbered stream through tidelog restarts, with kafka-python or
confluent-kafka (librdkafka): a producer (acks all, idempotence off, the
client's own retries and reconnects) sends records 0..COUNT-1 round robin
over the partitions of TOPIC while one consumer of GROUP reads them and
commits after every poll. The Rust test (kafka_restarts.rs) restarts
tidelog cleanly in the middle of one stretch and kill -9s it in the
middle of another; the clients keep going.

The handshake with the test goes through files in STATE_DIR, so each
restart lands while the producer is sending (never between stretches):
- before record MILESTONES[k] the script writes `at-k` (holding that
  number) and waits for `go-k`;
- the test then waits until `acked` (rewritten after every acknowledgement)
  reaches MILESTONES[k] + 20, restarts tidelog, and writes `restarted-k`;
- the producer sends at most MILESTONES[k] + IN_FLIGHT before it waits for
  `restarted-k`, so the restart hits records in flight.

Checked here: every record was acknowledged; the consumer read every offset
of every partition (up to the end HTTP answers once the producer is done) at
least once, and never one below an offset the group had committed (a restart
may repeat only the uncommitted tail). Written to STATE_DIR/report.json for
the Rust test, which checks each acknowledged record at its offset over HTTP:
`acked`, a list of [partition, offset, value].

Usage: kafka_restart_stream.py kafka-python|confluent-kafka HTTP_URL KAFKA_ADDR STATE_DIR
"""

import json
import os
import sys
import threading
import time

import requests

from tidelog_check import REQUEST_TIMEOUT_S, check, create_topic, expect_status, run

CLIENT = sys.argv.pop(1) if len(sys.argv) == 5 else None
KAFKA = sys.argv.pop(2) if len(sys.argv) == 4 else None
STATE_DIR = sys.argv.pop(2) if len(sys.argv) == 3 else None
PARTITIONS = 3
COUNT = 400
MILESTONES = [100, 250]
IN_FLIGHT = 50
DEADLINE_S = 90
# Between two sends, so the stream lasts through each restart.
PACE_S = 0.005


def topic_for(client):
    return f"restarts-{client}"


def group_for(client):
    return f"restarts-{client}-group"


def state_path(name):
    return os.path.join(STATE_DIR, name)


def write_state(name, text):
    """Atomically (rename), so the test never reads half a file."""
    partial = state_path(name + ".partial")
    with open(partial, "w") as f:
        f.write(text)
    os.replace(partial, state_path(name))


def wait_file(name, serve):
    """Waits for the test's file `name`, calling `serve()` meanwhile (the
    delivery reports of records in flight must keep arriving: the test
    waits for them)."""
    deadline = time.monotonic() + DEADLINE_S
    while not os.path.exists(state_path(name)):
        check(time.monotonic() < deadline, f"the test never wrote {name}")
        serve()


class Acks:
    """What the producer's delivery reports answered, by record number."""

    def __init__(self):
        self.lock = threading.Lock()
        self.offsets = {}  # number -> (partition, offset)
        self.failures = []

    def acked(self, number, partition, offset):
        with self.lock:
            self.offsets[number] = (partition, offset)
            count = len(self.offsets)
        write_state("acked", str(count))

    def failed(self, number, error):
        with self.lock:
            self.failures.append(f"record {number}: {error}")


class KafkaPython:
    def __init__(self):
        from kafka import KafkaProducer

        self.producer = KafkaProducer(
            bootstrap_servers=KAFKA,
            acks="all",
            enable_idempotence=False,
            linger_ms=5,
            request_timeout_ms=5000,
            delivery_timeout_ms=60_000,
            retry_backoff_ms=100,
            reconnect_backoff_max_ms=500,
        )

    def send(self, topic, partition, number, acks):
        future = self.producer.send(topic, value=str(number).encode(), partition=partition)
        future.add_callback(lambda meta: acks.acked(number, meta.partition, meta.offset))
        future.add_errback(lambda e: acks.failed(number, repr(e)))

    def serve(self):
        # Delivery callbacks run on kafka-python's sender thread.
        time.sleep(0.02)

    def flush(self):
        self.producer.flush(timeout=DEADLINE_S)
        self.producer.close(timeout=30)

    def open_consumer(self, topic, group):
        from kafka import KafkaConsumer

        return KafkaConsumer(
            topic,
            bootstrap_servers=KAFKA,
            group_id=group,
            client_id="restart-consumer",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=10_000,
            heartbeat_interval_ms=300,
            max_poll_records=25,
            request_timeout_ms=5000,
            reconnect_backoff_max_ms=500,
            retry_backoff_ms=100,
        )

    def poll(self, consumer):
        return [(tp.partition, r.offset) for tp, rs in consumer.poll(timeout_ms=200).items() for r in rs]

    def commit(self, consumer, topic, offsets):
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})

    def close(self, consumer):
        consumer.close()


class ConfluentKafka:
    def __init__(self):
        from confluent_kafka import Producer

        self.producer = Producer(
            {
                "bootstrap.servers": KAFKA,
                "acks": "all",
                "enable.idempotence": False,
                "linger.ms": 5,
                "message.timeout.ms": 60_000,
                "retry.backoff.ms": 100,
                "reconnect.backoff.max.ms": 500,
            }
        )

    def send(self, topic, partition, number, acks):
        def report(err, message):
            if err is not None:
                acks.failed(number, str(err))
            else:
                acks.acked(number, message.partition(), message.offset())

        self.producer.produce(topic, value=str(number).encode(), partition=partition, on_delivery=report)
        self.producer.poll(0)

    def serve(self):
        # librdkafka's delivery reports run inside poll().
        self.producer.poll(0.02)

    def flush(self):
        remaining = self.producer.flush(DEADLINE_S)
        check(remaining == 0, f"{remaining} records not delivered in {DEADLINE_S} s")

    def open_consumer(self, topic, group):
        from confluent_kafka import Consumer

        consumer = Consumer(
            {
                "bootstrap.servers": KAFKA,
                "group.id": group,
                "client.id": "restart-consumer",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": 300,
                "reconnect.backoff.max.ms": 500,
            }
        )
        consumer.subscribe([topic])
        return consumer

    def poll(self, consumer):
        # Error events (the broker going away) are the client's to retry.
        return [(m.partition(), m.offset()) for m in consumer.consume(num_messages=25, timeout=0.2) if m.error() is None]

    def commit(self, consumer, topic, offsets):
        from confluent_kafka import TopicPartition

        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)

    def close(self, consumer):
        consumer.close()


class Reader(threading.Thread):
    """The group's consumer: polls, notes every record, commits what it
    polled; a refused commit (the coordinator restarting) is retried by
    the next poll's commit."""

    def __init__(self, client, topic, group):
        super().__init__(name="reader", daemon=True)
        self.client = client
        self.topic = topic
        self.group = group
        self.lock = threading.Lock()
        self.seen = {}  # (partition, offset) -> times read
        self.committed = {p: 0 for p in range(PARTITIONS)}  # by commits that succeeded
        self.errors = []
        self.commit_failures = 0
        self.stop = threading.Event()
        self.failure = None

    def run(self):
        consumer = self.client.open_consumer(self.topic, self.group)
        try:
            while not self.stop.is_set():
                try:
                    polled = self.client.poll(consumer)
                except Exception:  # the broker went away mid-poll: poll again
                    continue
                offsets = {}
                with self.lock:
                    for partition, offset in polled:
                        if offset < self.committed[partition]:
                            self.errors.append(
                                f"{self.topic}/{partition}@{offset} read again below the group's commit "
                                f"{self.committed[partition]}"
                            )
                        self.seen[(partition, offset)] = self.seen.get((partition, offset), 0) + 1
                        offsets[partition] = max(offsets.get(partition, 0), offset + 1)
                if not offsets:
                    continue
                try:
                    self.client.commit(consumer, self.topic, offsets)
                except Exception:  # refused or lost with the connection
                    self.commit_failures += 1
                    continue
                with self.lock:
                    for partition, offset in offsets.items():
                        self.committed[partition] = max(self.committed[partition], offset)
        except Exception as e:  # reported by the main thread
            self.failure = repr(e)
        finally:
            self.client.close(consumer)

    def covers(self, ends):
        with self.lock:
            return all((p, o) in self.seen for p, end in ends.items() for o in range(end))


def end_offsets(base_url, topic):
    ends = {}
    for p in range(PARTITIONS):
        response = requests.get(f"{base_url}/topics/{topic}/partitions/{p}/offsets", timeout=REQUEST_TIMEOUT_S)
        expect_status(response, 200, f"offsets of {topic}/{p}")
        ends[p] = response.json()["end_offset"]
    return ends


def produce_stream(client, topic, acks):
    for number in range(COUNT):
        for k, milestone in enumerate(MILESTONES):
            if number == milestone:
                write_state(f"at-{k}", str(milestone))
                wait_file(f"go-{k}", client.serve)
            if number == milestone + IN_FLIGHT:
                wait_file(f"restarted-{k}", client.serve)
        client.send(topic, number % PARTITIONS, number, acks)
        time.sleep(PACE_S)
    client.flush()


def main(base_url):
    check(
        CLIENT in ("kafka-python", "confluent-kafka") and STATE_DIR is not None,
        "usage: kafka_restart_stream.py kafka-python|confluent-kafka HTTP_URL KAFKA_ADDR STATE_DIR",
    )
    topic, group = topic_for(CLIENT), group_for(CLIENT)
    create_topic(base_url, topic, PARTITIONS)
    client = KafkaPython() if CLIENT == "kafka-python" else ConfluentKafka()
    reader = Reader(client, topic, group)
    reader.start()
    acks = Acks()
    produce_stream(client, topic, acks)
    check(not acks.failures, f"{len(acks.failures)} records not acknowledged: {acks.failures[:3]}")
    check(len(acks.offsets) == COUNT, f"{len(acks.offsets)} of {COUNT} records acknowledged")

    ends = end_offsets(base_url, topic)
    deadline = time.monotonic() + DEADLINE_S
    while not reader.covers(ends):
        check(reader.is_alive(), f"the consumer stopped: {reader.failure}")
        check(time.monotonic() < deadline, f"the consumer did not read every offset up to {ends}")
        time.sleep(0.1)
    reader.stop.set()
    reader.join(timeout=60)
    check(not reader.is_alive(), "the consumer did not close within a minute")
    check(reader.failure is None, f"the consumer failed: {reader.failure}")
    check(not reader.errors, "; ".join(reader.errors[:5]))

    again = sum(times - 1 for times in reader.seen.values())
    print(
        f"{CLIENT}: {COUNT} records acknowledged through a clean restart and a kill -9, the log ends at {ends}; "
        f"the group read every offset ({again} again from uncommitted tails, "
        f"{reader.commit_failures} commits refused or lost)"
    )
    report = {"acked": [[p, o, str(n)] for n, (p, o) in sorted(acks.offsets.items())]}
    write_state("report.json", json.dumps(report))
    print("kafka_restart_stream: every acknowledged record reported")


if __name__ == "__main__":
    run(main)
