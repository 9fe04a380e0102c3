#!/usr/bin/env bash
# The GPU check: one call on a lent GPU machine (DEVELOPERS.md, "GPU time";
# docs/design-cuda.md, "On a lent GPU"). First, here:
#   make build && tools/gpu-bundle.sh
# then, with the device tool:
#   run(command="tools/gpu-check.sh", carry=[".gpu-bundle"], timeout_s=480)
# It runs the programs of the bundle (that machine cannot build them) and
# writes under $OUT (or ./gpu-check-out), at most 8 files:
#   summary.json       what ran and how it ended, per step (read this first)
#   gpu.txt            nvidia-smi, and the backends moe-run lists
#   conformance.log    the conformance suite on the cuda device
#   conformance.json   its per-test results (GoogleTest's JSON)
#   goldens.log        each golden model on cuda against its Hugging Face
#                      golden, at the tolerance below
#   bench.log          moe-bench of the trained example at batch 1 and 64
#   model.log          the benchmark model (random weights) in bf16 and fp8
#                      at batch 1 and 64, and moe-gpu-probe's ceilings
#   probe.json         moe-gpu-probe: copy bandwidth, each plan's decode
#                      roofline, our expert GEMM against cuBLAS
# Run here (no GPU) it does the same and reports every GPU step skipped;
# MOE_GPU_CHECK_DEVICE=cpu runs its steps on the CPU backend instead, to
# check the script itself; MOE_GPU_BUNDLE names another bundle than
# .gpu-bundle/moe-gpu.tar.xz. A step that fails does not stop the others.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/gpu-check-out}
mkdir -p "$out"
bundle=${MOE_GPU_BUNDLE:-$root/.gpu-bundle/moe-gpu.tar.xz}
[ -f "$bundle" ] || { echo "gpu-check: error: $bundle is missing: run tools/gpu-bundle.sh here first" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -C "$work" -xJf "$bundle"
moe=$work/moe
# Our programs load the bundle's libraries (built on Debian 12: glibc 2.36
# or newer is needed); python3 and nvidia-smi keep the machine's own.
lib=$moe/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# program [args...]: one of the bundle's programs, within `limit` seconds.
limit=60
bundled() { local p=$1; shift; timeout "$limit" env LD_LIBRARY_PATH="$lib" "$moe/bin/$p" "$@"; }
# Logits of the golden models on the GPU against Hugging Face's (f32
# reference): f32 activations with bf16 or f32 weights, so only the order
# of sums differs from the CPU's.
tolerance=1e-3
device=${MOE_GPU_CHECK_DEVICE:-cuda}

steps=()
record() { steps+=("{\"step\": \"$1\", \"result\": \"$2\", \"seconds\": $3}"); }

{ if command -v nvidia-smi > /dev/null; then nvidia-smi 2>&1; else echo "nvidia-smi: not found"; fi
  echo; ldd --version | head -1; echo
  bundled moe-run --list-devices 2>&1; } > "$out/gpu.txt"
# "yes", or why the device cannot run here.
runs=$(bundled moe-run --list-devices --json - |
  python3 -c "import json,sys; d=[x for x in json.load(sys.stdin) if x['name']==sys.argv[1]]; print('no such backend' if not d else d[0]['unavailable'] or 'yes')" "$device")

start=$SECONDS
MOE_CONFORMANCE_DEVICE=$device limit=300 bundled conformance-tests \
  --gtest_output="json:$out/conformance.json" > "$out/conformance.log" 2>&1
rc=$?
conformance=$(python3 - "$out/conformance.json" "$rc" <<'PY'
import json, sys
try:
    suites = json.load(open(sys.argv[1]))["testsuites"]
except (OSError, ValueError, KeyError):
    print(f"no results (exit {sys.argv[2]})"); sys.exit()
tests = [t for s in suites for t in s["testsuite"]]
failed = sum(1 for t in tests if t.get("failures"))
skipped = sum(1 for t in tests if t.get("result") == "SKIPPED")
print(f"{len(tests) - failed - skipped} passed, {failed} failed, {skipped} skipped of {len(tests)} (exit {sys.argv[2]})")
PY
)
record conformance "$conformance" $((SECONDS - start))

# Each golden model's prompt, greedy, on the device: logits and tokens
# against the golden. Until every kernel of a plan exists, the backend
# refuses the plan by name, which is what the log then says.
start=$SECONDS
passed=0 total=0
: > "$out/goldens.log"
for plan in "$moe"/plans/*/; do
  [ "$runs" = yes ] || break
  name=$(basename "$plan")
  golden=$root/test/e2e/goldens/$name
  [ -f "$golden/golden.json" ] || continue
  total=$((total + 1))
  read -r prompt steps_n < <(python3 -c "import json,sys; g=json.load(open(sys.argv[1])); print(','.join(map(str, g['prompt'])), len(g['greedy_tokens']))" "$golden/golden.json")
  echo "== $name" >> "$out/goldens.log"
  if bundled moe-run "$plan" --device "$device" --prompt-tokens "$prompt" \
       --max-new-tokens "$steps_n" --ignore-eos --json "$work/$name.json" \
       --dump-logits "$work/$name.bin" >> "$out/goldens.log" 2>&1 &&
     python3 "$root/test/e2e/compare-golden.py" "$golden/golden.json" "$work/$name.json" \
       "$work/$name.bin" --tolerance "$tolerance" >> "$out/goldens.log" 2>&1; then
    passed=$((passed + 1))
  fi
done
if [ "$runs" = yes ]; then
  record goldens "$passed of $total match at tolerance $tolerance" $((SECONDS - start))
else
  record goldens "skipped: $runs" 0
fi

# Decode speed of the trained example (6.3 MiB of bf16 weights: a check
# that batching runs on the device, not a roofline figure) at 1 and 64
# requests in flight, 64 new tokens each.
start=$SECONDS
if [ "$runs" = yes ] &&
   bundled moe-bench "$moe/plans/kjv-moe" --device "$device" --concurrency 1,64 --requests 64 \
     --prompt-len 16:16 --output-len 64:64 --ignore-eos --kv-blocks 512 \
     --json "$work/bench.json" > "$out/bench.log" 2>&1; then
  speeds=$(python3 -c "import json,sys; print(', '.join(f\"batch {int(l['concurrency'])} {l['decode_tokens'] / l['decode_seconds']:.0f} tok/s\" for l in json.load(open(sys.argv[1]))['levels']))" "$work/bench.json")
  record bench "kjv-moe decode: $speeds" $((SECONDS - start))
elif [ "$runs" = yes ]; then
  record bench "failed: see bench.log" $((SECONDS - start))
else
  record bench "skipped: $runs" 0
fi

# The benchmark model (tools/make-bench-checkpoint.sh: 1.7 GB of bf16
# weights, 354 MB read a decode token) in bf16 and fp8, its weights random
# (moe-plan synth: the compiler cannot run here and the model cannot
# travel), 64 requests of 16 prompt and 33 new tokens at batch 1 and 64.
# moe-gpu-probe (cuda only) measures the copy bandwidth, which gives batch
# 1 its fraction of the roofline, and our grouped expert GEMM against a
# cuBLAS GEMM of the same multiply-adds (issue 21's acceptance figures).
start=$SECONDS
if [ "$runs" = yes ]; then
  : > "$out/model.log"
  plans=()
  for precision in bf16 fp8; do
    plan=$work/bench-$precision
    echo "== $precision" >> "$out/model.log"
    if bundled moe-plan synth "$moe/bench/$precision" -o "$plan" >> "$out/model.log" 2>&1 &&
       limit=300 bundled moe-bench "$plan" --device "$device" --concurrency 1,64 --requests 64 \
         --prompt-len 16:16 --output-len 33:33 --ignore-eos --kv-blocks 320 \
         --json "$work/model-$precision.json" >> "$out/model.log" 2>&1; then
      plans+=("$plan")
    fi
    rm -f "$plan"/weights-*.bin # 1.7 GB each on the lent machine's disk
  done
  if [ "$device" = cuda ]; then
    echo "== moe-gpu-probe" >> "$out/model.log"
    probe_plans=()
    for p in "${plans[@]}"; do probe_plans+=(--plan "$p"); done
    # cuBLAS is the machine's own (it cannot travel): the toolkit's, or the
    # one PyTorch's wheels bring.
    wheel=$(python3 -c 'import nvidia.cublas as c, os; print(os.path.join(list(c.__path__)[0], "lib"))' 2> /dev/null)
    lib="$lib:/usr/local/cuda/lib64${wheel:+:$wheel}" bundled moe-gpu-probe "${probe_plans[@]}" \
      --json "$out/probe.json" >> "$out/model.log" 2>&1
  fi
  model=$(MOE_DEVICE=$device python3 - "$work" "$out/probe.json" <<'PY'
import json, os, sys
work, probe_path = sys.argv[1], sys.argv[2]
try:
    probe = json.load(open(probe_path))
except (OSError, ValueError):
    probe = {}
roofline = {os.path.basename(p["plan"]): p["roofline_tokens_per_second"]
            for p in probe.get("plans", [])}
parts = []
for precision in ("bf16", "fp8"):
    try:
        levels = json.load(open(f"{work}/model-{precision}.json"))["levels"]
    except (OSError, ValueError, KeyError):
        parts.append(f"{precision} failed: see model.log"); continue
    rate = {int(l["concurrency"]): l["decode_tokens"] / l["decode_seconds"] for l in levels}
    roof = roofline.get(f"bench-{precision}")
    frac = f" ({rate[1] / roof:.2f} of the copy roofline)" if roof else ""
    parts.append(f"{precision} batch 1 {rate[1]:.0f} tok/s{frac}, batch 64 {rate[64]:.0f} tok/s")
if "experts_vs_cublas" in probe:
    parts.append(f"experts {probe['experts_tflops']:.1f} TFLOP/s = {probe['experts_vs_cublas']:.3f} of cuBLAS {probe['cublas_tflops']:.0f}")
elif probe:
    parts.append(f"experts {probe['experts_tflops']:.1f} TFLOP/s; cuBLAS {probe.get('cublas')}")
elif os.environ.get("MOE_DEVICE") == "cuda":
    parts.append("moe-gpu-probe failed: see model.log")
print("; ".join(parts))
PY
)
  record model "$model" $((SECONDS - start))
else
  record model "skipped: $runs" 0
fi

summary=$(printf '%s,\n' "${steps[@]}")
cat > "$out/summary.json" <<JSON
{
  "bundle_commit": "$(cat "$moe/commit")",
  "device": "$device",
  "runs_here": "$runs",
  "steps": [
${summary%,}
  ]
}
JSON
cat "$out/summary.json"
