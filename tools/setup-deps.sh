#!/usr/bin/env bash
# Installs every Debian package the build and tests need. Idempotent: a second run
# installs nothing and takes about a second. Run as root on Debian 12 (bookworm).
#   setup-deps.sh           what `make test` and `make demo` need
#   setup-deps.sh --fuzz    also clang, libFuzzer and libomp for `make fuzz`
#   setup-deps.sh --plots   also rsvg-convert, for the PNGs of `make bench-overlap`
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache git python3
  llvm-19-dev libmlir-19-dev mlir-19-tools llvm-19-tools
  libflatbuffers-dev flatbuffers-compiler
  nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev
  libpcre2-dev libicu-dev libcpp-httplib-dev libboost1.81-dev libxxhash-dev pkg-config
  libdnnl-dev
  libopenmpi-dev openmpi-bin
)
if [ "${1:-}" = "--fuzz" ]; then
  packages+=(clang-19 libclang-rt-19-dev libomp-19-dev)
fi
if [ "${1:-}" = "--plots" ]; then # PNGs of the benchmarks' SVGs (rsvg-convert)
  packages+=(librsvg2-bin)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup-deps: all ${#packages[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "setup-deps: missing packages: ${missing[*]}; run 'sudo tools/setup-deps.sh' to install them" >&2
  exit 1
fi

echo "setup-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup-deps: done"
