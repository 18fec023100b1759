"""A Kafka client over TLS (security.protocol=SSL) against tidelog's SSL
listener: produce COUNT records to partition 0 of TOPIC (made empty by
the test), consume them back from offset 0 and check every value; with
CERT and KEY, the client presents that certificate (mTLS). confluent-kafka
also prints the brokers Metadata named (the listener it came in on).

With --expect-refused the client must fail to get Metadata (a server that
requires a client certificate and got none) and the script says so.

Usage: ssl_clients.py confluent-kafka|kafka-python BOOTSTRAP TOPIC CA_FILE [CERT KEY] [--expect-refused]
"""

import sys
import time

from tidelog_check import Mismatch, check

COUNT = 20
DEADLINE_S = 60


def confluent(bootstrap, topic, ca, cert, key, expect_refused):
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    conf = {"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": ca}
    if cert:
        conf.update({"ssl.certificate.location": cert, "ssl.key.location": key})
    producer = Producer({**conf, "enable.idempotence": False, "acks": "all"})
    if expect_refused:
        try:
            producer.list_topics(timeout=5)
        except KafkaException as refused:
            print(f"ssl_clients: confluent-kafka refused: {refused}")
            return
        raise Mismatch("confluent-kafka got Metadata without a client certificate")
    metadata = producer.list_topics(timeout=30)
    for broker in metadata.brokers.values():
        print(f"broker {broker.host}:{broker.port}")
    delivered = []
    errors = []

    def report(error, message):
        (errors if error else delivered).append(error or message.offset())

    values = [f"tls-confluent-{i}".encode() for i in range(COUNT)]
    for value in values:
        producer.produce(topic, value=value, partition=0, on_delivery=report)
    check(producer.flush(30) == 0, "confluent-kafka: records still unsent after 30 s")
    check(not errors, f"confluent-kafka: delivery errors {errors}")
    check(sorted(delivered) == list(range(COUNT)), f"confluent-kafka: offsets {delivered}")
    consumer = Consumer({**conf, "group.id": "tls-confluent", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = []
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < COUNT and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            check(message.error() is None, f"confluent-kafka: consume error {message.error()}")
            got.append(message.value())
        check(got == values, f"confluent-kafka: consumed {got}, produced {values}")
    finally:
        consumer.close()


def kafka_python(bootstrap, topic, ca, cert, key, expect_refused):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    check(not expect_refused, "kafka-python: --expect-refused is confluent-kafka's")
    tls = {"bootstrap_servers": bootstrap, "security_protocol": "SSL", "ssl_cafile": ca}
    if cert:
        tls.update({"ssl_certfile": cert, "ssl_keyfile": key})
    producer = KafkaProducer(**tls, acks="all", enable_idempotence=False)
    values = [f"tls-kafka-python-{i}".encode() for i in range(COUNT)]
    futures = [producer.send(topic, value=value, partition=0) for value in values]
    producer.flush(timeout=30)
    offsets = [future.get(timeout=30).offset for future in futures]
    check(offsets == list(range(COUNT)), f"kafka-python: offsets {offsets}")
    producer.close()
    consumer = KafkaConsumer(**tls, group_id=None, enable_auto_commit=False, consumer_timeout_ms=1000)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got = []
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < COUNT and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=1000).values():
                got.extend(record.value for record in batch)
        check(got == values, f"kafka-python: consumed {got}, produced {values}")
    finally:
        consumer.close()


def main():
    args = [a for a in sys.argv[1:] if a != "--expect-refused"]
    expect_refused = len(args) != len(sys.argv) - 1
    if len(args) not in (4, 6):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    client, bootstrap, topic, ca = args[:4]
    cert, key = (args[4], args[5]) if len(args) == 6 else (None, None)
    run = {"confluent-kafka": confluent, "kafka-python": kafka_python}[client]
    try:
        run(bootstrap, topic, ca, cert, key, expect_refused)
    except Mismatch as mismatch:
        print(f"MISMATCH: {mismatch}", file=sys.stderr)
        sys.exit(1)
    print(f"ssl_clients: {client} done")


if __name__ == "__main__":
    main()
