#!/usr/bin/env bash
# Plan benchmark on a generated Qwen3-MoE-shaped checkpoint of ~1.7 GiB (BF16):
# moe-compile wall time and peak RSS (weight packing streams, so RSS stays far
# below the checkpoint size), plan load time (mmap: should be milliseconds),
# full weight verification throughput, the prefault with and without the
# weights' checksums (hot and cold; bench-verify.py), and one short greedy run.
#   bench-plan.sh <build-bin-dir> [work-dir]
set -euo pipefail
bin=${1:?usage: bench-plan.sh <build/bin> [work-dir]}
work=${2:-/tmp/moe-bench-plan}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
"$here/make-bench-checkpoint.sh" "$work/ckpt"
du -sh "$work/ckpt/model.safetensors" | awk '{print "checkpoint: " $1}'
rm -rf "$work/plan"
python3 - "$bin/moe-compile" "$work/ckpt" "$work/plan" <<'PY'
import resource, subprocess, sys, time
start = time.monotonic()
subprocess.run([sys.argv[1], sys.argv[2], "-o", sys.argv[3]], check=True,
               stdout=subprocess.DEVNULL)
took = time.monotonic() - start
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(f"moe-compile: {took:.2f} s wall, peak RSS {rss:.1f} MiB")
PY
"$bin/moe-plan" show "$work/plan" | sed -n '5,6p'
loads=()
for i in 1 2 3 4 5; do
  loads+=($("$bin/moe-run" "$work/plan" --prompt-tokens 1 --max-new-tokens 1 --json - |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["plan_load_ms"])'))
done
echo "plan load (open, verify plan, mmap weights), 5 runs: ${loads[*]} ms"
start=$(date +%s%N)
"$bin/moe-plan" verify "$work/plan" > /dev/null
end=$(date +%s%N)
bytes=$(stat -c %s "$work/plan/weights-0.bin")
awk -v ns=$((end - start)) -v b="$bytes" 'BEGIN { printf "moe-plan verify (every weight checksum): %.2f s, %.2f GB/s\n", ns / 1e9, b / ns }'
echo "prefault alone against prefault + every weight's checksum (sync; ms):"
python3 "$here/bench-verify.py" "$bin" "$work/plan"
"$bin/moe-run" "$work/plan" --prompt-tokens 1,2,3,4,5,6,7,8 --max-new-tokens 8 | tail -1
