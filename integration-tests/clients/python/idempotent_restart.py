"""An idempotent producer across a tidelog restart: kafka-python 3's
default producer (idempotent) or confluent-kafka with
`enable.idempotence=true` produces 400 records to one partition, in two
halves; between them it prints RESTART and keeps sending while the Rust
test kills tidelog with SIGKILL (under `flush: sync`) and starts it again,
then prints RESTARTED on stdin. The batches in flight at the kill are
retried by the client against the restarted server. Every acknowledged
record must be in the partition exactly once, at the offset its produce
answered, and no record twice.

Usage: idempotent_restart.py kafka-python|confluent-kafka http://127.0.0.1:PORT 127.0.0.1:KAFKA_PORT
"""

import base64
import sys

from tidelog_check import BINARY, check, create_topic, fetch_all, run

CLIENT = sys.argv.pop(1) if len(sys.argv) == 4 else None
KAFKA = sys.argv.pop(2) if len(sys.argv) == 3 else None
RECORDS = 400
TOPIC = f"idem-{CLIENT}"


def value(i):
    return f"record-{i}".encode()


def kafka_python_producer():
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=KAFKA,
        acks="all",
        linger_ms=5,
        retries=1_000_000,
        retry_backoff_ms=100,
        request_timeout_ms=5000,
        delivery_timeout_ms=120_000,
        reconnect_backoff_ms=100,
        reconnect_backoff_max_ms=500,
    )
    check(
        producer.config.get("enable_idempotence"),
        "kafka-python's producer is not idempotent by default",
    )
    acked = {}

    def send(i):
        future = producer.send(TOPIC, value=value(i), partition=0)
        future.add_callback(lambda md, i=i: acked.__setitem__(i, md.offset))

    return send, lambda: producer.flush(timeout=120), producer.close, acked


def confluent_producer():
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": KAFKA,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 120_000,
            "reconnect.backoff.ms": 100,
            "reconnect.backoff.max.ms": 500,
        }
    )
    acked = {}

    def report(err, msg, i):
        if err is None:
            acked[i] = msg.offset()

    def send(i):
        producer.produce(TOPIC, value=value(i), partition=0, on_delivery=lambda e, m, i=i: report(e, m, i))
        producer.poll(0)

    def flush():
        left = producer.flush(120)
        check(left == 0, f"{left} records still queued after 120 s")

    return send, flush, lambda: None, acked


def main(base_url):
    create_topic(base_url, TOPIC, 1)
    send, flush, close, acked = (kafka_python_producer if CLIENT == "kafka-python" else confluent_producer)()
    for i in range(RECORDS // 2):
        send(i)
    flush()
    check(len(acked) == RECORDS // 2, f"{len(acked)} of the first {RECORDS // 2} acknowledged")
    # Keep sending while the server is killed and started again.
    print("RESTART", flush=True)
    for i in range(RECORDS // 2, RECORDS // 2 + 50):
        send(i)
    check(sys.stdin.readline().strip() == "RESTARTED", "the test did not restart tidelog")
    for i in range(RECORDS // 2 + 50, RECORDS):
        send(i)
    flush()
    close()
    check(len(acked) == RECORDS, f"{len(acked)} of {RECORDS} records acknowledged")
    records = fetch_all(base_url, TOPIC, 0, BINARY, RECORDS, 500)
    seen = {}
    for r in records:
        v = base64.b64decode(r["value"])
        check(v not in seen, f"{v!r} is in the partition twice, at {seen.get(v)} and {r['offset']}")
        seen[v] = r["offset"]
    for i, offset in acked.items():
        check(seen.get(value(i)) == offset, f"record {i} acknowledged at {offset}, found at {seen.get(value(i))}")
    print(f"idempotent_restart {CLIENT}: every acknowledged record exactly once")


run(main)
