#!/usr/bin/env bash
# Times `moe-import --shape-only <dir>` (import + verify + print the IR),
# 10 runs, and prints min / median / max wall time.
set -euo pipefail
tool=${1:?usage: bench-import.sh <moe-import> <hf-config-dir> [runs]}
dir=${2:?usage: bench-import.sh <moe-import> <hf-config-dir> [runs]}
runs=${3:-10}
"$tool" --shape-only "$dir" --summary | sed -n '1,4p'
times=()
for ((i = 0; i < runs; i++)); do
  start=$(date +%s%N)
  "$tool" --shape-only "$dir" -o /dev/null
  end=$(date +%s%N)
  times+=($(( (end - start) / 1000 )))
done
sorted=($(printf '%s\n' "${times[@]}" | sort -n))
ms() { awk -v us="$1" 'BEGIN { printf "%.1f ms", us / 1000 }'; }
echo "moe-import --shape-only $dir: $runs runs, min $(ms "${sorted[0]}"), median $(ms "${sorted[$((runs / 2))]}"), max $(ms "${sorted[$((runs - 1))]}")"
