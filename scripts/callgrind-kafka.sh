#!/usr/bin/env bash
# Instructions per record of the Kafka produce and fetch paths, counted by
# callgrind (repeatable on a loaded machine, where wall-clock rates are
# not): starts `tidelog serve` under valgrind with a temp data dir, runs a
# fixed load (scripts/callgrind-kafka.py: REQUESTS produce requests of one
# batch of BATCH records of BYTES bytes over CONNS connections, then
# fetches of all of it), dumps the counters after each phase and prints
# instructions per record for each (every thread of the server, user
# space only: the kernel's share is not counted).
#
# usage: scripts/callgrind-kafka.sh [TIDELOG] [REQUESTS] [BATCH] [BYTES] [CONNS]
# e.g.   scripts/callgrind-kafka.sh target/release/tidelog 2000 100 100 8
# The profiles stay in $OUT (default /tmp/callgrind-kafka) for
# callgrind_annotate --inclusive=yes $OUT/callgrind.out.produce
set -euo pipefail
TIDELOG=${1:-target/release/tidelog}
REQUESTS=${2:-2000}
BATCH=${3:-100}
BYTES=${4:-100}
CONNS=${5:-8}
PARTITIONS=8
OUT=${OUT:-/tmp/callgrind-kafka}
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$OUT" && mkdir -p "$OUT/data"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
HTTP=$(free_port)
KAFKA=$(free_port)
cat > "$OUT/config.yaml" <<YAML
listen: 127.0.0.1:$HTTP
data_dir: $OUT/data
store:
  commitlog_segment_bytes: 268435456
kafka:
  listen: 127.0.0.1:$KAFKA
topics:
  - name: cg
    partitions: $PARTITIONS
YAML
valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.out.%p" \
  "$TIDELOG" serve --config "$OUT/config.yaml" > "$OUT/server.log" 2>&1 &
VG=$!
# The data dir's preallocated segments are 512 MiB: gone with the server.
trap 'kill $VG 2>/dev/null || true; wait $VG 2>/dev/null || true; rm -rf "$OUT/data"' EXIT
for _ in $(seq 1 600); do
  curl -sf "http://127.0.0.1:$HTTP/topics/cg/partitions/0/offsets" > /dev/null && break
  sleep 0.5
done
# Everything the phase did, dispatch included: wait until every record is
# in the ConsumeQueues (what the offsets answer) before the dump.
dispatched() {
  local sum=0 p end
  for p in $(seq 0 $((PARTITIONS - 1))); do
    end=$(curl -sf "http://127.0.0.1:$HTTP/topics/cg/partitions/$p/offsets" |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["end_offset"])')
    sum=$((sum + end))
  done
  echo $sum
}
phase() {
  callgrind_control -z $VG > /dev/null
  python3 "$HERE/callgrind-kafka.py" "127.0.0.1:$KAFKA" cg $PARTITIONS "$1" "$REQUESTS" "$BATCH" "$BYTES" "$CONNS"
  if [ "$1" = produce ]; then
    for _ in $(seq 1 120); do
      [ "$(dispatched)" -ge $((REQUESTS * BATCH)) ] && break
      sleep 1
    done
  fi
  callgrind_control -d "$1" $VG > /dev/null
  sleep 1
  local file
  file=$(ls -t "$OUT"/callgrind.out.$VG.* | head -1)
  mv "$file" "$OUT/callgrind.out.$1"
  local ir
  ir=$(callgrind_annotate "$OUT/callgrind.out.$1" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  echo "$1: $ir instructions, $((ir / (REQUESTS * BATCH))) per record"
}
phase produce
phase fetch
