#!/usr/bin/env bash
# Parity of one golden model: compile it, run the golden prompt with the KV
# cache, and compare with the Hugging Face logits and greedy tokens; then
# check that recomputing the whole sequence at every step, and prefilling in
# chunks of 3 tokens, give the same logits as the cached run. Further
# arguments go to moe-compile (e.g. --weight-layout panels).
#   check-parity.sh GOLDEN_DIR WORK_DIR [MOE-COMPILE FLAGS...]
set -euo pipefail
golden=$1 work=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
prompt=$(python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['prompt'])))" "$golden/golden.json")
rm -rf "$work" && mkdir -p "$work"
moe-compile "$golden" -o "$work/plan" "$@" > /dev/null
moe-compile "$golden" -o "$work/plan3" --max-batch-tokens 3 "$@" > /dev/null
run() { moe-run "$1" --prompt-tokens "$prompt" --max-new-tokens 16 --ignore-eos --json - --dump-logits "$2.bin" "${@:3}" > "$2.json"; }
run "$work/plan" "$work/cached"
run "$work/plan" "$work/recompute" --recompute
run "$work/plan3" "$work/chunked"
python3 "$here/compare-golden.py" "$golden/golden.json" "$work/cached.json" "$work/cached.bin"
echo "recompute vs cache: $(python3 "$here/compare-logits.py" "$work/cached.bin" "$work/recompute.bin")"
echo "chunked prefill vs whole: $(python3 "$here/compare-logits.py" "$work/cached.bin" "$work/chunked.bin")"
