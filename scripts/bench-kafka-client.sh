#!/usr/bin/env bash
# A real Kafka client's produce figure: starts the release tidelog with a
# temporary data dir on free ports, creates a topic over HTTP, and runs
# scripts/bench-kafka-client.py (confluent-kafka, librdkafka's usual
# batching, acks 1) against its Kafka listener, printing the client's
# records/s and CPU and the server's CPU over the same time.
#
#   scripts/bench-kafka-client.sh [RECORDS (1000000)] [RECORD_BYTES (100)] [PARTITIONS (8)]
#
# TIDELOG (default target/release/tidelog) is the binary; the Python venv
# is built once from integration-tests/clients/python/requirements.txt
# (the tests' pins) in target/bench-clients/venv.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
records=${1:-1000000}
record_bytes=${2:-100}
partitions=${3:-8}
tidelog=${TIDELOG:-$root/target/release/tidelog}
[[ -x $tidelog ]] || { echo "no release binary at $tidelog: cargo build --release -p tidelog-server" >&2; exit 2; }

# shellcheck source=bench-venv.sh
source "$root/scripts/bench-venv.sh"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
http_port=$(free_port)
kafka_port=$(free_port)
data=$(mktemp -d)
server_pid=
cleanup() {
    [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$data"
}
trap cleanup EXIT
# A timeout's TERM (scripts/bench.sh) or ^C still stops the server and
# removes its data dir.
trap 'exit 143' TERM INT

"$tidelog" serve --data-dir "$data/data" --listen "127.0.0.1:$http_port" \
    --kafka-listen "127.0.0.1:$kafka_port" 2>"$data/server.log" &
server_pid=$!
for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$http_port/status/ready" >/dev/null 2>&1 && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$data/server.log" >&2; exit 1; }
    sleep 0.1
done
cluster=$(curl -sf "http://127.0.0.1:$http_port/v3/clusters" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["cluster_id"])')
topic=bench-client-$(date +%s)
curl -sf -X POST -H 'Content-Type: application/json' \
    -d "{\"topic_name\":\"$topic\",\"partitions_count\":$partitions}" \
    "http://127.0.0.1:$http_port/v3/clusters/$cluster/topics" >/dev/null

ticks=$(getconf CLK_TCK)
cpu() { awk '{ print $14 + $15 }' "/proc/$server_pid/stat"; }
echo "uptime: $(uptime)"
echo "tidelog $tidelog (pid $server_pid), kafka 127.0.0.1:$kafka_port, topic $topic ($partitions partitions)"
before=$(cpu)
started=$(date +%s.%N)
status=0
"$venv/bin/python" "$root/scripts/bench-kafka-client.py" "127.0.0.1:$kafka_port" "$topic" \
    "$records" "$record_bytes" 1 || status=$?
ended=$(date +%s.%N)
after=$(cpu)
awk -v b="$before" -v a="$after" -v t="$ticks" -v s="$started" -v e="$ended" \
    'BEGIN { printf "server CPU: %.0f %% of one core over the client run (%.2f s)\n", (a - b) / t / (e - s) * 100, e - s }'
exit $status
