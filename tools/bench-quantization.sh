#!/usr/bin/env bash
# Precision policies on the trained example (examples/kjv-moe): for each, the
# weight file size, KL(f32 || plan) per byte, top-1 agreement and bits per
# byte on the first 4000 held-out bytes, and batch-1 decode tokens/s; then
# int8 and int4 decode against bf16 on the medium model (moe-roofline, one
# run each, plans alternated).
#   bench-quantization.sh <build/bin> [work-dir]
set -euo pipefail
bin=${1:?usage: bench-quantization.sh <build/bin> [work-dir]}
work=${2:-/tmp/moe-bench-quant}
here=$(cd "$(dirname "$0")" && pwd)
model="$here/../examples/kjv-moe"
mkdir -p "$work"
head -c 4000 "$model/heldout.txt" > "$work/eval.txt"
echo "| policy | weight bytes | vs f32 | KL (nats/byte) | top-1 | bits/byte | decode tok/s |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for policy in fp32 bf16 int8 int4; do
  "$bin/moe-compile" "$model" -o "$work/$policy" --precision "$policy" > /dev/null
  bytes=$(stat -c %s "$work/$policy/weights-0.bin")
  "$bin/moe-run" "$work/$policy" --eval-file "$work/eval.txt" --compare-to "$work/fp32" \
    --json > "$work/$policy.json"
  tps=$("$bin/moe-run" "$work/$policy" --prompt "And God said" --max-new-tokens 200 --json |
    python3 -c "import json, sys; print(json.load(sys.stdin)['tokens_per_second'])")
  python3 - "$work/$policy.json" "$policy" "$bytes" "$(stat -c %s "$work/fp32/weights-0.bin")" "$tps" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
policy, size, f32, tps = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
print(f"| {policy} | {size:,} | {size / f32:.3f} | {r['kl']:.3g} | {100 * r['top1']:.2f}% "
      f"| {r['bits_per_byte']:.4f} | {tps:.0f} |")
PY
done
medium=/tmp/moe-bench-plan
"$here/make-bench-checkpoint.sh" "$medium/ckpt" > /dev/null
for policy in bf16 int8 int4; do
  [ -f "$medium/$policy/plan.moeplan" ] ||
    "$bin/moe-compile" "$medium/ckpt" -o "$medium/$policy" --precision "$policy" \
      --max-batch-tokens 512 --max-context 1024
done
for policy in int8 int4; do
  echo "== medium model: $policy against bf16"
  "$bin/moe-roofline" "$medium/$policy" --baseline "$medium/bf16" --batch 8 --prefill-tokens 64
done
