#!/usr/bin/env bash
# make fuzz: builds test/fuzz with clang-19, libFuzzer and ASan + UBSan in
# build-fuzz/, seeds each target from real files of the repo, fuzzes each for
# FUZZ_SECONDS (default 60) and prints executions per second. A crash or a
# sanitizer report is copied into test/fuzz/regressions/<target>/ (which
# `make test` replays) and makes the run fail.
#   fuzz.sh <build/bin of the ordinary build>
set -euo pipefail
bin=${1:?usage: fuzz.sh <build/bin>}
seconds=${FUZZ_SECONDS:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-fuzz
work=${FUZZ_WORK:-/tmp/moe-fuzz}
"$root/tools/setup-deps.sh" --fuzz

cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 -DMOE_FUZZ=ON \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
  -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer" \
  > "$work.cmake.log" 2>&1 || { cat "$work.cmake.log"; exit 1; }
targets=(plan checkpoint config ir profile completions chat)
ninja -C "$build" -j2 "${targets[@]/#/fuzz-}"

# Seeds: plans compiled from the examples (the fuzzer appends the checksum
# trailer, so seeds are plan bodies), a generated checkpoint matching the
# checkpoint target's config, every config.json, every lit test's IR.
rm -rf "$work" && mkdir -p "$work"
for t in "${targets[@]}"; do mkdir -p "$work/$t/seeds" "$work/$t/corpus"; done
# (kjv-moe also quantized: int8/int4/fp8 weights with their scales tensors,
# and unfused).
seed() { # seed <name> <example> [moe-compile flags...]
  local name=$1 model=$2; shift 2
  # A context of 64; a --pass-pipeline says it in its own text (moe-compile
  # refuses --max-context beside it).
  local context=(--max-context 64)
  [[ " $* " == *" --pass-pipeline "* ]] && context=()
  "$bin/moe-compile" "$root/examples/$model" -o "$work/plans/$name" "${context[@]}" "$@" > /dev/null
  size=$(stat -c %s "$work/plans/$name/plan.moeplan")
  head -c $((size - 16)) "$work/plans/$name/plan.moeplan" > "$work/plan/seeds/$name.bin"
}
seed tiny-mixtral tiny-mixtral
seed kjv-moe kjv-moe
for p in int8 int4 fp8; do seed "kjv-moe-$p" kjv-moe --precision "$p"; done
seed kjv-moe-per-expert kjv-moe --fusion=false # ungrouped experts, separate gate and up
seed kjv-moe-2-ranks kjv-moe --pass-pipeline 'builtin.module(moe-fuse-experts, moe-to-plan{max-context=64}, moe-replicate-ranks{ranks=2}, moe-plan-memory{max-batch-tokens=16}, moe-verify-schedule)'
python3 "$root/tools/make-tiny-checkpoint.py" --model-type mixtral --dtype F32 \
  --out "$work/ckpt" --dims hidden_size=16 --dims intermediate_size=24 \
  --dims num_hidden_layers=1 --dims num_attention_heads=2 --dims num_key_value_heads=1 \
  --dims num_local_experts=2 --dims num_experts_per_tok=1 --dims vocab_size=8 \
  --dims max_position_embeddings=32 > /dev/null
cp "$work/ckpt/model.safetensors" "$work/checkpoint/seeds/"
i=0
while IFS= read -r f; do cp "$f" "$work/config/seeds/$((i++)).json"; done \
  < <(find "$root/examples" "$root/test/e2e/goldens" -name config.json)
i=0
while IFS= read -r f; do cp "$f" "$work/ir/seeds/$((i++)).mlir"; done \
  < <(find "$root/test/lit" -name '*.mlir')
# A routing profile of two windows, written by moe-run.
for prompt in "And God said" "In the beginning"; do
  "$bin/moe-run" "$work/plans/kjv-moe" --prompt "$prompt" --max-new-tokens 8 \
    --routing-profile "$work/profile/seeds/kjv-moe.json" --profile-decay 0.5 > /dev/null
done

# moe-serve's request bodies: the hand-written ones of the regressions
# (valid requests with every field, and hostile ones) are their seeds.
for t in completions chat; do cp "$root/test/fuzz/regressions/$t"/* "$work/$t/seeds/"; done

status=0
for t in "${targets[@]}"; do
  regressions="$root/test/fuzz/regressions/$t"
  echo "== fuzz-$t: $seconds s"
  set +e
  # allow_user_poisoning=0: MLIR's allocators poison memory that our
  # instrumented copies then hand out (tools/test-asan.sh says more).
  ASAN_OPTIONS=detect_leaks=0:allow_user_poisoning=0 UBSAN_OPTIONS=print_stacktrace=1 \
    "$build/bin/fuzz-$t" "$work/$t/corpus" "$work/$t/seeds" $(ls -d "$regressions" 2>/dev/null) \
    -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$work/$t/" > "$work/$t/log" 2>&1
  rc=$?
  set -e
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t/log")
  took=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$work/$t/log")
  echo "   ${runs:-?} executions in ${took:-$seconds} s: $(( ${runs:-0} / (${took:-$seconds} > 0 ? ${took:-$seconds} : 1) )) exec/s; corpus $(ls "$work/$t/corpus" | wc -l) inputs"
  crashes=$(find "$work/$t" -maxdepth 1 -name 'crash-*' -o -maxdepth 1 -name 'oom-*' -o -maxdepth 1 -name 'timeout-*' -o -maxdepth 1 -name 'leak-*')
  if [ "$rc" -ne 0 ] || [ -n "$crashes" ]; then
    status=1
    mkdir -p "$regressions"
    for c in $crashes; do cp "$c" "$regressions/"; done
    echo "   FOUND: $(echo "$crashes" | wc -w) input(s) saved to test/fuzz/regressions/$t (log: $work/$t/log)"
    grep -m3 -E "ERROR: |runtime error:|SUMMARY" "$work/$t/log" | sed 's/^/   /'
  fi
done
exit $status
