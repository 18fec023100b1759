"""A certificate rotation seen from a TLS client (Python's ssl module)
of tidelog's SSL Kafka listener: a connection opened before the rotation
answers ApiVersions, the new key and certificate are renamed over the old
files (`next.key`, `next.crt` in CERT_DIR, key first), the server is sent
SIGHUP (PID 0: not, its file watcher must notice), new handshakes are
tried until one presents the new certificate (subject CN NEW_CN), and the
connection opened before still answers.

Usage: tls_reload.py HOST:PORT CA_FILE CERT_DIR NEW_CN PID
"""

import os
import signal
import socket
import ssl
import struct
import sys
import time

from tidelog_check import Mismatch, check

DEADLINE_S = 60


def connect(context, host, port):
    raw = socket.create_connection((host, port), timeout=30)
    return context.wrap_socket(raw, server_hostname=host)


def common_name(tls):
    subject = dict(pair[0] for pair in tls.getpeercert()["subject"])
    return subject["commonName"]


def recv_exact(tls, n):
    data = b""
    while len(data) < n:
        chunk = tls.recv(n - len(data))
        check(chunk, f"connection closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def api_versions(tls, correlation):
    """ApiVersions v0 on `tls`, checked: the correlation id and no error."""
    body = struct.pack(">hhih", 18, 0, correlation, -1)
    tls.sendall(struct.pack(">i", len(body)) + body)
    (length,) = struct.unpack(">i", recv_exact(tls, 4))
    answer = recv_exact(tls, length)
    got, error = struct.unpack(">ih", answer[:6])
    check(got == correlation, f"correlation id {got}, sent {correlation}")
    check(error == 0, f"ApiVersions error {error}")


def main():
    if len(sys.argv) != 6:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    address, ca, cert_dir, new_cn, pid = sys.argv[1:]
    host, port = address.rsplit(":", 1)
    port, pid = int(port), int(pid)
    context = ssl.create_default_context(cafile=ca)
    try:
        before = connect(context, host, port)
        old_cn = common_name(before)
        check(old_cn != new_cn, f"the server already presents {new_cn}")
        api_versions(before, 1)
        os.rename(os.path.join(cert_dir, "next.key"), os.path.join(cert_dir, "server.key"))
        os.rename(os.path.join(cert_dir, "next.crt"), os.path.join(cert_dir, "server.crt"))
        if pid:
            os.kill(pid, signal.SIGHUP)
        deadline = time.monotonic() + DEADLINE_S
        while True:
            after = connect(context, host, port)
            seen = common_name(after)
            api_versions(after, 3)
            after.close()
            if seen == new_cn:
                break
            check(time.monotonic() < deadline, f"new handshakes still present {seen} after {DEADLINE_S} s")
            time.sleep(0.2)
        api_versions(before, 2)
        before.close()
    except Mismatch as mismatch:
        print(f"MISMATCH: {mismatch}", file=sys.stderr)
        sys.exit(1)
    print(f"tls_reload: new handshakes present {new_cn}; the connection opened before still answers")


if __name__ == "__main__":
    main()
