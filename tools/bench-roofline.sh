#!/usr/bin/env bash
# Roofline benchmark: the medium MoE (tools/make-bench-checkpoint.sh) compiled
# with fusion on and off, measured by moe-roofline against this machine's
# STREAM triad bandwidth and oneDNN matmul peak, in one run.
#   bench-roofline.sh <build/bin> [work-dir]
set -euo pipefail
bin=${1:?usage: bench-roofline.sh <build/bin> [work-dir]}
work=${2:-/tmp/moe-bench-plan}
here=$(cd "$(dirname "$0")" && pwd)
"$here/make-bench-checkpoint.sh" "$work/ckpt"
# Compiled every time (about 15 s each): a plan left by an older compiler
# would measure that compiler's schedule.
for fusion in true false; do
  rm -rf "$work/roofline-$fusion"
  "$bin/moe-compile" "$work/ckpt" -o "$work/roofline-$fusion" --max-batch-tokens 512 \
    --max-context 1024 --fusion=$fusion
done
"$bin/moe-roofline" "$work/roofline-true" --baseline "$work/roofline-false" \
  --json "$work/roofline.json"
echo "json: $work/roofline.json"
