#!/usr/bin/env bash
# The storage append benchmark in a long-running broker's steady state:
# memory is full, so new page-cache pages come from reclaiming old ones
# rather than from memory the machine has never backed (on some VMs a first
# touch of fresh memory is several times slower than a write into a reused
# page; docs/BENCHMARKS.md, storage part, "Second session").
#
#   scripts/bench-steady-state.sh [GiB to leave available] [bench filter]
#
# Fills /dev/shm (tmpfs: unreclaimable without swap) until about `keep`
# GiB (default 4) of memory is left available, then runs the machine's
# limits (scripts/bench-limits.sh, 2 runs) and the criterion bench (default
# filter: append_async) in that state, then the limits again, and always
# removes the fill on exit. Needs write access to /dev/shm; leaving less
# than ~3 GiB risks the OOM killer.
set -euo pipefail

keep_gib="${1:-4}"
filter="${2:-append_async}"
root="$(cd "$(dirname "$0")/.." && pwd)"
fill="/dev/shm/tidelog-steady-state-fill"
trap 'rm -f "$fill"' EXIT

avail_mib=$(awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo)
fill_mib=$((avail_mib - keep_gib * 1024))
if [ "$fill_mib" -le 0 ]; then
    echo "only ${avail_mib} MiB available; nothing to fill" >&2
    exit 1
fi
shm_mib=$(df -Pm /dev/shm | awk 'NR==2 {print $4}')
if [ "$fill_mib" -gt "$shm_mib" ]; then
    echo "/dev/shm has ${shm_mib} MiB free, ${fill_mib} MiB needed" >&2
    exit 1
fi

echo "== filling ${fill_mib} MiB of /dev/shm (leaves ~${keep_gib} GiB available)"
dd if=/dev/zero of="$fill" bs=1M count="$fill_mib" status=none
free -m | sed -n 1,2p

echo "== limits, under pressure"
"$root/scripts/bench-limits.sh" "${TIDELOG_BENCH_DIR:-/tmp}" 2 | tail -4

echo "== cargo bench -p tidelog-storage --bench store -- $filter"
(cd "$root" && cargo bench -p tidelog-storage --bench store -- "$filter" \
    --warm-up-time 2 --measurement-time 5 --noplot)

echo "== limits again, under pressure"
"$root/scripts/bench-limits.sh" "${TIDELOG_BENCH_DIR:-/tmp}" 2 | tail -4
