#!/usr/bin/env bash
# Serving sweep on the trained example model: closed-loop concurrency 1..256
# on a KV pool that holds 32 full-length sequences, once preempting by
# recompute and once swapping KV to a host pool; then the plot and table.
#   bench-serving.sh <build/bin> [work-dir] [svg-out]
set -euo pipefail
bin=${1:?usage: bench-serving.sh <build/bin> [work-dir] [svg-out]}
work=${2:-/tmp/moe-bench-serving}
svg=${3:-docs/serving-offload.svg}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
"$bin/moe-compile" "$here/../examples/kjv-moe" -o "$work/plan" >/dev/null
common=(--concurrency 1,8,32,128,256 --requests 256 --prompt-len 16:64 --output-len 16:64 --seed 0
        --ignore-eos)
echo "== preemption by recompute"
"$bin/moe-bench" "$work/plan" "${common[@]}" --json "$work/recompute.json"
echo "== preemption by swap to a 64 MiB host pool"
"$bin/moe-bench" "$work/plan" "${common[@]}" --host-pool 64 --json "$work/offload.json"
python3 "$here/plot-serving.py" --out "$svg" recompute="$work/recompute.json" \
  "offload to host"="$work/offload.json"
echo "plot: $svg"
