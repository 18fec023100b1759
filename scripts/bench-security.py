"""What security costs, measured with a real client (confluent-kafka,
librdkafka) against one tidelog in one run (scripts/bench-security.sh
starts it): produce and fetch records/s and the server's CPU per record
over the PLAINTEXT listener and over the SASL_SSL one (SCRAM-SHA-512),
alternating, each measured REPEATS times; then the server CPU of one SCRAM
login.

    python bench-security.py SERVER_PID PLAIN_BOOTSTRAP SECURE_BOOTSTRAP CA_FILE USER PASSWORD TOPIC [RECORDS] [REPEATS] [LOGINS]
    python bench-security.py acl-compare PID_OPEN BOOTSTRAP_OPEN PID_ACL BOOTSTRAP_ACL CA_FILE USER PASSWORD TOPIC [RECORDS] [REPEATS]

Prints one line per measurement and a summary; the figures are ratios
measured in the same run, never compared with another machine's.
"""

import os
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

CLK_TCK = os.sysconf("SC_CLK_TCK")
TIMEOUT_S = 300.0


def server_cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 (1-based) of the whole line.
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def conf(bootstrap, secure, ca, user, password):
    c = {"bootstrap.servers": bootstrap}
    if secure:
        c.update({
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": ca,
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user,
            "sasl.password": password,
        })
    return c


def produce(pid, base, topic, records, value):
    producer = Producer({**base, "acks": "1", "linger.ms": 5, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 1_000_000, "enable.idempotence": False})
    producer.produce(topic, value)
    producer.flush(TIMEOUT_S)
    failed = []
    cpu0, t0 = server_cpu_s(pid), time.monotonic()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value, on_delivery=lambda e, m: e and failed.append(e))
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(TIMEOUT_S)
    elapsed, cpu = time.monotonic() - t0, server_cpu_s(pid) - cpu0
    if failed:
        sys.exit(f"produce failed: {failed[0]}")
    return records / elapsed, cpu / records


def fetch(pid, base, topic, start, records):
    consumer = Consumer({**base, "group.id": f"bench-{time.monotonic_ns()}", "enable.auto.commit": False,
                         "fetch.max.bytes": 52_428_800})
    consumer.assign([TopicPartition(topic, 0, start)])
    got = 0
    cpu0, t0 = server_cpu_s(pid), time.monotonic()
    deadline = t0 + TIMEOUT_S
    while got < records and time.monotonic() < deadline:
        for message in consumer.consume(10_000, 1.0):
            if message.error() is None:
                got += 1
    elapsed, cpu = time.monotonic() - t0, server_cpu_s(pid) - cpu0
    consumer.close()
    if got < records:
        sys.exit(f"fetch read {got} of {records}")
    return records / elapsed, cpu / records


def acl_compare():
    """Produce over SASL_SSL to two servers alternately: one without
    authorization, one checking 10,000 ACLs; records/s and server CPU."""
    pid_open, open_bootstrap, pid_acl, acl_bootstrap, ca, user, password, topic = sys.argv[2:10]
    records = int(sys.argv[10]) if len(sys.argv) > 10 else 200_000
    repeats = int(sys.argv[11]) if len(sys.argv) > 11 else 2
    value = os.urandom(100)
    figures = {"none": [], "10000 ACLs": []}
    for round_ in range(repeats):
        order = [("none", int(pid_open), open_bootstrap), ("10000 ACLs", int(pid_acl), acl_bootstrap)]
        if round_ % 2:
            order.reverse()
        for name, pid, bootstrap in order:
            rate, cpu = produce(pid, conf(bootstrap, True, ca, user, password), topic, records, value)
            figures[name].append((rate, cpu))
            print(f"authorization {name:10} produce {rate:10.0f} rec/s {cpu * 1e6:6.2f} us/rec server CPU", flush=True)
    rate = {k: max(r for r, _ in v) for k, v in figures.items()}
    cpu = {k: min(c for _, c in v) for k, v in figures.items()}
    print(f"summary authorization produce rec/s: none {rate['none']:.0f}, 10000 ACLs {rate['10000 ACLs']:.0f}, "
          f"ratio {rate['10000 ACLs'] / rate['none']:.2f}; server CPU us/rec {cpu['none'] * 1e6:.2f} vs "
          f"{cpu['10000 ACLs'] * 1e6:.2f}")


def main():
    if sys.argv[1] == "acl-compare":
        return acl_compare()
    pid, plain, secure, ca, user, password, topic = sys.argv[1:8]
    records = int(sys.argv[8]) if len(sys.argv) > 8 else 200_000
    repeats = int(sys.argv[9]) if len(sys.argv) > 9 else 2
    logins = int(sys.argv[10]) if len(sys.argv) > 10 else 20
    pid = int(pid)
    value = os.urandom(100)
    figures = {}
    offset = 1  # the first produce's warm-up record
    for round_ in range(repeats):
        order = [("PLAINTEXT", False), ("SASL_SSL", True)]
        if round_ % 2:
            order.reverse()
        for name, is_secure in order:
            base = conf(secure if is_secure else plain, is_secure, ca, user, password)
            p_rate, p_cpu = produce(pid, base, topic, records, value)
            f_rate, f_cpu = fetch(pid, base, topic, offset, records)
            offset += records + 1
            figures.setdefault(name, []).append((p_rate, p_cpu, f_rate, f_cpu))
            print(f"{name:9} produce {p_rate:10.0f} rec/s {p_cpu * 1e6:6.2f} us/rec server CPU | "
                  f"fetch {f_rate:10.0f} rec/s {f_cpu * 1e6:6.2f} us/rec", flush=True)

    def best(name, i):
        return max(f[i] for f in figures[name]) if i in (0, 2) else min(f[i] for f in figures[name])

    for i, what in [(0, "produce rec/s"), (2, "fetch rec/s")]:
        ratio = best("SASL_SSL", i) / best("PLAINTEXT", i)
        print(f"summary {what}: PLAINTEXT {best('PLAINTEXT', i):.0f}, SASL_SSL {best('SASL_SSL', i):.0f}, ratio {ratio:.2f}")
    for i, what in [(1, "produce server CPU us/rec"), (3, "fetch server CPU us/rec")]:
        print(f"summary {what}: PLAINTEXT {best('PLAINTEXT', i) * 1e6:.2f}, SASL_SSL {best('SASL_SSL', i) * 1e6:.2f}")

    # Logins: each a new client's connection (TLS handshake and SCRAM
    # exchange); the server's CPU over them, per login.
    base = conf(secure, True, ca, user, password)
    cpu0 = server_cpu_s(pid)
    for _ in range(logins):
        producer = Producer(base)
        metadata = producer.list_topics(timeout=30)
        if topic not in metadata.topics:
            sys.exit("a login's Metadata did not list the topic")
    cpu = (server_cpu_s(pid) - cpu0) / logins
    print(f"summary SASL_SSL connection + SCRAM-SHA-512 login: {cpu * 1e3:.2f} ms server CPU each ({logins} logins)")


main()
