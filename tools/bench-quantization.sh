#!/usr/bin/env bash
# Precision policies, measured against each model's fp32 plan:
#  1. the trained example (examples/kjv-moe): weight bytes, KL(fp32 || plan)
#     per byte, top-1 agreement and bits per byte on the first 4000 held-out
#     bytes, batch-1 decode tokens/s;
#  2. one random-weight model per family (tools/make-tiny-checkpoint.py): the
#     same per token of a seeded random 60-token prompt (no bits per byte:
#     random weights model nothing);
#  3. int8, w8a8, fp8, int4 and w4a8 decode against bf16 on the 1.76 GB medium model
#     (moe-roofline, plans alternated in one run).
#   bench-quantization.sh <build/bin> [work-dir]
set -euo pipefail
bin=${1:?usage: bench-quantization.sh <build/bin> [work-dir]}
work=${2:-/tmp/moe-bench-quant}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
policies="fp32 bf16 int8 w8a8 fp8 int4 w4a8 seed auto"

# compile <checkpoint> <out> <policy> [flags...]: auto's budget is the int8
# plan's own KL and top-1 on auto's calibration sample (as strict as int8),
# read from the int8 line auto prints.
compile() {
  local ckpt=$1 out=$2 policy=$3; shift 3
  if [ "$policy" = auto ]; then
    local probe
    probe=$("$bin/moe-compile" "$ckpt" -o "$out" --precision auto --max-kl 1e9 --min-top1 0 "$@" 2>&1 |
      sed -n 's/.*the int8 policy: [0-9]* bytes, KL \([^,]*\), top-1 \([0-9.]*\)%.*/\1 \2/p')
    set -- "$@" --max-kl "${probe% *}" --min-top1 "$(python3 -c "print(${probe#* } / 100)")"
  fi
  "$bin/moe-compile" "$ckpt" -o "$out" --precision "$policy" "$@" > /dev/null 2> "$out.log"
}

row() { # row <policy> <plan> <fp32-plan> <compare-json> <tokens/s>
  python3 - "$@" <<'PY'
import json, os, sys
policy, plan, ref, cmp, tps = sys.argv[1:]
size = os.path.getsize(plan + "/weights-0.bin")
f32 = os.path.getsize(ref + "/weights-0.bin")
r = json.load(open(cmp))
bpb = f"{r['bits_per_byte']:.4f}" if r["unit"] == "byte" else "-"
print(f"| {policy} | {size:,} | {size / f32:.3f} | {r['kl']:.3g} | {100 * r['top1']:.2f}% "
      f"| {bpb} | {float(tps):.0f} |")
PY
}
header() {
  echo "| policy | weight bytes | vs fp32 | KL (nats/$1) | top-1 | bits/byte | decode tok/s |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
}
tps() { python3 -c "import json, sys; print(json.load(sys.stdin)['tokens_per_second'])"; }

kjv="$here/../examples/kjv-moe"
head -c 4000 "$kjv/heldout.txt" > "$work/eval.txt"
echo "## examples/kjv-moe (trained, f32 checkpoint)"
header byte
for policy in $policies; do
  compile "$kjv" "$work/kjv-$policy" "$policy"
  "$bin/moe-run" "$work/kjv-$policy" --eval-file "$work/eval.txt" --compare-to "$work/kjv-fp32" \
    --json - > "$work/kjv-$policy.json"
  row "$policy" "$work/kjv-$policy" "$work/kjv-fp32" "$work/kjv-$policy.json" \
    "$("$bin/moe-run" "$work/kjv-$policy" --prompt "And God said" --max-new-tokens 200 --ignore-eos --json - | tps)"
done

prompt=$(python3 -c "import random; r = random.Random(7); print(','.join(str(r.randrange(96)) for _ in range(60)))")
for family in mixtral qwen2_moe qwen3_moe deepseek_v2 deepseek_v3; do
  ckpt="$work/$family-ckpt"
  [ -f "$ckpt/config.json" ] || python3 "$here/make-tiny-checkpoint.py" --model-type "$family" --out "$ckpt" > /dev/null
  echo
  echo "## $family (random weights, $(python3 -c "import json; print(json.load(open('$ckpt/config.json')).get('torch_dtype', 'bfloat16'))") checkpoint)"
  header token
  for policy in $policies; do
    compile "$ckpt" "$work/$family-$policy" "$policy" --max-context 64
    "$bin/moe-run" "$work/$family-$policy" --prompt-tokens "$prompt" --compare-to "$work/$family-fp32" \
      --json - > "$work/$family-$policy.json"
    row "$policy" "$work/$family-$policy" "$work/$family-fp32" "$work/$family-$policy.json" \
      "$("$bin/moe-run" "$work/$family-$policy" --prompt-tokens 5,17,42 --max-new-tokens 50 --ignore-eos --json - | tps)"
  done
done

medium=/tmp/moe-bench-plan
"$here/make-bench-checkpoint.sh" "$medium/ckpt" > /dev/null
for policy in bf16 int8 w8a8 fp8 int4 w4a8; do
  [ -f "$medium/$policy/plan.moeplan" ] ||
    "$bin/moe-compile" "$medium/ckpt" -o "$medium/$policy" --precision "$policy" \
      --max-batch-tokens 512 --max-context 1024
done
for policy in int8 w8a8 fp8 int4 w4a8; do
  echo
  echo "== medium model: $policy against bf16"
  "$bin/moe-roofline" "$medium/$policy" --baseline "$medium/bf16" --batch 8 --prefill-tokens 64
done
