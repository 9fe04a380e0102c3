#!/usr/bin/env bash
# Roofline benchmark: the medium MoE (tools/make-bench-checkpoint.sh)
# compiled three ways and measured by moe-roofline against this machine's
# STREAM triad bandwidth and oneDNN matmul peak, each pair in one run:
#   1. weights in panels (--weight-layout panels, the CPU layout) against
#      rows, both fused: the plan's figures against the roofline;
#   2. rows, fusion on against off.
#   bench-roofline.sh <build/bin> [work-dir]
set -euo pipefail
bin=${1:?usage: bench-roofline.sh <build/bin> [work-dir]}
work=${2:-/tmp/moe-bench-plan}
here=$(cd "$(dirname "$0")" && pwd)
"$here/make-bench-checkpoint.sh" "$work/ckpt"
# Compiled every time (about 30 s each): a plan left by an older compiler
# would measure that compiler's schedule.
compile() { # name, moe-compile flags...
  local name=$1
  shift
  rm -rf "$work/roofline-$name"
  "$bin/moe-compile" "$work/ckpt" -o "$work/roofline-$name" --max-batch-tokens 512 \
    --max-context 1024 "$@"
}
compile panels --weight-layout panels
compile rows
compile unfused --fusion=false
echo "== weights in panels against rows (fused)"
"$bin/moe-roofline" "$work/roofline-panels" --baseline "$work/roofline-rows" \
  --json "$work/roofline-panels.json"
echo "== fusion on against off (rows)"
"$bin/moe-roofline" "$work/roofline-rows" --baseline "$work/roofline-unfused" \
  --json "$work/roofline-fusion.json"
echo "json: $work/roofline-panels.json $work/roofline-fusion.json"
