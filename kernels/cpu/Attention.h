//===- Attention.h - CPU attention kernels over a KV cache ------*- C++ -*-===//
//
// Causal attention of a batch of tokens, at given positions, over a paged KV
// cache: each token belongs to a sequence whose block table maps position p
// to row table[p / blockSize] * blockSize + p % blockSize. Each call first
// writes its tokens' keys and values at their positions, then every query
// attends to its sequence's positions [lo, position], lo = position - window
// + 1 with a sliding window, else 0. Tokens of several sequences may share a
// call (continuous batching).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_KERNELS_CPU_ATTENTION_H
#define MOE_KERNELS_CPU_ATTENTION_H

#include "kernels/cpu/Kernels.h"
#include "kernels/cpu/KvCache.h"

namespace moe::cpu {

/// Rotary embedding and the parameters of each attention kernel: the
/// HAL's structs (moe/abi/KernelCall.h), as a kernel call carries them.
using Rope = rt::Rope;
using GqaParams = rt::AttentionParams;
using MlaParams = rt::MlaParams;

/// q: [T, heads * headDim], k, v: [T, kvHeads * headDim]; qNorm/kNorm
/// ([headDim], may be null): per-head RMSNorm of q and k before RoPE
/// (Qwen3). out: [T, heads * headDim]. cache: k and v planes of width
/// kvHeads * headDim with kvHeads heads. q and k are not modified.
void gqaAttention(const float *q, const float *k, const float *v,
                  const int32_t *positions, int64_t tokens, const Weight *qNorm,
                  const Weight *kNorm, const GqaParams &params, KvCache &cache,
                  float *out);

/// DeepSeek multi-head latent attention, in the absorbed form: the cache
/// holds the normalised latent (k plane, width kvLoraRank, one head) and the
/// rotated shared RoPE key (v plane, width ropeDim, one head) per token; kv_b ([heads * (nope + vDim),
/// rank]) is applied to queries and to the attended latent instead of to
/// every cached token. q: [T, heads * (nope + rope)], kvA: [T, rank + rope]
/// (kv_a_proj_with_mqa output), kvNorm: [rank]. out: [T, heads * vDim].
void mlaAttention(const float *q, const float *kvA, Weight kvNorm, Weight kvB,
                  const int32_t *positions, int64_t tokens,
                  const MlaParams &params, KvCache &cache, float *out);

} // namespace moe::cpu

#endif
