"""A real-client produce figure: confluent-kafka (librdkafka) producing N
records of S bytes to a tidelog Kafka listener in one bounded Python loop,
with librdkafka's usual batching (linger.ms 5, batch.size 1 MB), acks 1.

Prints records/s over the whole run (first produce() to the last delivery
report after flush()), the delivery errors, how long the produce() loop
itself took, and the CPU this process used: all its threads (librdkafka's
I/O threads included) and the Python main thread alone. When the loop
takes nearly the whole run (the broker acknowledges as fast as Python
hands records to librdkafka), the figure is client-bound: the Python loop
is the limit (on a shared machine its thread may also wait for a core,
so its CPU share alone does not tell).

    python bench-kafka-client.py BOOTSTRAP TOPIC [RECORDS] [RECORD_BYTES] [ACKS]
"""

import os
import resource
import sys
import time

from confluent_kafka import Producer

FLUSH_TIMEOUT_S = 120.0
DEADLINE_S = 600.0


def main():
    bootstrap, topic = sys.argv[1], sys.argv[2]
    records = int(sys.argv[3]) if len(sys.argv) > 3 else 1_000_000
    record_bytes = int(sys.argv[4]) if len(sys.argv) > 4 else 100
    acks = sys.argv[5] if len(sys.argv) > 5 else "1"
    if not (1 <= records <= 100_000_000 and 1 <= record_bytes <= 1 << 20):
        sys.exit("RECORDS must be 1..1e8 and RECORD_BYTES 1..1 MiB")
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "enable.idempotence": False,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "compression.type": "none",
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    value = os.urandom(record_bytes)
    outcome = {"ok": 0, "failed": 0, "first_error": None}

    def delivered(err, _msg):
        if err is None:
            outcome["ok"] += 1
        else:
            outcome["failed"] += 1
            if outcome["first_error"] is None:
                outcome["first_error"] = str(err)

    # Warm-up: one record, so connection set-up and metadata fall outside.
    producer.produce(topic, value, on_delivery=delivered)
    producer.flush(FLUSH_TIMEOUT_S)
    outcome["ok"] = 0

    usage_before = resource.getrusage(resource.RUSAGE_SELF)
    thread_before = time.thread_time()
    start = time.monotonic()
    deadline = start + DEADLINE_S
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, on_delivery=delivered)
                break
            except BufferError:
                # The local queue is full: serve delivery reports, retry.
                producer.poll(0.001)
                if time.monotonic() > deadline:
                    sys.exit(f"past the {DEADLINE_S} s deadline after {i} records")
        if i % 10_000 == 0:
            producer.poll(0)
    queued = time.monotonic() - start
    left = producer.flush(FLUSH_TIMEOUT_S)
    elapsed = time.monotonic() - start
    thread_cpu = time.thread_time() - thread_before
    usage_after = resource.getrusage(resource.RUSAGE_SELF)
    process_cpu = (usage_after.ru_utime - usage_before.ru_utime) + (
        usage_after.ru_stime - usage_before.ru_stime
    )
    rate = outcome["ok"] / elapsed if elapsed > 0 else 0.0
    print(
        f"confluent-kafka producer: {outcome['ok']} of {records} records x {record_bytes} B "
        f"acknowledged in {elapsed:.2f} s (all queued after {queued:.2f} s): {rate:.0f} records/s, "
        f"{rate * record_bytes / 1e6:.2f} MB/s; {outcome['failed']} failed, {left} not delivered"
    )
    if outcome["first_error"]:
        print(f"first delivery error: {outcome['first_error']}")
    main_share = thread_cpu / elapsed if elapsed > 0 else 0.0
    loop_share = queued / elapsed if elapsed > 0 else 0.0
    print(
        f"client CPU: process {process_cpu / elapsed * 100:.0f} % of one core "
        f"(librdkafka threads included), Python main thread {main_share * 100:.0f} %"
    )
    if loop_share >= 0.9:
        bound = f"client-bound: the produce() loop took {loop_share * 100:.0f} % of the run"
    else:
        bound = f"not client-bound: the produce() loop took {loop_share * 100:.0f} % of the run, the rest waited for acknowledgements"
    print(f"verdict: {bound}")
    sys.exit(0 if outcome["failed"] == 0 and left == 0 else 1)


if __name__ == "__main__":
    main()
