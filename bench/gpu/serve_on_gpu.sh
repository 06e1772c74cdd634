#!/usr/bin/env bash
# End to end through docsparse-server --device cuda, on the GPU machine:
# minilm-lsg documents/s at 4,096 and 16,384 tokens with dynamic batching on
# (max_batch_size 16) and off (1), LSG against dense attention on the same
# model, p50/p99 at a fixed offered load, and an LSG-BART-base-shaped
# summarizer at 16,384 tokens (greedy, 128 new tokens), minilm-sbm at a 5%
# density cap at both lengths, and minilm-lsg alone in fp16. Every server runs
# the GPU's default two model instances (--instances) but one, minilm-lsg
# alone on one instance, which says what the second gains. One JSON line per
# case on stdout; logs and the lines under $OUT.
#
#   bench/gpu/serve_on_gpu.sh STAGE [SECONDS]
#
# STAGE (scripts/device-test --prepare fills .device/) holds bin/ (the CUDA
# build's server and CLI), lib/ (the Debian libraries they need) and
# models/<name>/ with each model's small files, header.json and optionally
# dims (shaped_checkpoint.py's --dims, to scale a header); the weights
# are filled here with random values of those shapes
# (bench/gpu/shaped_checkpoint.py): speed depends on the shapes, not the
# values. SECONDS (default 15) is each measured case's duration. With
# DOCSPARSE_E2E_QUICK=1 only minilm-lsg alone (max_batch_size 1), LSG and
# dense, at both lengths, and LSG on one instance: the figures a change to
# the LSG path or the instances moves.
set -uo pipefail
stage="$1"
seconds="${2:-15}"
out="${OUT:-$stage/out}"
mkdir -p "$out"
repository=/tmp/docsparse-gpu-models
results="$out/e2e.jsonl"
: >"$results"

# scripts/device-test sets LD_LIBRARY_PATH: $stage/lib, LibTorch's folder and
# the CUDA runtime's.

# Models: the staged small files plus random weights of the staged shapes.
rm -rf "$repository"
mkdir -p "$repository"
for model in "$stage"/models/*/; do
  name="$(basename "$model")"
  mkdir -p "$repository/$name"
  cp "$model"/* "$repository/$name/"
  rm -f "$repository/$name/header.json" "$repository/$name/dims"
  dims=""
  [[ -f $model/dims ]] && dims="$(cat "$model/dims")"
  python3 bench/gpu/shaped_checkpoint.py fill "$model/header.json" \
    "$repository/$name/model.safetensors" --dims "$dims" || exit 1
done

server_pid=""
address=""
metrics=""
start_server() { # MODEL MAX_BATCH [server flags...]
  local log="$out/server-$1-$2${3:+-${3#--}}.log" model="$1" max_batch="$2"
  shift 2
  rm -rf /tmp/one-model && mkdir -p /tmp/one-model &&
    ln -s "$repository/$model" "/tmp/one-model/$model"
  "$stage/bin/docsparse-server" --device=cuda --host=127.0.0.1 --port=0 --metrics_port=0 \
    --model_repository="/tmp/one-model" --threads=8 --max_batch_size="$max_batch" \
    --max_request_gflops=100000 "$@" >"$log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 600); do
    grep -q 'docsparse-server: ready' "$log" && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.2
  done
  if ! grep -q 'docsparse-server: ready' "$log"; then
    echo "server for $model did not start:" >&2
    tail -20 "$log" >&2
    return 1
  fi
  address=$(sed -n 's/.*listening grpc=\([^ ]*\).*/\1/p' "$log" | head -1)
  metrics=$(sed -n 's/.*listening grpc=[^ ]* http=\([^ ]*\).*/\1/p' "$log" | head -1)
  grep -E 'models on|loaded model' "$log" >&2
}

stop_server() {
  python3 -c "import urllib.request; print(urllib.request.urlopen('http://$metrics/metrics').read().decode())" |
    grep -E '^docsparse_gpu_(memory|utilization|seconds)' >"$out/gpu-metrics-$1.txt" || true
  cat "$out/gpu-metrics-$1.txt" >&2
  kill -TERM "$server_pid" 2>/dev/null
  wait "$server_pid" 2>/dev/null
  rm -rf /tmp/one-model
}

# CASE TASK TOKENS CONCURRENCY DURATION [extra bench load flags...]
load() {
  local name="$1" task="$2" tokens="$3" concurrency="$4" duration="$5"
  shift 5
  timeout "$((duration * 4 + 60))" "$stage/bin/docsparse" --server="$address" --json bench load --task "$task" \
    --concurrency "$concurrency" --duration "$duration" --synthetic-tokens "$tokens" \
    --deadline_ms 600000 "$@" 2>>"$out/load.log" |
    python3 -c "
import json, sys
r = json.load(sys.stdin)
l = r['latency_ms']
print(json.dumps({'case': '$name', 'task': '$task', 'tokens': $tokens, 'concurrency': $concurrency,
                  'requests': r['requests'], 'errors': r['errors'],
                  'requests_per_s': round(r['requests_per_s'], 2),
                  'tokens_per_s': round(r['tokens_per_s']),
                  'p50_ms': round(l['p50'], 1), 'p99_ms': round(l['p99'], 1),
                  'mean_batch_size': round(r['mean_batch_size'], 2),
                  'mean_inference_ms': round(r['mean_inference_ms'], 1),
                  'mean_device_ms': round(r['mean_device_ms'], 1),
                  'mean_total_gflops': round(r['mean_total_gflops'], 1)}))" | tee -a "$results"
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"

# minilm-lsg with batches of up to MAX_BATCH documents: LSG and dense
# attention at both lengths (cases named ...-batchMAX_BATCH); the server keeps
# running for the caller's further cases.
minilm_cases() { # MAX_BATCH
  start_server minilm-lsg "$1" || exit 1
  load warm embed 4096 16 3 >/dev/null
  load "lsg-4k-batch$1" embed 4096 16 "$seconds"
  load "lsg-16k-batch$1" embed 16384 8 "$seconds"
  load "dense-4k-batch$1" embed 4096 16 "$seconds" --attention dense
  load "dense-16k-batch$1" embed 16384 8 "$seconds" --attention dense
}

# minilm-lsg alone on one model instance (--instances=1): against the
# two-instance LSG rows of minilm_cases 1.
one_instance_cases() {
  start_server minilm-lsg 1 --instances=1 || exit 1
  load warm embed 4096 16 3 >/dev/null
  load lsg-4k-batch1-instances1 embed 4096 16 "$seconds"
  load lsg-16k-batch1-instances1 embed 16384 8 "$seconds"
  stop_server minilm-lsg-instances1
}

if [[ ${DOCSPARSE_E2E_QUICK:-0} == 1 ]]; then
  minilm_cases 1
  stop_server minilm-lsg-batch1
  one_instance_cases
  exit 0
fi

minilm_cases 16
# p50/p99 at half the closed-loop throughput at 4k, open loop.
rate=$(python3 -c "
import json
for line in open('$results'):
    r = json.loads(line)
    if r['case'] == 'lsg-4k-batch16': print(max(1, round(r['requests_per_s'] / 2)))")
load "lsg-4k-rate$rate" embed 4096 64 "$seconds" --rate "$rate"
stop_server minilm-lsg

minilm_cases 1
stop_server minilm-lsg-batch1
one_instance_cases

# LSG-BART-base shape at 16,384 tokens (truncated to the model's window).
start_server lsg-bart-16k 4 || exit 1
load warm summarize 20000 1 1 >/dev/null
load lsg-bart-16k-greedy128 summarize 20000 1 "$((seconds * 2))"
load lsg-bart-16k-greedy128-c4 summarize 20000 4 "$((seconds * 2))"
stop_server lsg-bart-16k

# minilm-sbm alone at a 5% density cap: SBM's planning on the host, its
# sampling (GPU fastRG) and edge attention on the device. Last, since its
# device path is the newest: a failure here loses no other figure.
start_server minilm-sbm 1 || exit 1
load warm embed 4096 4 3 --max_density 0.05 >/dev/null
load sbm-4k-density5 embed 4096 8 "$seconds" --max_density 0.05
load sbm-16k-density5 embed 16384 4 "$seconds" --max_density 0.05
stop_server minilm-sbm

# minilm-lsg alone in fp16 (--precision=fp16) at both lengths: against the
# bf16 rows of minilm_cases 1 above.
start_server minilm-lsg 1 --precision=fp16 || exit 1
load warm embed 4096 16 3 >/dev/null
load lsg-4k-fp16-batch1 embed 4096 16 "$seconds"
load lsg-16k-fp16-batch1 embed 16384 8 "$seconds"
stop_server minilm-lsg-fp16
