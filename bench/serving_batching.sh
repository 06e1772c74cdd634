#!/usr/bin/env bash
# Throughput and latency of docsparse-server with dynamic batching against
# --max_batch_size 1, for short (512-token) and long (4096-token) documents,
# measured with `docsparse bench load` on loopback. Prints one JSON line per
# case and round; docs/BENCHMARKS.md records the results.
#
#   bench/serving_batching.sh [DURATION_S [ROUNDS]]      (defaults 20, 1)
#
# With ROUNDS > 1 each length is measured ROUNDS times, the two
# configurations taking turns (batching first in odd rounds): our shared
# machines drift by ±10% within minutes, and one run each has shown a 10%
# "difference" between two configurations that ran the same path.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
duration="${1:-20}"
rounds="${2:-1}"
build="${DOCSPARSE_BUILD_DIR:-build}"

run_case() { # MAX_BATCH TOKENS CONCURRENCY ROUND
  local log
  log=$(mktemp)
  "$build/server/docsparse-server" --host=127.0.0.1 --port=0 --metrics_port=0 \
    --model_repository=models --threads="$(nproc)" --max_batch_size="$1" >"$log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 300); do grep -q 'docsparse-server: ready' "$log" && break; sleep 0.2; done
  local address
  address=$(sed -n 's/.*listening grpc=\([^ ]*\).*/\1/p;T;q' "$log")
  "$build/client/docsparse" --server="$address" bench load --concurrency "$3" \
    --duration "$duration" --synthetic-tokens "$2" --deadline_ms 120000 --json 2>/dev/null |
    python3 -c "
import json, sys
r = json.load(sys.stdin)
l = r['latency_ms']
print(json.dumps({'max_batch_size': $1, 'tokens': $2, 'concurrency': $3, 'round': $4,
                  'requests': r['requests'], 'errors': r['errors'],
                  'requests_per_s': round(r['requests_per_s'], 2),
                  'tokens_per_s': round(r['tokens_per_s']),
                  'p50_ms': round(l['p50']), 'p95_ms': round(l['p95']), 'p99_ms': round(l['p99']),
                  'mean_batch_size': round(r['mean_batch_size'], 2),
                  'mean_total_gflops': round(r['mean_total_gflops'], 2)}))"
  kill -TERM "$pid"
  wait "$pid" || true
  rm -f "$log"
}

for tokens_concurrency in "512 16" "4096 4"; do
  read -r tokens concurrency <<<"$tokens_concurrency"
  for round in $(seq 1 "$rounds"); do
    if ((round % 2 == 1)); then
      run_case 16 "$tokens" "$concurrency" "$round"
      run_case 1 "$tokens" "$concurrency" "$round"
    else
      run_case 1 "$tokens" "$concurrency" "$round"
      run_case 16 "$tokens" "$concurrency" "$round"
    fi
  done
done
