#!/usr/bin/env bash
# Issue 40's rebalance benchmark: a 10-member group's rebalance when the
# tenth member joins, classic (eager) against KIP-848, both heartbeating
# at the same interval, in one run (scripts/bench-rebalance.py says what
# is timed). Starts tidelog with a temporary data dir on free ports,
# creates the topic over HTTP, prints each round and the medians.
#
#   scripts/bench-rebalance.sh [PARTITIONS (30)] [HEARTBEAT_MS (1000)] [ROUNDS (5)] [WORK_MS (0)]
#
# WORK_MS: each record read costs the members that much (bench-rebalance.py).
#
# TIDELOG (default target/release/tidelog) is the binary; the Python venv
# is the bench scripts' (scripts/bench-venv.sh).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
partitions=${1:-30}
heartbeat_ms=${2:-1000}
rounds=${3:-5}
work_ms=${4:-0}
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
trap 'exit 143' TERM INT

# The classic groups' first rebalance waits the usual 3 s for more
# members (that is before the timed join, not in it); KIP-848 members
# heartbeat at the classic members' interval.
cat > "$data/broker.yaml" <<YAML
listen: 127.0.0.1:$http_port
data_dir: $data/data
store:
  commitlog_segment_bytes: 16777216
  consume_queue_units_per_file: 50000
  index_slots: 50000
  index_entries: 200000
retention:
  disk_max_used_ratio: 0.99
  disk_force_clean_ratio: 0.995
  disk_full_ratio: 0.999
groups:
  consumer_heartbeat_interval_ms: $heartbeat_ms
kafka:
  listen: 127.0.0.1:$kafka_port
YAML
"$tidelog" serve --config "$data/broker.yaml" 2>"$data/server.log" &
server_pid=$!
for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$http_port/status/ready" >/dev/null 2>&1 && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$data/server.log" >&2; exit 1; }
    sleep 0.1
done
cluster=$(curl -sf "http://127.0.0.1:$http_port/v3/clusters" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["cluster_id"])')
topic=bench-rebalance
curl -sf -X POST -H 'Content-Type: application/json' \
    -d "{\"topic_name\":\"$topic\",\"partitions_count\":$partitions}" \
    "http://127.0.0.1:$http_port/v3/clusters/$cluster/topics" >/dev/null
echo "uptime: $(uptime)"
echo "tidelog $tidelog, kafka 127.0.0.1:$kafka_port, topic $topic ($partitions partitions), heartbeat $heartbeat_ms ms, $rounds rounds, $work_ms ms of work a record"
"$venv/bin/python" "$root/scripts/bench-rebalance.py" "127.0.0.1:$kafka_port" "$topic" \
    "$partitions" "$heartbeat_ms" "$rounds" "$work_ms"
