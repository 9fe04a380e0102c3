#!/usr/bin/env bash
# Packs what tools/gpu-check.sh runs on a lent GPU machine. That machine has
# the CUDA driver and toolkit but none of our build's dependencies (MLIR,
# Open MPI, ICU, GoogleTest, flatbuffers) and no network, so the programs are
# built here (nvcc compiles the kernels for sm_80 and sm_90, the H200's) and
# travel with the shared libraries they load, except the C library's and
# the driver's. The golden models' plans are compiled here too (moe-compile
# needs MLIR). Writes .gpu-bundle/moe-gpu.tar.xz (git-ignored; or the file
# MOE_GPU_BUNDLE names), which the device tool's `carry` takes
# (docs/design-cuda.md, "On a lent GPU"). The benchmark model travels as
# shape-only plans (moe-compile --shape-only) in bf16 and fp8, a few hundred
# KB, which gpu-check.sh fills with random weights there (moe-plan synth);
# MOE_GPU_BENCH_CONFIG names another config.json's directory to compile
# instead (the lit test's small one).
#   tools/gpu-bundle.sh [BUILD_DIR]    (default build/; `make build` first)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
programs="conformance-tests moe-run moe-bench moe-plan moe-gpu-probe"
die() { echo "gpu-bundle: error: $*" >&2; exit 1; }
for p in $programs moe-compile; do
  [ -x "$build/bin/$p" ] || die "$build/bin/$p is missing: run make build first"
done
"$build/bin/moe-run" --list-devices | grep -q '^cuda ' ||
  die "$build has no CUDA backend: configure it with -DMOE_CUDA=ON (needs /usr/local/cuda)"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
moe=$stage/moe
mkdir -p "$moe/bin" "$moe/lib" "$moe/plans"
for p in $programs; do cp "$build/bin/$p" "$moe/bin/"; done
# Every library the programs load, as ldd resolves it here, but the C
# library, the dynamic loader and the CUDA driver (the GPU machine's own).
for p in $programs; do ldd "$build/bin/$p"; done |
  awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -v -E '/(libc|libm|libdl|libpthread|librt|libresolv|ld-linux[^/]*|libcuda|libnvidia[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$moe/lib/"; done

# The golden models' plans (test/e2e/goldens travel with the working tree;
# a folder without golden.json holds a config that is refused on purpose).
for g in "$root"/test/e2e/goldens/*/; do
  [ -f "$g/golden.json" ] || continue
  name=$(basename "$g")
  "$build/bin/moe-compile" "$g" -o "$moe/plans/$name" > /dev/null
done
"$build/bin/moe-compile" "$root/examples/kjv-moe" -o "$moe/plans/kjv-moe" > /dev/null
config=${MOE_GPU_BENCH_CONFIG:-$stage/bench-config}
[ -n "${MOE_GPU_BENCH_CONFIG:-}" ] || "$root/tools/make-bench-checkpoint.sh" "$config" --config-only
for precision in bf16 fp8; do # as make bench-roofline compiles it
  "$build/bin/moe-compile" "$config" --shape-only --precision "$precision" \
    -o "$moe/bench/$precision" --max-batch-tokens 512 --max-context 1024 > /dev/null
done
git -C "$root" rev-parse --short HEAD > "$moe/commit"

bundle=${MOE_GPU_BUNDLE:-$root/.gpu-bundle/moe-gpu.tar.xz}
mkdir -p "$(dirname "$bundle")"
XZ_OPT=${XZ_OPT:--6 -T0} tar -C "$stage" -cJf "$bundle" moe
bytes=$(stat -c %s "$bundle")
echo "gpu-bundle: $bundle, $((bytes >> 20)) MiB ($(ls "$moe/lib" | wc -l) libraries, $(ls "$moe/plans" | wc -l) plans, $(ls "$moe/bench" | wc -l) shape-only benchmark plans)"
# The device tool carries at most 64 MiB with the working tree.
[ "$bytes" -lt $((48 << 20)) ] || die "the bundle is $((bytes >> 20)) MiB; the device tool carries 64 MiB with the working tree"
