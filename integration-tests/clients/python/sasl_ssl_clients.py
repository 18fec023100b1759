"""Kafka clients logging in over TLS against a tidelog that requires logins
and checks ACLs (docs/SECURITY.md): SASL_SSL with SCRAM, and SSL with a
client certificate whose CN is the principal.

Each allowed run, as the principal the test granted ALL on the topic prefix
`sec-` and READ on the group prefix `sec-`: one admin call (CreateTopics of
TOPIC), produce COUNT records, consume them in group TOPIC, commit, and
read the commit back. Then (SCRAM) the same user with a wrong password:
the client's authentication error, and nothing produced (the partition's
end offset is still COUNT).

Modes:
  confluent-scram BOOTSTRAP CA TOPIC USER PASSWORD      SASL_SSL, SCRAM-SHA-512
  kafka-python-scram BOOTSTRAP CA TOPIC USER PASSWORD   SASL_SSL, SCRAM-SHA-256
  confluent-cert BOOTSTRAP CA TOPIC CERT KEY [--denied] SSL with a client certificate;
      --denied: the CN has no ACL, producing to TOPIC (made by the test) is
      TOPIC_AUTHORIZATION_FAILED
"""

import logging
import sys
import time

from tidelog_check import Mismatch, check

COUNT = 10
TIMEOUT_S = 30


def confluent_conf(bootstrap, ca, **extra):
    return {"bootstrap.servers": bootstrap, "ssl.ca.location": ca, **extra}


def confluent_round_trip(conf, topic):
    """CreateTopics, produce, consume in a group, commit, read the commit."""
    from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(conf)
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(TIMEOUT_S)
    producer = Producer({**conf, "enable.idempotence": False, "acks": "all"})
    delivered, errors = [], []

    def report(error, message):
        (errors if error else delivered).append(error or message.offset())

    values = [f"{topic}-{i}".encode() for i in range(COUNT)]
    for value in values:
        producer.produce(topic, value=value, partition=0, on_delivery=report)
    check(producer.flush(TIMEOUT_S) == 0, "confluent-kafka: records unsent")
    check(not errors and sorted(delivered) == list(range(COUNT)),
          f"confluent-kafka: delivered {delivered}, errors {errors}")
    consumer = Consumer({**conf, "group.id": topic, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        got = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < COUNT and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                check(message.error().code() == KafkaError._PARTITION_EOF,
                      f"confluent-kafka: consume error {message.error()}")
                continue
            got.append(message.value())
        check(got == values, f"confluent-kafka: consumed {got}, produced {values}")
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(topic, 0)], timeout=TIMEOUT_S)
        check(committed[0].offset == COUNT, f"confluent-kafka: committed {committed}")
    finally:
        consumer.close()


def confluent_end_offset(conf, topic):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**conf, "group.id": topic})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S)[1]
    finally:
        consumer.close()


def confluent_scram(bootstrap, ca, topic, user, password):
    from confluent_kafka import KafkaError, Producer

    def scram(secret):
        return confluent_conf(bootstrap, ca, **{
            "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user, "sasl.password": secret})

    confluent_round_trip(scram(password), topic)
    seen, delivered = [], []
    producer = Producer({**scram("wrong-" + password), "error_cb": seen.append,
                         "message.timeout.ms": 5000})
    producer.produce(topic, b"never", partition=0, on_delivery=lambda e, m: delivered.append(e))
    producer.flush(TIMEOUT_S)
    check(any(e.code() == KafkaError._AUTHENTICATION for e in seen),
          f"confluent-kafka: a wrong password is an authentication error: {seen}")
    check(delivered and delivered[0] is not None, f"confluent-kafka: wrong password delivered {delivered}")
    end = confluent_end_offset(scram(password), topic)
    check(end == COUNT, f"confluent-kafka: a wrong password produced something: end offset {end}")


def confluent_cert(bootstrap, ca, topic, cert, key, denied):
    from confluent_kafka import KafkaError, Producer

    conf = confluent_conf(bootstrap, ca, **{
        "security.protocol": "SSL", "ssl.certificate.location": cert, "ssl.key.location": key})
    if not denied:
        confluent_round_trip(conf, topic)
        return
    delivered = []
    producer = Producer({**conf, "message.timeout.ms": 10000})
    try:
        producer.produce(topic, b"denied", partition=0, on_delivery=lambda e, m: delivered.append(e))
        producer.flush(TIMEOUT_S)
        error = delivered[0] if delivered else "undelivered"
    except Exception as e:  # noqa: BLE001 - librdkafka raises what it knows
        error = e.args[0] if e.args else e
    check(hasattr(error, "code") and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED,
          f"confluent-kafka: a CN without ACLs produced: {error}")


class ConnectionErrors(logging.Handler):
    """The exceptions kafka-python logs as errors."""

    def __init__(self):
        super().__init__(level=logging.ERROR)
        self.errors = []

    def emit(self, record):
        args = record.args if isinstance(record.args, tuple) else ()
        self.errors.extend(a for a in args if isinstance(a, Exception))


def kafka_python_scram(bootstrap, ca, topic, user, password):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic
    from kafka.errors import KafkaError, SaslAuthenticationFailedError

    def scram(secret):
        return {"bootstrap_servers": bootstrap, "security_protocol": "SASL_SSL", "ssl_cafile": ca,
                "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": user,
                "sasl_plain_password": secret}

    admin = KafkaAdminClient(**scram(password))
    admin.create_topics([NewTopic(topic, 1, 1)], timeout_ms=TIMEOUT_S * 1000)
    admin.close()
    producer = KafkaProducer(**scram(password), acks="all", enable_idempotence=False)
    values = [f"{topic}-{i}".encode() for i in range(COUNT)]
    futures = [producer.send(topic, value=value, partition=0) for value in values]
    producer.flush(timeout=TIMEOUT_S)
    offsets = [future.get(timeout=TIMEOUT_S).offset for future in futures]
    check(offsets == list(range(COUNT)), f"kafka-python: offsets {offsets}")
    producer.close()
    consumer = KafkaConsumer(topic, **scram(password), group_id=topic, auto_offset_reset="earliest",
                             enable_auto_commit=False)
    try:
        got = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < COUNT and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                got.extend(record.value for record in batch)
        check(got == values, f"kafka-python: consumed {got}, produced {values}")
        consumer.commit()
        tp = TopicPartition(topic, 0)
        committed = consumer.committed(tp)
        check(committed == COUNT, f"kafka-python: committed {committed}")
    finally:
        consumer.close()

    # kafka-python reports a refused login as the connection's error (logged
    # by its connection manager) and its caller sees only that no broker
    # could be reached: both are checked.
    seen = ConnectionErrors()
    logging.getLogger("kafka").addHandler(seen)
    failure = None
    try:
        wrong = KafkaProducer(**scram("wrong-" + password), acks="all", enable_idempotence=False,
                              max_block_ms=10000)
        try:
            wrong.send(topic, value=b"never", partition=0).get(timeout=TIMEOUT_S)
        finally:
            wrong.close(timeout=5)
    except KafkaError as e:
        failure = e
    logging.getLogger("kafka").removeHandler(seen)
    check(failure is not None, "kafka-python: a wrong password produced")
    check(any(isinstance(e, SaslAuthenticationFailedError) for e in seen.errors),
          f"kafka-python: a wrong password is SASL_AUTHENTICATION_FAILED: {failure!r}, {seen.errors}")
    consumer = KafkaConsumer(**scram(password))
    try:
        end = consumer.end_offsets([tp])[tp]
    finally:
        consumer.close()
    check(end == COUNT, f"kafka-python: a wrong password produced something: end offset {end}")


def main():
    args = [a for a in sys.argv[1:] if a != "--denied"]
    denied = len(args) != len(sys.argv) - 1
    if len(args) != 6:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    mode, bootstrap, ca, topic, a, b = args
    try:
        if mode == "confluent-scram":
            confluent_scram(bootstrap, ca, topic, a, b)
        elif mode == "kafka-python-scram":
            kafka_python_scram(bootstrap, ca, topic, a, b)
        elif mode == "confluent-cert":
            confluent_cert(bootstrap, ca, topic, a, b, denied)
        else:
            raise Mismatch(f"unknown mode {mode}")
    except Mismatch as mismatch:
        print(f"MISMATCH: {mismatch}", file=sys.stderr)
        sys.exit(1)
    print(f"sasl_ssl_clients: {mode} done")


if __name__ == "__main__":
    main()
