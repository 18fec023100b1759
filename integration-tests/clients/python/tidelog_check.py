"""Shared by the client scripts: talk to a running tidelog with `requests`
exactly as docs/API.md describes, and fail loudly.

A script exits 0 when every check passed; any mismatch raises Mismatch and
the script exits 1 with what was expected and what came back.
"""

import base64
import sys
import time

import requests

# Each request is bounded; the Rust test bounds the whole script too.
REQUEST_TIMEOUT_S = 30
JSON = "application/vnd.kafka.json.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"


class Mismatch(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Mismatch(message)


def expect_status(response, status, what):
    check(
        response.status_code == status,
        f"{what}: expected HTTP {status}, got {response.status_code}: {response.text}",
    )


def admin_error(future):
    """The KafkaError a confluent-kafka AdminClient future failed with, or
    None when it succeeded."""
    from confluent_kafka import KafkaException

    try:
        future.result(timeout=REQUEST_TIMEOUT_S)
        return None
    except KafkaException as e:
        return e.args[0]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def create_topic(base_url, topic, partitions):
    response = requests.post(
        f"{base_url}/v3/clusters/tidelog/topics",
        json={"topic_name": topic, "partitions_count": partitions},
        timeout=REQUEST_TIMEOUT_S,
    )
    expect_status(response, 201, f"create topic {topic}")


def produce_http_samples(base_url, topic):
    """Creates `topic` (one partition) and produces 12 records to it over
    HTTP in the binary embedded format (keys on every other, a duplicated
    header name on every third); returns what a consumer must read back,
    as (offset, key, value, headers, timestamp)."""
    create_topic(base_url, topic, 1)
    records, expected = [], []
    for i in range(12):
        key = f"k{i}".encode() if i % 2 == 0 else None
        value = bytes([0xC3, i]) * i
        headers = [("t", bytes([i])), ("t", b"again")] if i % 3 == 0 else []
        timestamp = 1_650_000_000_000 + i
        record = {"value": b64(value), "timestamp": timestamp}
        if key is not None:
            record["key"] = b64(key)
        if headers:
            record["headers"] = [{"name": n, "value": b64(v)} for n, v in headers]
        records.append(record)
        expected.append((i, key, value, headers, timestamp))
    response = requests.post(
        f"{base_url}/topics/{topic}/partitions/0",
        json={"records": records},
        headers={"Content-Type": BINARY},
        timeout=REQUEST_TIMEOUT_S,
    )
    expect_status(response, 200, f"produce to {topic}")
    return expected


def fetch_all(base_url, topic, partition, accept, expected_count, max_records):
    """Reads a partition from offset 0 with the stateless fetch, page by page
    (each page continues from the last offset + 1, as API.md says), until
    `expected_count` records came back; fails if more arrive or the reads
    stop short within a generous deadline."""
    records = []
    offset = 0
    deadline = time.monotonic() + 60
    while len(records) < expected_count:
        check(
            time.monotonic() < deadline,
            f"{topic}/{partition}: only {len(records)} of {expected_count} records came back",
        )
        response = requests.get(
            f"{base_url}/topics/{topic}/partitions/{partition}/records",
            params={"offset": offset, "max_records": max_records, "timeout": 1000},
            headers={"Accept": accept},
            timeout=REQUEST_TIMEOUT_S,
        )
        expect_status(response, 200, f"fetch {topic}/{partition} at {offset}")
        page = response.json()
        check(isinstance(page, list), f"fetch answered {page!r}, not a bare array")
        check(
            len(page) <= max_records,
            f"fetch with max_records={max_records} answered {len(page)} records",
        )
        records.extend(page)
        if page:
            offset = page[-1]["offset"] + 1
    check(
        len(records) == expected_count,
        f"{topic}/{partition}: {len(records)} records came back, {expected_count} were produced",
    )
    return records


def http_log(base_url, topic):
    """Partition 0 of `topic` over HTTP (binary format), from offset 0:
    (offset, key, value) of every record."""
    out, offset = [], 0
    for _ in range(100):
        response = requests.get(
            f"{base_url}/topics/{topic}/partitions/0/records",
            params={"offset": offset, "max_records": 1000, "timeout": 0},
            headers={"Accept": BINARY},
            timeout=REQUEST_TIMEOUT_S,
        )
        expect_status(response, 200, f"fetch {topic} at {offset}")
        page = response.json()
        if not page:
            return out
        unb64 = lambda text: None if text is None else base64.b64decode(text)  # noqa: E731
        out.extend((r["offset"], unb64(r.get("key")), unb64(r.get("value"))) for r in page)
        offset = page[-1]["offset"] + 1
    return out


def read_values(kafka, topic, isolation, expected, partitions=(0, 1), deadline_s=60):
    """Every value of `topic`'s `partitions`, sorted, read from offset 0 by
    a confluent-kafka consumer at `isolation` (`read_committed` or
    `read_uncommitted`) until `expected` values came and every partition
    reported its end, or the deadline passed (the caller checks what came:
    fewer, or more, is a mismatch it words)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": kafka,
            "group.id": f"{topic}-{isolation}-{time.monotonic_ns()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in partitions])
    values, eofs = [], set()
    deadline = time.monotonic() + deadline_s
    last = time.monotonic()
    while time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            # Enough, and a quiet second: an end reported before the last
            # records came is not reported again until more come.
            if len(values) >= expected and time.monotonic() - last > 1.0:
                break
            continue
        last = time.monotonic()
        if m.error() is not None:
            if m.error().code() == -191:  # _PARTITION_EOF
                eofs.add(m.partition())
                if len(eofs) == len(partitions) and len(values) >= expected:
                    break
                continue
            raise Mismatch(f"{topic} consumer error: {m.error()}")
        values.append(m.value().decode())
    c.close()
    return sorted(values)


def run(main):
    """Runs `main(base_url)` with the URL from argv; exit 1 on a mismatch."""
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} http://127.0.0.1:PORT", file=sys.stderr)
        sys.exit(2)
    try:
        main(sys.argv[1].rstrip("/"))
    except Mismatch as mismatch:
        print(f"MISMATCH: {mismatch}", file=sys.stderr)
        sys.exit(1)
