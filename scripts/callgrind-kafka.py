#!/usr/bin/env python3
"""A fixed, bounded Kafka load for counting a server's instructions per
record under callgrind (scripts/callgrind-kafka.sh runs it): N produce
requests of one uncompressed batch of B keyless records of S bytes over C
connections (Produce v3, acks 1), then fetches of every record back (Fetch
v4, about B records a fetch). The work is the same on every run, so the
instruction counts compare across builds where wall-clock rates on a
loaded machine do not. Raw frames over sockets, no client library: the
client must not be the bottleneck of a server slowed down by valgrind.

usage: callgrind-kafka.py HOST:PORT TOPIC PARTITIONS PHASE [REQUESTS BATCH BYTES CONNS]
PHASE is `produce` or `fetch` (fetch reads what produce wrote: run the
produce phase first with the same arguments).
"""

import socket
import struct
import sys
import time

CRC_TABLE = []
for n in range(256):
    c = n
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    CRC_TABLE.append(c)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def varint(n):
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def batch(records, size):
    now = int(time.time() * 1000)
    body = bytearray()
    for i in range(records):
        value = bytes([0x61 + i % 26]) * size
        rec = b"\x00" + varint(0) + varint(i) + varint(-1) + varint(len(value)) + value + varint(0)
        body += varint(len(rec)) + rec
    after_crc = (
        struct.pack(">hiqqqhii", 0, records - 1, now, now, -1, -1, -1, records) + bytes(body)
    )
    crc = crc32c(after_crc)
    rest = struct.pack(">ibI", 0, 2, crc) + after_crc
    return struct.pack(">qi", 0, len(rest)) + rest


def string(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def frame(api_key, version, correlation, body):
    msg = struct.pack(">hhi", api_key, version, correlation) + string("cg") + body
    return struct.pack(">i", len(msg)) + msg


def produce_body(topic, partition, records):
    return (
        struct.pack(">hhi", -1, 1, 30000)
        + struct.pack(">i", 1)
        + string(topic)
        + struct.pack(">ii", 1, partition)
        + struct.pack(">i", len(records))
        + records
    )


def fetch_body(topic, partition, offset, max_bytes):
    return (
        struct.pack(">iiiib", -1, 0, 1, max_bytes, 0)
        + struct.pack(">i", 1)
        + string(topic)
        + struct.pack(">iiqi", 1, partition, offset, max_bytes)
    )


def read_frame(sock):
    head = b""
    while len(head) < 4:
        got = sock.recv(4 - len(head))
        if not got:
            raise SystemExit("connection closed")
        head += got
    (n,) = struct.unpack(">i", head)
    left = n
    chunks = []
    while left:
        got = sock.recv(min(left, 1 << 20))
        if not got:
            raise SystemExit("connection closed")
        chunks.append(got)
        left -= len(got)
    return b"".join(chunks)


def produce_error(resp):
    # correlation, topics[1]: name, partitions[1]: index, error_code
    (name_len,) = struct.unpack_from(">h", resp, 8)
    at = 10 + name_len + 4
    _, code = struct.unpack_from(">ih", resp, at)
    return code


def fetch_records(resp):
    # v4: correlation, throttle, topics[1]: name, partitions[1]: index, error,
    # high watermark, last stable, aborted (array), records (bytes)
    at = 8
    (name_len,) = struct.unpack_from(">h", resp, at + 4)
    at += 4 + 2 + name_len + 4
    _, code, high_watermark, _ = struct.unpack_from(">ihqq", resp, at)
    at += 4 + 2 + 8 + 8
    (aborted,) = struct.unpack_from(">i", resp, at)
    at += 4 + max(aborted, 0) * 16
    (size,) = struct.unpack_from(">i", resp, at)
    at += 4
    records, end = 0, at + size
    while at + 61 <= end:
        (length,) = struct.unpack_from(">i", resp, at + 8)
        (count,) = struct.unpack_from(">i", resp, at + 57)
        if at + 12 + length > end:
            break
        records += count
        at += 12 + length
    return code, records, high_watermark


def main():
    host, port = sys.argv[1].split(":")
    topic, partitions, phase = sys.argv[2], int(sys.argv[3]), sys.argv[4]
    requests, records, size, conns = (
        [int(a) for a in sys.argv[5:9]] if len(sys.argv) > 5 else [2000, 100, 100, 8]
    )
    socks = [socket.create_connection((host, int(port)), timeout=120) for _ in range(conns)]
    payload = batch(records, size)
    started = time.time()
    correlation = 0
    if phase == "produce":
        # Pipelined a few deep per connection; answered in order per
        # connection, so each answer is matched by count.
        depth = 4
        sent = [0] * conns
        done = 0
        pending = [0] * conns
        while done < requests:
            for i, s in enumerate(socks):
                while pending[i] < depth and sum(sent) < requests:
                    correlation += 1
                    s.sendall(frame(0, 3, correlation, produce_body(topic, i % partitions, payload)))
                    sent[i] += 1
                    pending[i] += 1
                if pending[i]:
                    code = produce_error(read_frame(s))
                    if code != 0:
                        raise SystemExit(f"produce error {code}")
                    pending[i] -= 1
                    done += 1
        total = requests * records
    else:
        # Every partition read from 0 to its high watermark, about one
        # batch a fetch.
        max_bytes = records * (size + 8)
        total = 0
        for p in range(partitions):
            s = socks[p % conns]
            offset, end = 0, None
            while end is None or offset < end:
                correlation += 1
                s.sendall(frame(1, 4, correlation, fetch_body(topic, p, offset, max_bytes)))
                code, got, end = fetch_records(read_frame(s))
                if code != 0 or (got == 0 and offset < end):
                    raise SystemExit(f"fetch error {code}, {got} records at {offset} of {end}")
                offset += got
                total += got
    elapsed = time.time() - started
    print(f"{phase}: {total} records in {elapsed:.1f} s")


if __name__ == "__main__":
    main()
