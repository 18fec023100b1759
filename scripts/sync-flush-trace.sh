#!/usr/bin/env bash
# Where a sync-flush acknowledgement's time goes: runs one `tidelog bench
# --flush sync --batch 1` (64 x 1 record, the issue-17 sync-1 load) and, for
# 2 s of its produce phase, records with perf the `tidelog-sync-flush`
# thread's msyncs, its sleeps and wake-ups, and the block requests it
# issues; then prints (scripts/sync-flush-trace.py):
#   - msyncs per second and produce requests per msync (the group size),
#   - msync duration (p50, p90, p99) and the gap between two msyncs,
#   - sleeps per msync, each split into the wait for the device (sleep to
#     wake-up) and the wait for a CPU (wake-up to running),
#   - block requests per msync by type (WS data, WSM metadata: on ext4
#     without a journal the inode table block, always the same sector),
#   - the msyncs that overlapped a sync call of `tidelog-flush` (the
#     periodic checkpoint: ConsumeQueues, time indexes, checkpoint file)
#     against those that did not.
#
#   scripts/sync-flush-trace.sh BINARY [BENCH ARGS]   (root: perf -a)
#
# e.g. scripts/sync-flush-trace.sh target/release/tidelog --data-dir /mnt/x
#
# Caveat: a block request is counted for whoever dispatches it, and with
# mq-deadline a submitter also dispatches requests queued by others, so a
# busy machine's writes can show up under the flusher (the WS column counts
# only requests of at most the msync's range plus a page).
set -euo pipefail

if [[ $# -lt 1 ]]; then
    sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
bin=$1
shift
[[ -x $bin ]] || { echo "not an executable: $bin" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d /tmp/sync-flush-trace.XXXXXX)
trap 'rm -rf "$out"' EXIT

"$bin" bench --flush sync --batch 1 --duration-ms 8000 --warmup-ms 2000 --rounds 1 \
    --visibility-samples 10 "$@" >"$out/bench.txt" 2>"$out/bench.err" &
bench=$!
server=
for _ in $(seq 1 150); do
    server=$(grep -o 'child process [0-9]*' "$out/bench.txt" 2>/dev/null | awk '{ print $3 }') || true
    [[ -n $server ]] && break
    sleep 0.2
done
[[ -n $server ]] || { echo "the bench started no server; see $out/bench.err" >&2; cat "$out/bench.err" >&2; exit 1; }
# Produce has begun when the server's write calls climb; then past the
# warm-up.
w0=$(awk '/syscw/ { print $2 }' "/proc/$server/io")
for _ in $(seq 1 300); do
    sleep 0.1
    w=$(awk '/syscw/ { print $2 }' "/proc/$server/io")
    (( w - w0 > 2000 )) && break
done
sleep 2.5
flusher=$(grep -lx tidelog-sync-fl /proc/"$server"/task/*/comm | head -1 | cut -d/ -f5)
[[ -n $flusher ]] || { echo "no tidelog-sync-flush thread (is flush: sync?)" >&2; exit 1; }
# The periodic flush and checkpoint thread: its syncs share the disk.
checkpointer=$(grep -lx tidelog-flush /proc/"$server"/task/*/comm | head -1 | cut -d/ -f5)
perf stat -e syscalls:sys_enter_pwrite64 --per-thread -p "$server" -o "$out/appends.stat" -- sleep 2 &
stat=$!
perf record -q -a -o "$out/flush.perf" \
    -e syscalls:sys_enter_msync --filter "common_pid == $flusher" \
    -e syscalls:sys_exit_msync --filter "common_pid == $flusher" \
    -e sched:sched_wakeup --filter "pid == $flusher" \
    -e sched:sched_switch --filter "prev_pid == $flusher || next_pid == $flusher" \
    -e block:block_rq_issue --filter "common_pid == $flusher" \
    -e 'syscalls:sys_enter_msync' --filter "common_pid == $checkpointer" \
    -e 'syscalls:sys_exit_msync' --filter "common_pid == $checkpointer" \
    -e 'syscalls:sys_enter_fsync' --filter "common_pid == $checkpointer" \
    -e 'syscalls:sys_exit_fsync' --filter "common_pid == $checkpointer" \
    -e 'syscalls:sys_enter_fdatasync' --filter "common_pid == $checkpointer" \
    -e 'syscalls:sys_exit_fdatasync' --filter "common_pid == $checkpointer" \
    -- sleep 2 2>/dev/null
wait "$stat"
wait "$bench" || { echo "the bench failed:" >&2; tail -20 "$out/bench.err" >&2; exit 1; }
# One pwrite per produce request (its entry) from the HTTP workers.
appends=$(awk '$1 ~ /^tidelog-http/ { gsub(",", "", $2); n += $2 } END { print n + 0 }' "$out/appends.stat")
perf script -i "$out/flush.perf" -F tid,time,event,trace 2>/dev/null >"$out/flush.txt"
grep -E '^(produce|phase)' "$out/bench.txt" | head -3
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$here/sync-flush-trace.py" "$out/flush.txt" "$flusher" "$appends" 2 "$checkpointer"
