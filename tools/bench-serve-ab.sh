#!/usr/bin/env bash
# make bench-serve-ab: moe-serve of git revision REF (A) against this build's
# (B) over HTTP, rounds interleaved (tools/bench-serve-ab.py), on the trained
# example with a tokenizer.json. REF's moe-serve and moe-compile are built
# once into $AB_SERVE_WORK/ref (a full configure and build: minutes); the
# plan is compiled by REF's moe-compile so that both servers read it.
#   bench-serve-ab.sh <build/bin> REF [bench-serve-ab.py flags...]
set -euo pipefail
bin=$(cd "${1:?usage: bench-serve-ab.sh <build/bin> REF [flags...]}" && pwd)
ref=${2:?usage: bench-serve-ab.sh <build/bin> REF [flags...]}
shift 2
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${AB_SERVE_WORK:-/tmp/moe-serve-ab}
sha=$(git -C "$repo" rev-parse --verify --quiet "$ref^{commit}") ||
  { echo "bench-serve-ab.sh: '$ref' is not a commit of $repo" >&2; exit 1; }
src=$work/ref-$sha
if [ ! -x "$src/build/bin/moe-serve" ]; then
  echo "bench-serve-ab.sh: building moe-serve and moe-compile of $ref (${sha:0:12}) in $src ..." >&2
  rm -rf "$src" && mkdir -p "$src"
  git -C "$repo" archive "$sha" | tar -x -C "$src"
  cmake -S "$src" -B "$src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$src.configure.log" 2>&1 ||
    { cat "$src.configure.log"; exit 1; }
  ninja -C "$src/build" moe-serve moe-compile > "$src.build.log" 2>&1 ||
    { tail -30 "$src.build.log"; exit 1; }
fi
rm -rf "$work/ckpt" "$work/plan"
python3 "$repo/test/e2e/make-text-checkpoint.py" "$work/ckpt"
"$src/build/bin/moe-compile" "$work/ckpt" -o "$work/plan" > /dev/null
exec python3 "$repo/tools/bench-serve-ab.py" "$src/build/bin" "$bin" "$work/plan" "$@"
