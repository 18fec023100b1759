"""REST Proxy v2 produce, then the stateless fetch, with `requests`: every
record, key, value, header and timestamp comes back in order, at the offset
the produce answered.

Usage: rest_produce_fetch.py http://127.0.0.1:PORT
"""

import requests

from tidelog_check import (
    BINARY,
    JSON,
    REQUEST_TIMEOUT_S,
    b64,
    check,
    create_topic,
    expect_status,
    fetch_all,
    run,
)


def produce(base_url, path, content_type, records):
    response = requests.post(
        f"{base_url}{path}",
        json={"records": records},
        headers={"Content-Type": content_type},
        timeout=REQUEST_TIMEOUT_S,
    )
    expect_status(response, 200, f"produce to {path}")
    body = response.json()
    offsets = body.get("offsets")
    check(
        isinstance(offsets, list) and len(offsets) == len(records),
        f"produce to {path} answered {body!r} for {len(records)} records",
    )
    for entry in offsets:
        check(
            entry.get("error_code") is None and entry.get("error") is None,
            f"produce to {path}: a record failed: {entry!r}",
        )
    return offsets


def check_record(got, topic, partition, offset, key, value, headers, timestamp, what):
    expected = {
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "key": key,
        "value": value,
        "headers": headers,
    }
    for field, want in expected.items():
        check(
            got.get(field) == want,
            f"{what}: {field} is {got.get(field)!r}, produced {want!r} (record {got!r})",
        )
    if timestamp is None:
        check(isinstance(got.get("timestamp"), int), f"{what}: no timestamp in {got!r}")
    else:
        check(
            got.get("timestamp") == timestamp,
            f"{what}: timestamp is {got.get('timestamp')!r}, produced {timestamp}",
        )


def json_records_across_partitions(base_url):
    """JSON embedded format, `POST /topics/{t}` with explicit partitions."""
    topic, partitions = "py-json", 3
    create_topic(base_url, topic, partitions)
    records = []
    for i in range(40):
        record = {
            "key": {"id": i, "tag": f"k{i}"},
            # Nested values, unicode, a big integer kept exact, a tombstone.
            "value": None if i == 17 else {"n": i, "text": f"värde {i} ✓", "big": 2**64 + i},
            "partition": i % partitions,
        }
        if i % 5 == 0:
            record["headers"] = [
                {"name": "trace", "value": b64(f"t{i}".encode())},
                {"name": "trace", "value": b64(b"duplicate kept")},
            ]
        if i % 3 == 0:
            record["timestamp"] = 1_700_000_000_000 + i
        records.append(record)
    offsets = produce(base_url, f"/topics/{topic}", JSON, records)

    for partition in range(partitions):
        sent = [(r, o) for r, o in zip(records, offsets) if r["partition"] == partition]
        for position, (_, answer) in enumerate(sent):
            check(
                answer["partition"] == partition and answer["offset"] == position,
                f"produce answered {answer!r} for the record number {position} of partition {partition}",
            )
        got = fetch_all(base_url, topic, partition, JSON, len(sent), max_records=4)
        for (record, answer), fetched in zip(sent, got):
            check_record(
                fetched,
                topic,
                partition,
                answer["offset"],
                record["key"],
                record["value"],
                record.get("headers", []),
                record.get("timestamp"),
                f"{topic}/{partition}@{answer['offset']}",
            )
    print(f"{topic}: {len(records)} json records over {partitions} partitions read back")


def binary_records_to_one_partition(base_url):
    """Binary embedded format, `POST /topics/{t}/partitions/{p}`, bytes that
    are not UTF-8, keyless records, empty values."""
    topic, partition = "py-binary", 1
    create_topic(base_url, topic, 2)
    values = [bytes([i, 0xFF, 0x00, 0xC3]) * (i + 1) for i in range(25)] + [b""]
    records = []
    for i, value in enumerate(values):
        record = {"value": b64(value)}
        if i % 2 == 0:
            record["key"] = b64(f"key-{i}".encode())
        if i % 4 == 0:
            record["headers"] = [{"name": "raw", "value": b64(bytes([0x80, i]))}]
        records.append(record)
    offsets = produce(base_url, f"/topics/{topic}/partitions/{partition}", BINARY, records)
    for position, answer in enumerate(offsets):
        check(
            answer["partition"] == partition and answer["offset"] == position,
            f"produce answered {answer!r} for record {position}",
        )
    got = fetch_all(base_url, topic, partition, BINARY, len(records), max_records=7)
    for record, answer, fetched in zip(records, offsets, got):
        check_record(
            fetched,
            topic,
            partition,
            answer["offset"],
            record.get("key"),
            record["value"],
            record.get("headers", []),
            None,
            f"{topic}/{partition}@{answer['offset']}",
        )
    print(f"{topic}: {len(records)} binary records read back")


def main(base_url):
    json_records_across_partitions(base_url)
    binary_records_to_one_partition(base_url)
    print("rest_produce_fetch: all records came back")


if __name__ == "__main__":
    run(main)
