#!/usr/bin/env bash
# A/B of the CPU kernels in one process (tools/ab-kernels/ab-kernels.cpp):
# builds the kernels library of git revision REF (A, default HEAD) and of the
# working tree (B) as two shared libraries, with the compile options of each
# one's kernels/cpu/CMakeLists.txt, then runs ab-kernels on them; arguments
# after REF go to ab-kernels (e.g. --tokens 0,8 --threads 2).
#   ab-kernels.sh <build/bin> [REF] [ab-kernels flags...]
set -euo pipefail
bin=${1:?usage: ab-kernels.sh <build/bin> [REF] [ab-kernels flags...]}
ref=${2:-HEAD}
shift $(( $# >= 2 ? 2 : 1 ))
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${AB_KERNELS_WORK:-/tmp/moe-ab-kernels}
cxx=${CXX:-c++}
[ -x "$bin/ab-kernels" ] || { echo "ab-kernels.sh: no $bin/ab-kernels (run make build)" >&2; exit 1; }
git -C "$repo" rev-parse --verify --quiet "$ref^{commit}" >/dev/null ||
  { echo "ab-kernels.sh: '$ref' is not a commit of $repo" >&2; exit 1; }

# build <source root> <output .so>: every kernels/cpu/*.cpp, -fPIC, linked
# -Bsymbolic so that its calls stay inside it whatever else the process has.
build() {
  local src=$1 out=$2 flags
  flags=$(sed -n 's/^target_compile_options(MoeCpuKernels PRIVATE \(.*\))$/\1/p' \
    "$src/kernels/cpu/CMakeLists.txt")
  [ -n "$flags" ] || { echo "ab-kernels.sh: no compile options in $src/kernels/cpu/CMakeLists.txt" >&2; exit 1; }
  rm -rf "$src/obj" && mkdir -p "$src/obj"
  # -O3 -DNDEBUG: CMake's Release flags, which the target's options follow.
  ls "$src"/kernels/cpu/*.cpp | xargs -P "$(nproc)" -I{} sh -c \
    "$cxx -std=gnu++17 -fPIC -O3 -DNDEBUG $flags -I'$src' -I'$src/runtime/include' -c {} -o '$src/obj/'\$(basename {} .cpp).o"
  "$cxx" -shared -Wl,-Bsymbolic -o "$out" "$src"/obj/*.o -lpthread
}

rm -rf "$work" && mkdir -p "$work/a" "$work/b"
echo "ab-kernels.sh: A = $ref ($(git -C "$repo" rev-parse --short "$ref")), B = the working tree; building both ..." >&2
git -C "$repo" archive "$ref" kernels/cpu runtime/include | tar -x -C "$work/a"
(cd "$repo" && tar -c kernels/cpu runtime/include) | tar -x -C "$work/b"
build "$work/a" "$work/a.so"
build "$work/b" "$work/b.so"
exec "$bin/ab-kernels" "$work/a.so" "$work/b.so" "$@"
