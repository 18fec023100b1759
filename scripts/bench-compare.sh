#!/usr/bin/env bash
# Compare the HTTP produce and fetch rates of two tidelog builds: runs
# `tidelog bench` with each binary in turn (base, change, base, change, ...),
# so load from other processes that comes and goes hits both alike, and
# prints every run and the medians: records/s of tidelog, and its ratio to
# the bare ceiling endpoint measured in the same run (the steadier figure on
# a shared machine), with tidelog's produce p99 and its server CPU per
# produced record (what a change is judged by when rates are noisy).
#
#   scripts/bench-compare.sh BASE_BINARY CHANGE_BINARY [RUNS] [-- BENCH ARGS]
#
# e.g. with the base built in a worktree of the previous commit:
#   git worktree add /tmp/base <commit> && (cd /tmp/base && cargo build --release -p tidelog-server)
#   cargo build --release -p tidelog-server
#   scripts/bench-compare.sh /tmp/base/target/release/tidelog target/release/tidelog 3
#   scripts/bench-compare.sh BASE NEW 3 -- --flush sync --batch 1 --duration-ms 6000 --warmup-ms 2000
#
# Each run takes about 40 s with the default arguments below.
set -euo pipefail

if [[ $# -lt 2 ]]; then
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
base=$1
change=$2
shift 2
runs=3
if [[ $# -gt 0 && $1 != "--" ]]; then
    runs=$1
    shift
fi
[[ ${1:-} == "--" ]] && shift
bench_args=("$@")
if [[ ${#bench_args[@]} -eq 0 ]]; then
    bench_args=(--duration-ms 5000 --warmup-ms 2000)
fi
for bin in "$base" "$change"; do
    [[ -x $bin ]] || { echo "not an executable: $bin" >&2; exit 2; }
done
if ! [[ $runs =~ ^[0-9]+$ ]] || (( runs < 1 || runs > 20 )); then
    echo "RUNS must be 1..20, got $runs" >&2
    exit 2
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# `phase target records/s MB/s p50_ms p99_ms ...` lines of the report.
rate() { awk -v p="$2" -v t="$3" '$1 == p && $2 == t { print $3 }' "$1"; }
p99() { awk -v p="$2" -v t="$3" '$1 == p && $2 == t { print $6 }' "$1"; }
# `produce  server: tidelog 36.106, ceiling ...`: tidelog's µs per record.
server_cpu() { awk '$1 == "produce" && $2 == "server:" { sub(",", "", $4); print $4 }' "$1"; }

echo "run which   produce/s  ceiling/s  ratio   p99_ms   cpu_us   fetch/s    ceiling/s  ratio"
for ((i = 1; i <= runs; i++)); do
    for which in base change; do
        bin=$base
        [[ $which == change ]] && bin=$change
        log="$out/$which-$i.txt"
        echo "# $(date -u +%H:%M:%S) run $i/$runs $which: $(uptime | sed 's/.*load/load/')" >&2
        "$bin" bench "${bench_args[@]}" >"$log" 2>"$log.err" || {
            echo "bench failed for $which (run $i); see below" >&2
            tail -20 "$log.err" >&2
            exit 1
        }
        pt=$(rate "$log" produce tidelog); pc=$(rate "$log" produce ceiling)
        ft=$(rate "$log" fetch tidelog); fc=$(rate "$log" fetch ceiling)
        pp=$(p99 "$log" produce tidelog); cpu=$(server_cpu "$log")
        pr=$(awk -v a="$pt" -v b="$pc" 'BEGIN { printf "%.3f", a / b }')
        fr=$(awk -v a="$ft" -v b="$fc" 'BEGIN { printf "%.3f", a / b }')
        printf '%-3s %-7s %10s %10s %6s %8s %8s  %10s %10s %6s\n' "$i" "$which" "$pt" "$pc" "$pr" "$pp" "$cpu" "$ft" "$fc" "$fr"
        echo "$which $pt $pr $ft $fr $pp $cpu" >>"$out/rows"
    done
done

median() { sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
col() { awk -v w="$1" -v c="$2" '$1 == w { print $c }' "$out/rows" | median; }

echo
echo "medians over $runs runs each:"
for c in "2 produce records/s" "3 produce / ceiling" "6 produce p99 ms" "7 server cpu us/rec" "4 fetch records/s" "5 fetch / ceiling"; do
    n=${c%% *}
    name=${c#* }
    b=$(col base "$n")
    x=$(col change "$n")
    awk -v name="$name" -v b="$b" -v x="$x" \
        'BEGIN { printf "  %-20s base %12.3f  change %12.3f  change/base %+.1f %%\n", name, b, x, (x / b - 1) * 100 }'
done
