#!/usr/bin/env bash
# Throughput and latency of docsparse-server with dynamic batching against
# --max_batch_size 1, for short (512-token) and long (4096-token) documents,
# measured with `docsparse bench load` on loopback. Prints one JSON line per
# case and round; docs/BENCHMARKS.md records the results.
#
#   bench/serving_batching.sh [DURATION_S [ROUNDS]]      (defaults 20, 1)
#
# With ROUNDS > 1 each length is measured ROUNDS times, the configurations
# taking turns (batching first in odd rounds, last in even ones): our shared
# machines drift by ±10% within minutes, and one run each has shown a 10%
# "difference" between two configurations that ran the same path.
# DOCSPARSE_INSTANCES="1 2" runs every configuration at each of those
# docsparse-server --instances counts (default "0", the server's default:
# two, a lone batch widened to every core; the cores divided among the
# instances).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
duration="${1:-20}"
rounds="${2:-1}"
build="${DOCSPARSE_BUILD_DIR:-build}"

instances_list="${DOCSPARSE_INSTANCES:-0}"

run_case() { # MAX_BATCH INSTANCES TOKENS CONCURRENCY ROUND
  local max_batch="$1" instances="$2"
  shift 2
  local log
  log=$(mktemp)
  "$build/server/docsparse-server" --host=127.0.0.1 --port=0 --metrics_port=0 \
    --model_repository=models --threads="$(nproc)" --max_batch_size="$max_batch" \
    --instances="$instances" >"$log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 300); do grep -q 'docsparse-server: ready' "$log" && break; sleep 0.2; done
  local address
  address=$(sed -n 's/.*listening grpc=\([^ ]*\).*/\1/p;T;q' "$log")
  "$build/client/docsparse" --server="$address" bench load --concurrency "$2" \
    --duration "$duration" --synthetic-tokens "$1" --deadline_ms 120000 --json 2>/dev/null |
    python3 -c "
import json, sys
r = json.load(sys.stdin)
l = r['latency_ms']
print(json.dumps({'max_batch_size': $max_batch, 'instances': $instances, 'tokens': $1,
                  'concurrency': $2, 'round': $3,
                  'requests': r['requests'], 'errors': r['errors'],
                  'requests_per_s': round(r['requests_per_s'], 2),
                  'tokens_per_s': round(r['tokens_per_s']),
                  'p50_ms': round(l['p50']), 'p95_ms': round(l['p95']), 'p99_ms': round(l['p99']),
                  'mean_batch_size': round(r['mean_batch_size'], 2),
                  'mean_total_gflops': round(r['mean_total_gflops'], 2),
                  'served_by': r.get('served_by', [])}))"
  kill -TERM "$pid"
  wait "$pid" || true
  rm -f "$log"
}

for tokens_concurrency in "512 16" "4096 4"; do
  read -r tokens concurrency <<<"$tokens_concurrency"
  configurations=()
  for max_batch in 16 1; do
    for instances in $instances_list; do configurations+=("$max_batch $instances"); done
  done
  for round in $(seq 1 "$rounds"); do
    order=("${configurations[@]}")
    if ((round % 2 == 0)); then
      order=()
      for ((i = ${#configurations[@]} - 1; i >= 0; i--)); do order+=("${configurations[i]}"); done
    fi
    for configuration in "${order[@]}"; do
      read -r max_batch instances <<<"$configuration"
      run_case "$max_batch" "$instances" "$tokens" "$concurrency" "$round"
    done
  done
done
