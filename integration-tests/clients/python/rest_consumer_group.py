"""REST Proxy v2 consumer instances with `requests`, written the way
Confluent's REST Proxy docs use them: create an instance in a group, follow
its `base_uri`, subscribe, poll records, commit, delete.

Two phases, with a tidelog restart between them (the Rust test stops and
starts the server on the same data dir):

* `split`: two instances of one group split a 4-partition topic; each
  record comes from the instance that holds its partition, every record
  exactly once. One instance commits and is deleted: the other takes its
  partitions and continues at its committed offsets (nothing re-read).
  Then the survivor reads a tail it does not commit.
* `resume`: after the restart the old instance is gone (40403); a new one
  in the group gets exactly the uncommitted tail again. With no members
  left, the group continues over the ext offsets route and the stateless
  fetch at the same committed offsets, and an instance created after an
  ext commit starts there.

Usage: rest_consumer_group.py http://127.0.0.1:PORT split|resume
"""

import sys
import time

import requests

from tidelog_check import (
    JSON,
    REQUEST_TIMEOUT_S,
    check,
    create_topic,
    expect_status,
    run,
)

V2 = "application/vnd.kafka.v2+json"
TOPIC = "orders"
PARTITIONS = 4
GROUP = "orders-app"
# Generous: the first rebalance of a group waits for more members.
WAIT_S = 60


def produce(base_url, first, count):
    """`count` JSON records `{"n": first..}`, record i to partition i % 4;
    answers {(partition, offset): n}."""
    records = [
        {"key": f"k{n}", "value": {"n": n}, "partition": n % PARTITIONS}
        for n in range(first, first + count)
    ]
    response = requests.post(
        f"{base_url}/topics/{TOPIC}",
        json={"records": records},
        headers={"Content-Type": JSON},
        timeout=REQUEST_TIMEOUT_S,
    )
    expect_status(response, 200, f"produce {count} records")
    offsets = response.json()["offsets"]
    return {(o["partition"], o["offset"]): r["value"]["n"] for o, r in zip(offsets, records)}


def create_instance(base_url, name):
    response = requests.post(
        f"{base_url}/consumers/{GROUP}",
        json={
            "name": name,
            "format": "json",
            "auto.offset.reset": "earliest",
            "auto.commit.enable": "false",
        },
        headers={"Content-Type": V2},
        timeout=REQUEST_TIMEOUT_S,
    )
    expect_status(response, 200, f"create instance {name}")
    body = response.json()
    check(body.get("instance_id") == name, f"create answered {body!r}")
    want = f"{base_url}/consumers/{GROUP}/instances/{name}"
    check(body.get("base_uri") == want, f"base_uri is {body.get('base_uri')!r}, not {want!r}")
    return body["base_uri"]


def subscribe(base_uri):
    response = requests.post(
        f"{base_uri}/subscription",
        json={"topics": [TOPIC]},
        headers={"Content-Type": V2},
        timeout=REQUEST_TIMEOUT_S,
    )
    expect_status(response, 204, f"subscribe {base_uri}")


def assignments(base_uri):
    response = requests.get(
        f"{base_uri}/assignments", headers={"Accept": V2}, timeout=REQUEST_TIMEOUT_S
    )
    expect_status(response, 200, f"assignments of {base_uri}")
    parts = response.json()["partitions"]
    check(all(p["topic"] == TOPIC for p in parts), f"assignments {parts!r} name other topics")
    return sorted(p["partition"] for p in parts)


def wait_for_assignments(instances, want):
    """Waits until each base_uri holds the partition count in `want`, the
    holdings disjoint and covering the topic; answers {base_uri: [p...]}."""
    deadline = time.monotonic() + WAIT_S
    while True:
        held = {uri: assignments(uri) for uri in instances}
        counts = [len(held[uri]) for uri in instances]
        every = sorted(p for parts in held.values() for p in parts)
        if counts == want and every == list(range(PARTITIONS)):
            return held
        check(
            time.monotonic() < deadline,
            f"the group never settled to {want} partitions each: {held!r}",
        )
        time.sleep(0.05)


def poll(base_uri):
    response = requests.get(
        f"{base_uri}/records",
        params={"timeout": 500, "max_bytes": 65536},
        headers={"Accept": JSON},
        timeout=REQUEST_TIMEOUT_S,
    )
    expect_status(response, 200, f"records of {base_uri}")
    page = response.json()
    check(isinstance(page, list), f"records answered {page!r}, not a bare array")
    return page


def consume(instances, expected, held=None):
    """Polls the instances in turn until exactly the records of `expected`
    ({(partition, offset): n}) came back, each once; a record from a
    partition its instance does not hold (`held`) fails."""
    seen = {}
    deadline = time.monotonic() + WAIT_S
    while len(seen) < len(expected):
        check(
            time.monotonic() < deadline,
            f"only {len(seen)} of {len(expected)} records came back: missing "
            f"{sorted(set(expected) - set(seen))[:8]}",
        )
        for uri in instances:
            for record in poll(uri):
                at = (record["partition"], record["offset"])
                check(record["topic"] == TOPIC, f"record of another topic: {record!r}")
                check(at in expected, f"{uri} returned {at}, which it should not read now")
                check(at not in seen, f"{at} came back twice")
                check(
                    record["value"] == {"n": expected[at]} and record["key"] == f"k{expected[at]}",
                    f"{at}: got {record!r}, produced n={expected[at]}",
                )
                check(isinstance(record.get("timestamp"), int), f"no timestamp in {record!r}")
                if held is not None:
                    check(
                        record["partition"] in held[uri],
                        f"{uri} returned partition {record['partition']}, "
                        f"held by another instance ({held!r})",
                    )
                seen[at] = uri
    return seen


def commit(base_uri, offsets=None):
    """Commits the offsets given, or with no body everything returned."""
    if offsets is None:
        response = requests.post(
            f"{base_uri}/offsets", headers={"Content-Type": V2}, timeout=REQUEST_TIMEOUT_S
        )
    else:
        response = requests.post(
            f"{base_uri}/offsets",
            json={"offsets": offsets},
            headers={"Content-Type": V2},
            timeout=REQUEST_TIMEOUT_S,
        )
    expect_status(response, 200, f"commit {base_uri}")


def committed(base_uri, partitions):
    response = requests.get(
        f"{base_uri}/offsets",
        json={"partitions": [{"topic": TOPIC, "partition": p} for p in partitions]},
        headers={"Content-Type": V2},
        timeout=REQUEST_TIMEOUT_S,
    )
    expect_status(response, 200, f"committed offsets of {base_uri}")
    return {o["partition"]: o["offset"] for o in response.json()["offsets"]}


def group_offsets(base_url):
    response = requests.get(f"{base_url}/consumer-groups/{GROUP}/offsets", timeout=REQUEST_TIMEOUT_S)
    expect_status(response, 200, "ext group offsets")
    return {o["partition"]: o["offset"] for o in response.json()["offsets"] if o["topic"] == TOPIC}


def ext_commit(base_url, offset):
    return requests.post(
        f"{base_url}/consumer-groups/{GROUP}/offsets",
        json={
            "offsets": [
                {"topic": TOPIC, "partition": p, "offset": offset} for p in range(PARTITIONS)
            ]
        },
        timeout=REQUEST_TIMEOUT_S,
    )


def delete(base_uri):
    response = requests.delete(base_uri, headers={"Content-Type": V2}, timeout=REQUEST_TIMEOUT_S)
    expect_status(response, 204, f"delete {base_uri}")


def every_partition_at(offsets, offset, what):
    want = {p: offset for p in range(PARTITIONS)}
    check(offsets == want, f"{what}: committed offsets are {offsets!r}, expected {want!r}")


def split(base_url):
    create_topic(base_url, TOPIC, PARTITIONS)
    first = produce(base_url, 0, 40)  # offsets 0..9 in every partition
    a = create_instance(base_url, "instance-a")
    b = create_instance(base_url, "instance-b")
    subscribe(a)
    subscribe(b)
    held = wait_for_assignments([a, b], [2, 2])
    seen = consume([a, b], first, held)
    print(f"split: two instances read {len(seen)} records, each from its own partitions")

    # A commits everything it returned (no body); B names its last offsets
    # (Confluent's rule: the last consumed, stored as + 1).
    commit(a)
    commit(b, [{"topic": TOPIC, "partition": p, "offset": 9} for p in held[b]])
    every_partition_at(committed(a, range(PARTITIONS)), 10, "after the first commits")

    second = produce(base_url, 40, 20)  # offsets 10..14
    delete(a)
    wait_for_assignments([b], [PARTITIONS])
    consume([b], second)
    commit(b)
    every_partition_at(group_offsets(base_url), 15, "after the handover")
    print("split: the deleted instance's partitions moved on at its committed offsets")

    # Read but never committed: the tail the next phase gets again.
    tail = produce(base_url, 60, 8)  # offsets 15, 16
    consume([b], tail)
    print("split: done")


def resume(base_url):
    gone = requests.get(
        f"{base_url}/consumers/{GROUP}/instances/instance-b/assignments",
        headers={"Accept": V2},
        timeout=REQUEST_TIMEOUT_S,
    )
    expect_status(gone, 404, "an instance from before the restart")
    check(gone.json().get("error_code") == 40403, f"answered {gone.text}")

    c = create_instance(base_url, "instance-c")
    subscribe(c)
    wait_for_assignments([c], [PARTITIONS])
    tail = {(p, o): 60 + (o - 15) * PARTITIONS + p for p in range(PARTITIONS) for o in (15, 16)}
    consume([c], tail)
    check(poll(c) == [], "records past the uncommitted tail came back")
    commit(c, [{"topic": TOPIC, "partition": p, "offset": 16} for p in range(PARTITIONS)])

    # While the group has a member, the stateless route may not move it.
    refused = ext_commit(base_url, 0)
    expect_status(refused, 409, "ext commit while the group has members")
    check(refused.json().get("error_code") == 40903, f"answered {refused.text}")
    delete(c)
    print("resume: after the restart a new instance got exactly the uncommitted tail")

    # No members: the ext route and the stateless fetch carry on from the
    # group's committed offsets.
    offsets = group_offsets(base_url)
    every_partition_at(offsets, 17, "after the restart")
    more = produce(base_url, 68, 4)  # offset 17
    for p in range(PARTITIONS):
        response = requests.get(
            f"{base_url}/topics/{TOPIC}/partitions/{p}/records",
            params={"offset": offsets[p], "timeout": 1000},
            headers={"Accept": JSON},
            timeout=REQUEST_TIMEOUT_S,
        )
        expect_status(response, 200, f"stateless fetch of {p} at {offsets[p]}")
        got = [(r["partition"], r["offset"], r["value"]["n"]) for r in response.json()]
        want = [(p, 17, more[(p, 17)])]
        check(got == want, f"stateless fetch at the committed offset: {got!r}, expected {want!r}")
    expect_status(ext_commit(base_url, 18), 204, "ext commit of a group without members")

    d = create_instance(base_url, "instance-d")
    subscribe(d)
    wait_for_assignments([d], [PARTITIONS])
    last = produce(base_url, 72, 4)  # offset 18
    consume([d], last)
    delete(d)
    print("rest_consumer_group: every record once, resumed across restarts")


PHASES = {"split": split, "resume": resume}

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in PHASES:
        print(f"usage: {sys.argv[0]} http://127.0.0.1:PORT split|resume", file=sys.stderr)
        sys.exit(2)
    run(PHASES[sys.argv.pop()])
