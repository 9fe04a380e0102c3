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

/// Rotary embedding resolved by the compiler: angle(pos, i) = pos * invFreq[i]
/// for i < pairs; cos and sin are scaled by attentionFactor. Pairs are
/// (i, i + rotary/2) (half rotation, Llama family) or (2i, 2i + 1)
/// (interleaved, DeepSeek).
struct Rope {
  const float *invFreq = nullptr;
  int64_t pairs = 0;
  float attentionFactor = 1.0f;
  bool interleaved = false;
};

struct GqaParams {
  int64_t numHeads = 0, numKvHeads = 0, headDim = 0;
  float scale = 1.0f;
  Rope rope;
  int64_t slidingWindow = 0; ///< 0: none
  float qkNormEps = 1e-6f;
};

/// q: [T, heads * headDim], k, v: [T, kvHeads * headDim]; qNorm/kNorm
/// ([headDim], may be null): per-head RMSNorm of q and k before RoPE
/// (Qwen3). out: [T, heads * headDim]. cache: k and v planes of width
/// kvHeads * headDim with kvHeads heads. q and k are not modified.
void gqaAttention(const float *q, const float *k, const float *v,
                  const int32_t *positions, int64_t tokens, const Weight *qNorm,
                  const Weight *kNorm, const GqaParams &params, KvCache &cache,
                  float *out);

struct MlaParams {
  int64_t numHeads = 0, kvLoraRank = 0, nopeDim = 0, ropeDim = 0, vDim = 0;
  float scale = 1.0f;
  Rope rope;
  float normEps = 1e-6f;
};

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
