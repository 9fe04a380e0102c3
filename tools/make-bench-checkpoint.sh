#!/usr/bin/env bash
# The medium benchmark model, generated once: a Qwen3-MoE-shaped checkpoint
# (hidden 1024, 16 layers, 64 experts top-8, expert intermediate 256, vocab
# 32000; 1.76 GB of BF16 weights, 0.35 GB touched per decode token).
#   make-bench-checkpoint.sh <dir> [--config-only]
# --config-only writes its config.json alone (moe-compile --shape-only
# compiles that; tools/gpu-bundle.sh sends such plans to a GPU machine).
set -euo pipefail
out=${1:?usage: make-bench-checkpoint.sh <dir> [--config-only]}
only=${2:-}
case "$only" in
  "" | --config-only) ;;
  *) echo "make-bench-checkpoint.sh: error: unknown option '$only' (only --config-only)" >&2; exit 1 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "$only" ] && [ -f "$out/model.safetensors" ]; then
  exit 0
fi
[ -n "$only" ] || echo "generating the benchmark checkpoint in $out ..."
python3 "$here/make-tiny-checkpoint.py" --model-type qwen3_moe --out "$out" $only \
  --dims hidden_size=1024 --dims num_hidden_layers=16 --dims num_attention_heads=16 \
  --dims num_key_value_heads=4 --dims head_dim=64 --dims num_experts=64 \
  --dims num_experts_per_tok=8 --dims moe_intermediate_size=256 \
  --dims intermediate_size=2816 --dims decoder_sparse_step=1 \
  --dims vocab_size=32000 --dims max_position_embeddings=4096
