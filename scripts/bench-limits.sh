#!/usr/bin/env bash
# The machine's limits, to print beside the storage benchmarks
# (docs/BENCHMARKS.md). Run it in the same session as `cargo bench`.
#
#   scripts/bench-limits.sh [dir on the disk the benchmarks use] [runs]
#
# Default dir: $TIDELOG_BENCH_DIR, else ${TMPDIR:-/tmp}. Measures, `runs`
# times (default 3):
#   - sequential write: dd 1 GiB, bs=1M, conv=fdatasync (data on disk at the end)
#   - page-cache write: the same dd into a fresh file without fdatasync
#     (fresh page-cache pages, no disk wait; the ceiling of async appends
#     that outrun nothing but memory)
#   - disk read: cat of that file after dropping the page cache (root only)
#   - page-cache read: cat of that file twice, the second (warm) one reported
#   - memory copy: dd 8 GiB from /dev/zero to /dev/null, bs=1M
# Prints the machine and its load first, since other work on a shared
# machine moves every number here.
set -euo pipefail

dir="${1:-${TIDELOG_BENCH_DIR:-${TMPDIR:-/tmp}}}"
runs="${2:-3}"
file="$(mktemp -p "$dir" tidelog-limits.XXXXXX)"
trap 'rm -f "$file"' EXIT

# Wall-clock seconds of a command, with its output discarded.
secs() {
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >/dev/null 2>&1
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc -l
}

# MB/s (10^6 bytes per second) for $1 bytes in $2 seconds.
mbps() { printf '%.0f' "$(echo "$1 / $2 / 1000000" | bc -l)"; }

drop_caches() {
    sync
    if echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; then return 0; fi
    return 1
}

echo "== machine"
echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "kernel:  $(uname -r)"
echo "cpus:    $(nproc) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'))"
echo "memory:  $(free -m | awk '/^Mem:/ {print $2 " MiB total, " $7 " MiB available"}')"
echo "dir:     $dir on $(df -P "$dir" | awk 'NR==2 {print $1 " mounted at " $6}') ($(findmnt -no FSTYPE -T "$dir"))"
echo "load:    $(uptime)"
echo "busiest processes (top, 1 s sample):"
# The first top iteration has no interval to measure; print the second.
top -bn2 -d 1 -o %CPU | awk '/^top -/ {n++} n == 2' | sed -n '7,14p'
echo

mib=1024
echo "== limits ($runs runs, 1 GiB file in $dir)"
printf '%-4s %14s %14s %14s %14s %14s\n' run 'dd write MB/s' 'pc write MB/s' 'cat cold MB/s' 'cat warm MB/s' 'memcpy MB/s'
for run in $(seq 1 "$runs"); do
    rm -f "$file"
    t=$(secs dd if=/dev/zero of="$file" bs=1M count=$mib conv=fdatasync)
    write=$(mbps $((mib << 20)) "$t")
    rm -f "$file"
    sync
    t=$(secs dd if=/dev/zero of="$file" bs=1M count=$mib)
    pcwrite=$(mbps $((mib << 20)) "$t")
    if drop_caches; then
        t=$(secs cat "$file")
        cold=$(mbps $((mib << 20)) "$t")
    else
        cold="n/a(not root)"
    fi
    cat "$file" >/dev/null
    t=$(secs cat "$file")
    warm=$(mbps $((mib << 20)) "$t")
    t=$(secs dd if=/dev/zero of=/dev/null bs=1M count=8192)
    memcpy=$(mbps $((8192 << 20)) "$t")
    printf '%-4s %14s %14s %14s %14s %14s\n' "$run" "$write" "$pcwrite" "$cold" "$warm" "$memcpy"
done
echo "(MB/s = 10^6 bytes per second)"
