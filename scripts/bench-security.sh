#!/usr/bin/env bash
# What TLS, SCRAM logins and ACLs cost with a real client (confluent-kafka),
# the cross-check of the table's security rows (`tidelog bench --security`,
# the bench's own client at the table's load; docs/BENCHMARKS.md):
#  1. one release tidelog with a PLAINTEXT and a SASL_SSL Kafka listener:
#     produce and fetch over each, alternating, records/s and server CPU
#     per record; then the server CPU of one TLS connection + SCRAM login;
#  2. two servers side by side, one without authorization and one with
#     security.authorization and 10,000 ACLs (of other principals, and the
#     bench user's ALLOWs): produce over SASL_SSL to each, alternating.
#
#   scripts/bench-security.sh [RECORDS (200000)] [REPEATS (2)]
#
# TIDELOG (default target/release/tidelog) is the binary; the Python venv
# is the one scripts/bench-kafka-client.sh builds (the tests' pins).
# Certificates are made with openssl for 127.0.0.1 in a temporary dir.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
records=${1:-200000}
repeats=${2:-2}
tidelog=${TIDELOG:-$root/target/release/tidelog}
[[ -x $tidelog ]] || { echo "no release binary at $tidelog: cargo build --release -p tidelog-server" >&2; exit 2; }

# shellcheck source=bench-venv.sh
source "$root/scripts/bench-venv.sh"

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

echo "== certificates (openssl, 127.0.0.1)" >&2
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=bench-ca" \
    -keyout "$work/ca.key" -out "$work/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
    -keyout "$work/server.key" -out "$work/server.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >"$work/san.ext"
openssl x509 -req -in "$work/server.csr" -CA "$work/ca.crt" -CAkey "$work/ca.key" \
    -CAcreateserial -days 2 -extfile "$work/san.ext" -out "$work/server.crt" 2>/dev/null
# rustls reads PKCS#8 keys.
openssl pkcs8 -topk8 -nocrypt -in "$work/server.key" -out "$work/server.pk8"
printf 'bench-secret' >"$work/bench.password"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start NAME AUTHORIZATION: a server in $work/NAME; sets http, plain, secure, pid.
start() {
    local name=$1 authorization=$2
    http=$(free_port); plain=$(free_port); secure=$(free_port)
    mkdir -p "$work/$name"
    cat >"$work/$name/broker.yaml" <<EOF
listen: 127.0.0.1:$http
data_dir: $work/$name/data
store:
  commitlog_segment_bytes: 268435456
retention:
  disk_max_used_ratio: 1.0
  disk_force_clean_ratio: 1.0
  disk_full_ratio: 1.0
tls:
  cert_file: $work/server.crt
  key_file: $work/server.pk8
kafka:
  listeners:
    - {name: PLAIN, listen: "127.0.0.1:$plain", security_protocol: PLAINTEXT}
    - {name: SECURE, listen: "127.0.0.1:$secure", security_protocol: SASL_SSL}
security:
  authorization: $authorization
  super_users: [admin]
  users:
    - {name: bench, password_file: $work/bench.password}
    - {name: admin, password_file: $work/bench.password}
EOF
    "$tidelog" serve --config "$work/$name/broker.yaml" 2>"$work/$name/server.log" &
    pid=$!
    pids+=("$pid")
    for _ in $(seq 600); do
        curl -sf "http://127.0.0.1:$http/status/ready" >/dev/null 2>&1 && break
        kill -0 "$pid" 2>/dev/null || { cat "$work/$name/server.log" >&2; exit 1; }
        sleep 0.1
    done
    curl -sf -u admin:bench-secret -X POST -H 'Content-Type: application/json' \
        -d '{"topic_name":"bench","partitions_count":1}' \
        "http://127.0.0.1:$http/v3/clusters/tidelog/topics" >/dev/null
}

echo "== 1. PLAINTEXT against SASL_SSL (SCRAM-SHA-512), $records records of 100 B, $repeats rounds" >&2
start open false
"$venv/bin/python" "$root/scripts/bench-security.py" "$pid" "127.0.0.1:$plain" "127.0.0.1:$secure" \
    "$work/ca.crt" bench bench-secret bench "$records" "$repeats" 20
open_pid=$pid open_secure=$secure

echo "== 2. authorization off against 10,000 ACLs, over SASL_SSL" >&2
mkdir -p "$work/acl/data/config"
python3 - "$work/acl/data/config/acls.json" <<'EOF'
import json, sys
acls = []
def acl(principal, rtype, name, pattern, op):
    return {"pattern": {"resource_type": rtype, "name": name, "pattern_type": pattern},
            "principal": principal, "host": "*", "operation": op, "permission": "ALLOW"}
# 9,996 ACLs of 100 other principals on 100 topics and prefixes.
for i in range(9996):
    acls.append(acl(f"User:other-{i % 100}", "TOPIC", f"t-{i // 100}-{i % 7}",
                    "PREFIXED" if i % 2 else "LITERAL", ["READ", "WRITE", "DESCRIBE"][i % 3]))
# The bench user's own: WRITE and READ on the topic, IDEMPOTENT_WRITE.
acls += [acl("User:bench", "TOPIC", "bench", "LITERAL", "WRITE"),
         acl("User:bench", "TOPIC", "bench", "LITERAL", "READ"),
         acl("User:bench", "GROUP", "*", "LITERAL", "READ"),
         acl("User:bench", "CLUSTER", "kafka-cluster", "LITERAL", "IDEMPOTENT_WRITE")]
json.dump({"version": 1, "acls": acls}, open(sys.argv[1], "w"))
EOF
start acl true
"$venv/bin/python" "$root/scripts/bench-security.py" acl-compare "$open_pid" "127.0.0.1:$open_secure" \
    "$pid" "127.0.0.1:$secure" "$work/ca.crt" bench bench-secret bench "$records" "$repeats"
