#!/usr/bin/env bash
# Every figure of docs/BENCHMARKS.md's table and the machine limits beside
# them, in one go (about 25 minutes on the 2-core VM; --quick: a smoke run
# of every step in a few minutes, figures not to quote):
#
#   scripts/bench.sh [--quick] [--only STEP]
#
# --only STEP: the machine's limits and that one step (a name below), then
# the table, whose other rows say "not run" (e.g. `--only cluster`).
#
# Builds the release binary once (and the cleaner's compaction bench), then
# measures, printing progress as it goes:
#   limits        dd write (1 GiB, conv=fdatasync), dd 4 KiB oflag=dsync ops/s,
#                 dd memcpy, cold cat, all on the data dir's disk
#   http-100      HTTP produce, fetch, visibility: 64 conns x 100 x 100 B, 8 partitions
#   http-10       the same at 10 records per request
#   http-1        the same at 1 record per request (async beside sync-1)
#   sync-1        --flush sync, 1 record per request      (syncflush's flag)
#   sync-100      --flush sync, 100 records per request, beside an async server
#                 in alternating slices (--compare-async)
#   compact       --compare-delete --keys N: delete and compact topics in one 60 s run
#   http-1k       100 records x 1 KiB
#   http-16k      10 records x 16 KiB
#   http-p1       1 partition
#   http-p1000    1,000 partitions
#   kafka-acks1   tidelog bench --protocol kafka --acks 1 (HTTP produce in the same run)
#   kafka-acks-1  the same, acks -1
#   kafka-txn     --protocol kafka --transactions: idempotent vs transactional producers
#                 (a transaction per 100 batches), read_committed vs read_uncommitted
#                 fetch, the LSO lag beside a plain produce's visibility
#   cluster       --protocol kafka --cluster: acks -1 produce to a 3-node cluster (master +
#                 2 replicas, min_insync_replicas 2, etcd from /usr/bin/etcd) beside a single
#                 node in alternating slices, the replicas' lag meanwhile, then 20 failovers
#                 (kill -9 of the master → first acknowledged produce); skipped, and its rows
#                 say so, when /usr/bin/etcd is missing (the suite does not install it)
#   kafka-security --protocol kafka --security: PLAINTEXT vs SASL_SSL listeners of one
#                 server, 10,000 ACLs vs none, a login's server CPU
#   http-security --security: an HTTP and an HTTPS server, alternating
#   librdkafka    scripts/bench-kafka-client.sh (confluent-kafka's producer)
#   recovery      tidelog bench --recovery-mib 4096: kill -9, cold restart vs cold cat
#   cleaner       cargo bench -p tidelog-cleaner --bench compaction
#   tiered        tidelog bench --tiered-mib 512 against SeaweedFS: upload and remote
#                 fetch MB/s beside plain object_store put/get of the same bytes
# Each `tidelog bench` step starts its own server with a temporary data dir,
# measures the bare HTTP endpoint / bare Kafka listener in the same run in
# alternating slices, and writes its figures as JSON. A step that fails
# leaves NAME.failed with why, and its rows say "failed: <why>"; the suite
# goes on. At the end the table (Markdown) is printed and written to
# target/bench/results.md; every step's output is in target/bench/results/.
#
# TIDELOG_BENCH_DIR: where the data dirs and the limit files go (default
# ${TMPDIR:-/tmp}); keep it on the disk you mean to measure.
# TIDELOG_BENCH_SERVER_CONFIG: a config file for every started server.
# TIDELOG_BENCH_RECOVERY_MIB: the recovery step's CommitLog (4096; it needs
# that much free disk and a segment more).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
quick=false
only=
while (($#)); do
    case "$1" in
        --quick) quick=true ;;
        --only)
            [[ -n ${2:-} ]] || { echo "usage: scripts/bench.sh [--quick] [--only STEP]" >&2; exit 2; }
            only=$2
            shift
            ;;
        *) echo "usage: scripts/bench.sh [--quick] [--only STEP]" >&2; exit 2 ;;
    esac
    shift
done
target_dir=${CARGO_TARGET_DIR:-$root/target}
tidelog=$target_dir/release/tidelog
out=$root/target/bench
results=$out/results
dir=${TIDELOG_BENCH_DIR:-${TMPDIR:-/tmp}}
# TIDELOG_BENCH_SERVER_CONFIG: a broker.yaml for every server the steps
# start (e.g. a higher retention.disk_full_ratio on a disk others fill).
server_config=()
[[ -n ${TIDELOG_BENCH_SERVER_CONFIG:-} ]] && server_config=(--server-config "$TIDELOG_BENCH_SERVER_CONFIG")
rm -rf "$results"
mkdir -p "$results"

# `phase`: how long each step measures, in how many alternating slices;
# `long_phase` (a step given --long): the compact step's, the 60 s run
# issue 17 §2 names, in 10 slices (a single 6 s phase of it swung by ±6
# points between runs minutes apart).
if $quick; then
    common=(--warmup-ms 200 --visibility-samples 20)
    phase=(--duration-ms 600 --rounds 2)
    long_phase=("${phase[@]}")
    limit_mib=128 dsync_count=2000 recovery_mib=64 client_records=20000 tiered_mib=32
    # Transactions that commit within the quick run's 300 ms slices.
    txn_batches=10
    failovers=3
    compaction_env=(TIDELOG_COMPACTION_MIB=64 TIDELOG_COMPACTION_PRODUCE_SECS=2)
else
    common=(--warmup-ms 2000 --visibility-samples 300)
    phase=(--duration-ms 6000 --rounds 3)
    long_phase=(--duration-ms 60000 --rounds 10)
    limit_mib=1024 dsync_count=20000 recovery_mib=${TIDELOG_BENCH_RECOVERY_MIB:-4096} client_records=1000000 tiered_mib=512
    txn_batches=100
    failovers=20
    compaction_env=()
fi

log() { echo "[$(date -u +%H:%M:%S) +${SECONDS}s, load $(cut -d' ' -f1-3 /proc/loadavg)] $*"; }

# step NAME SECONDS CMD...: runs CMD within SECONDS, its output shown and
# kept in NAME.log; a failure is written to NAME.failed (exit code and the
# last error line) and the suite goes on.
step() {
    local name=$1 seconds=$2
    shift 2
    # --only: the limits and that step.
    [[ -z $only || $name == limits || $name == "$only" ]] || return 0
    log "== $name: $*"
    set +e
    if declare -F "$1" >/dev/null; then
        # A function of this script (timeout runs programs only).
        "$@" 2>&1 | tee "$results/$name.log"
    else
        timeout --kill-after=10 "$seconds" "$@" 2>&1 | tee "$results/$name.log"
    fi
    local rc=${PIPESTATUS[0]}
    set -e
    if ((rc != 0)); then
        local why="exit $rc"
        ((rc == 124)) && why="timed out after ${seconds} s"
        local last
        # A panic's reason is the line after "panicked at"; else the last
        # error line; else the last line.
        last=$(grep -A1 -m1 'panicked at' "$results/$name.log" | sed -n 2p || true)
        [[ -n $last ]] || last=$(grep -iE 'error|failed' "$results/$name.log" | tail -1 || true)
        [[ -n $last ]] || last=$(grep -v '^[[:space:]]*$' "$results/$name.log" | tail -1 || true)
        echo "$why: $last" >"$results/$name.failed"
        log "   $name failed: $(cat "$results/$name.failed")"
    fi
}

# bench NAME SECONDS ARGS...: a `tidelog bench` step writing NAME.json,
# measuring `phase` unless ARGS start with --long (then `long_phase`).
bench() {
    local name=$1 seconds=$2
    shift 2
    local measure=("${phase[@]}")
    if [[ ${1:-} == --long ]]; then
        measure=("${long_phase[@]}")
        shift
    fi
    step "$name" "$seconds" "$tidelog" bench "${common[@]}" "${measure[@]}" "${server_config[@]}" \
        --data-dir "$dir" --json "$results/$name.json" "$@"
}

# Wall-clock seconds of a command, its output discarded.
secs() {
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >/dev/null 2>&1
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc -l
}

# tiered: SeaweedFS (the weed binary of the test venv, which the tiered
# integration tests install, or one on PATH) on free 127.0.0.1 ports in a
# temp dir, and `tidelog bench --tiered-mib` against a bucket in it.
tiered() {
    local weed=$target_dir/test-clients/venv/bin/weed
    [[ -x $weed ]] || weed=$(command -v weed) || {
        echo "no weed binary: run the tiered tests once (cargo nextest run -p tidelog-integration-tests --test tiered) or put weed on PATH" >&2
        return 1
    }
    local wdir ports
    wdir=$(mktemp -d "$dir/tidelog-bench-weed-XXXXXX")
    # Eight free ports, bound at once so none comes twice.
    read -r -a ports < <(python3 -c 'import socket
s=[socket.socket() for _ in range(8)]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
    "$weed" server -s3 -dir="$wdir" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
        -master.port="${ports[0]}" -master.port.grpc="${ports[1]}" -volume.port="${ports[2]}" \
        -volume.port.grpc="${ports[3]}" -filer.port="${ports[4]}" -filer.port.grpc="${ports[5]}" \
        -s3.port="${ports[6]}" -s3.port.grpc="${ports[7]}" -s3.port.iceberg=0 -s3.port.lance=0 \
        -filer.localSocket="$wdir/filer.sock" -s3.localSocket="$wdir/s3.sock" \
        -master.volumeSizeLimitMB=1024 -volume.max=0 -master.telemetry=false >"$wdir/weed.log" 2>&1 &
    local weed_pid=$! rc=0 i
    local s3=http://127.0.0.1:${ports[6]}
    for i in $(seq 1 300); do
        [[ $(curl -s -o /dev/null -w '%{http_code}' -X PUT "$s3/bench") == 200 ]] && break
        sleep 0.2
    done
    # 64 MiB CommitLog segments: the bench seals the tail's segment with
    # filler records, a segment's worth at most.
    printf 'store:\n  commitlog_segment_bytes: 67108864\ntiered:\n  url: s3://bench/run\n  endpoint: %s\n  allow_http: true\n  upload_interval_ms: 3600000\n  object_bytes: 8388608\n' \
        "$s3" >"$wdir/tiered.yaml"
    timeout --kill-after=10 600 "$tidelog" bench --data-dir "$dir" --server-config "$wdir/tiered.yaml" \
        --json "$results/tiered.json" --tiered-mib "$tiered_mib" --record-bytes 1024 --batch 100 || rc=$?
    stop_weed "$weed_pid"
    rm -rf "$wdir" /tmp/seaweedfs-*-grpc-"${ports[1]}".sock /tmp/seaweedfs-*-grpc-"${ports[3]}".sock \
        /tmp/seaweedfs-*-grpc-"${ports[5]}".sock /tmp/seaweedfs-*-grpc-"${ports[7]}".sock
    return "$rc"
}

# Stop SeaweedFS: SIGTERM, then SIGKILL if it has not exited within 10 s
# (one run's `weed server` took three minutes to exit on SIGTERM).
stop_weed() {
    local pid=$1 i
    kill "$pid" 2>/dev/null || return 0
    for i in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    return 0
}

limits() {
    local file rate
    file=$(mktemp -p "$dir" tidelog-limits.XXXXXX)
    local bytes=$((limit_mib << 20))
    local t
    t=$(secs dd if=/dev/zero of="$file" bs=1M count="$limit_mib" conv=fdatasync)
    local write
    write=$(echo "$bytes / $t / 1000000" | bc -l)
    echo "dd write, bs=1M count=$limit_mib conv=fdatasync: $(printf '%.0f' "$write") MB/s"
    # The file is on disk now: drop its pages (GNU dd's nocache), read it cold.
    dd if="$file" iflag=nocache count=0 status=none
    t=$(secs cat "$file")
    local cold
    cold=$(echo "$bytes / $t / 1000000" | bc -l)
    echo "cat cold: $(printf '%.0f' "$cold") MB/s"
    rm -f "$file"
    t=$(secs dd if=/dev/zero of="$file" bs=4k count="$dsync_count" oflag=dsync)
    local dsync
    dsync=$(echo "$dsync_count / $t" | bc -l)
    echo "dd bs=4k count=$dsync_count oflag=dsync: $(printf '%.0f' "$dsync") ops/s"
    rm -f "$file"
    t=$(secs dd if=/dev/zero of=/dev/null bs=1M count=8192)
    rate=$(echo "8192 * 1048576 / $t / 1000000" | bc -l)
    echo "dd memcpy, /dev/zero to /dev/null, bs=1M: $(printf '%.0f' "$rate") MB/s"
    printf '{"dd_write_mb_s": %.1f, "dd_dsync_ops_s": %.1f, "dd_memcpy_mb_s": %.1f, "cat_cold_mb_s": %.1f}\n' \
        "$write" "$dsync" "$rate" "$cold" >"$results/limits.json"
}

uptime_start=$(uptime)
log "suite ($($quick && echo quick || echo full)), data in $dir ($(df -P "$dir" | awk 'NR==2 {print $1}')); $uptime_start"
log "building the release binary and the compaction bench (once)"
cargo build --release -p tidelog-server
[[ -z $only || $only == cleaner ]] && cargo bench -p tidelog-cleaner --bench compaction --no-run

step limits 300 limits
bench http-100 300
bench http-10 300 --batch 10
bench http-1 300 --batch 1
bench sync-1 300 --flush sync --batch 1
bench sync-100 300 --flush sync --compare-async
bench compact 600 --long --compare-delete --keys 100000
bench http-1k 300 --record-bytes 1024
bench http-16k 300 --record-bytes 16384 --batch 10
bench http-p1 300 --partitions 1
bench http-p1000 400 --partitions 1000
bench kafka-acks1 300 --protocol kafka --acks 1
bench kafka-acks-1 300 --protocol kafka --acks -1
bench kafka-txn 300 --protocol kafka --transactions --txn-batches "$txn_batches"
if [[ -x /usr/bin/etcd ]]; then
    bench cluster 900 --protocol kafka --cluster --failovers "$failovers"
elif [[ -z $only || $only == cluster ]]; then
    log "== cluster: skipped: no /usr/bin/etcd (Debian: apt-get install etcd-server)"
    echo "skipped: no /usr/bin/etcd (Debian: apt-get install etcd-server)" >"$results/cluster.failed"
fi
bench kafka-security 400 --protocol kafka --acks 1 --security
bench http-security 300 --security
step librdkafka 600 env TIDELOG="$tidelog" scripts/bench-kafka-client.sh "$client_records" 100 8
# Rebuilding nothing (the binary is built); --data-dir as the other steps.
step recovery 1200 "$tidelog" bench "${server_config[@]}" --data-dir "$dir" --json "$results/recovery.json" \
    --recovery-mib "$recovery_mib" --record-bytes 1024 --batch 100
step cleaner 900 env TIDELOG_BENCH_DIR="$dir" "${compaction_env[@]}" \
    cargo bench -p tidelog-cleaner --bench compaction
step tiered 900 tiered

commit=$(git rev-parse --short HEAD)
# Dirty when the measured code differs from the commit (docs do not count).
git diff --quiet HEAD -- . ':!docs' || commit="$commit-dirty"
printf '{"commit": "%s", "date": "%s", "uptime_start": "%s", "uptime_end": "%s", "quick": %s}\n' \
    "$commit" "$(date -u '+%Y-%m-%d %H:%M UTC')" "$uptime_start" "$(uptime)" "$quick" >"$results/meta.json"
log "== the table (target/bench/results.md)"
"$tidelog" bench --suite-table "$results" | tee "$out/results.md"
log "done in ${SECONDS} s"
