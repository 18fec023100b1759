#!/usr/bin/env bash
# Runs librdkafka's own integration tests against one tidelog broker, one
# test id at a time, each against a fresh data dir, and prints a line per
# test id and a summary (docs/KAFKA.md "librdkafka's test suite").
#
#   scripts/librdkafka-suite.sh LIBRDKAFKA_DIR [TEST_ID ...]
#
# LIBRDKAFKA_DIR is a librdkafka source tree (v2.12.1 was measured) with
# its test runner built:
#   ./configure --disable-gssapi && make libs && make -C tests test-runner
# Without test ids it runs 0000..0153. Environment:
#   TIDELOG          the server binary (default target/debug/tidelog)
#   GROUP_PROTOCOL   classic (default) or consumer (KIP-848)
#   KAFKA_VERSION    the broker version the suite assumes (default 3.7.0;
#                    4.0.0 also tests what Kafka 4.0 added, e.g. group
#                    configs in 0081)
#   REBALANCE_DELAY_MS   groups.initial_rebalance_delay_ms (default 3000,
#                    Kafka's default, which the suite assumes)
#   TIMEOUT_MULTIPLIER   the runner's test.timeout.multiplier (default 1;
#                    0081 makes dozens of groups, each waiting the delay,
#                    and needs 2 to stay inside its 180 s bound)
#   TEST_TIMEOUT_S   a test id's wall-clock bound (default 300)
#   WORK             where data dirs and logs go (default a new temp dir)
# A test id passes when the runner exits 0; the runner itself skips the
# tests that need what one broker without SASL/SSL cannot give (its log
# says SKIPPING TEST and why). Ports 127.0.0.1:18095 and :19095.
set -euo pipefail

rdk=${1:?usage: scripts/librdkafka-suite.sh LIBRDKAFKA_DIR [TEST_ID ...]}
shift
rdk=$(cd "$rdk" && pwd)
[[ -x $rdk/tests/test-runner ]] || { echo "no $rdk/tests/test-runner: build it first (see above)" >&2; exit 2; }
tidelog=${TIDELOG:-target/debug/tidelog}
[[ -x $tidelog ]] || { echo "no $tidelog: cargo build -p tidelog-server first" >&2; exit 2; }
tidelog=$(cd "$(dirname "$tidelog")" && pwd)/$(basename "$tidelog")
protocol=${GROUP_PROTOCOL:-classic}
kafka_version=${KAFKA_VERSION:-3.7.0}
rebalance_delay_ms=${REBALANCE_DELAY_MS:-3000}
timeout_multiplier=${TIMEOUT_MULTIPLIER:-1}
timeout_s=${TEST_TIMEOUT_S:-300}
work=${WORK:-$(mktemp -d -t tidelog-librdkafka.XXXXXX)}
mkdir -p "$work/logs"
http=127.0.0.1:18095
kafka=127.0.0.1:19095

if (($# > 0)); then ids=("$@"); else mapfile -t ids < <(seq -f '%04g' 0 153); fi

# Small segments (every test id starts a fresh data dir), auto-created
# topics of 4 partitions as the suite expects, disk ratios of a shared
# machine's full disk that never refuse a write, and the initial
# rebalance delay Kafka's default has (the suite counts on it: 0113
# expects two consumers subscribing together to share the first
# generation) unless REBALANCE_DELAY_MS says otherwise.
cat > "$work/broker.yaml" <<EOF
listen: $http
data_dir: $work/data
auto_create_topics: true
default_partitions: 4
store:
  commitlog_segment_bytes: 16777216
  consume_queue_units_per_file: 50000
  index_slots: 50000
  index_entries: 200000
retention:
  disk_max_used_ratio: 0.99
  disk_force_clean_ratio: 0.995
  disk_full_ratio: 0.999
kafka:
  listen: $kafka
groups:
  initial_rebalance_delay_ms: $rebalance_delay_ms
EOF
{
  echo "bootstrap.servers=$kafka"
  echo "test.timeout.multiplier=$timeout_multiplier"
} > "$work/test.conf"
if [[ $protocol == consumer ]]; then export TEST_CONSUMER_GROUP_PROTOCOL=consumer; fi

passed=0 failed=0 skipped=0 n=0
for id in "${ids[@]}"; do
  n=$((n + 1))
  rm -rf "$work/data"
  "$tidelog" serve --config "$work/broker.yaml" > "$work/logs/$id.broker.log" 2>&1 &
  broker=$!
  ready=0
  for _ in $(seq 1 150); do
    if curl -sf -o /dev/null "http://$http/status/ready"; then ready=1; break; fi
    kill -0 "$broker" 2>/dev/null || break
    sleep 0.2
  done
  if ((ready == 0)); then
    echo "tidelog did not become ready for $id: $work/logs/$id.broker.log" >&2
    kill -KILL "$broker" 2>/dev/null || true
    exit 1
  fi
  start=$SECONDS
  rc=0
  (cd "$rdk/tests" && LD_LIBRARY_PATH=$rdk/src:$rdk/src-cpp TESTS=$id TEST_KAFKA_VERSION=$kafka_version \
    RDKAFKA_TEST_CONF=$work/test.conf timeout -s KILL "$timeout_s" ./test-runner -L -p1) \
    > "$work/logs/$id.log" 2>&1 || rc=$?
  kill -TERM "$broker" 2>/dev/null || true
  wait "$broker" 2>/dev/null || true
  # The runner's summary table has a row per test entry of the id
  # (`| 0033_regex_subscribe | PASSED |`): the id passed when one of its
  # entries ran and passed; it skipped when none passed (a sibling
  # `_local` or `_mock` entry skipping does not count).
  entries_passed=$(grep -cE '^\|.* [0-9]{4}_[^|]* \| +PASSED \|' "$work/logs/$id.log" || true)
  if ! grep -q "Running test" "$work/logs/$id.log"; then
    result="none"   # no test of that id runs against a broker
  elif ((rc == 0 && entries_passed == 0)); then
    result="skipped"; skipped=$((skipped + 1))
  elif ((rc == 0)); then
    result="passed"; passed=$((passed + 1))
  else
    result="failed (rc $rc)"; failed=$((failed + 1))
  fi
  echo "[$n/${#ids[@]}] $id $protocol $result $((SECONDS - start)) s"
done
echo "librdkafka suite ($protocol): $passed passed, $failed failed, $skipped skipped; logs in $work/logs"
