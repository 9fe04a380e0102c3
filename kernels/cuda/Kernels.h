//===- Kernels.h - the CUDA kernels, callable from C++ -----------*- C++ -*-===//
//
// The CUDA twin of kernels/cpu/Kernels.h: the same math, on device memory,
// enqueued on a stream. Every function launches and returns the launch's
// error (cudaSuccess, or why it could not be launched); a fault while the
// kernel runs is reported by the stream. Pointers are device addresses.
// Reductions have a fixed order and use no atomics, so the same inputs
// give the same bits run after run. This header needs no CUDA compiler.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_KERNELS_CUDA_KERNELS_H
#define MOE_KERNELS_CUDA_KERNELS_H

#include "moe/abi/KernelCall.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace moe::cuda {

namespace rt = moe::rt;

/// A weight matrix or vector in device memory, row-major, as the CPU
/// kernels' moe::cpu::Weight: F32, BF16, F16, or I8 / I4 / F8E4M3 codes
/// times f32 scales, one per block of `rowGroup` rows by `group` elements.
/// I4 packs two elements a byte, the lower index in the low nibble, each a
/// two's complement value in [-8, 7]. `rowOffset` is where row 0 falls in
/// its block of rows (a stacked expert may start mid-block). Decoding is
/// moe/abi/Numeric.h's, so both backends read the same f32 values.
struct Weight {
  const void *data = nullptr;
  rt::DType dtype = rt::DType::F32;
  int64_t cols = 0;                 ///< elements a row
  const float *scales = nullptr;    ///< I8, I4, F8E4M3
  int64_t group = 0, rowGroup = 1, rowOffset = 0;
};

/// out[t, :] = table[ids[t], :]; table: [vocab, hidden]. A row whose id is
/// outside [0, vocab) becomes NaN (the session checks ids first; this
/// keeps a corrupt id from reading outside the table).
cudaError_t embedding(const int32_t *ids, int64_t tokens, Weight table, int64_t vocab,
                      int64_t hidden, float *out, cudaStream_t stream);

/// out[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * w over `cols`; x
/// and out may alias.
cudaError_t rmsNorm(const float *x, int64_t rows, int64_t cols, Weight w, float eps,
                    float *out, cudaStream_t stream);

/// sum = a + b, then out = rmsNorm(sum); sum may alias a or b.
cudaError_t addRmsNorm(const float *a, const float *b, int64_t rows, int64_t cols,
                       Weight w, float eps, float *sum, float *out, cudaStream_t stream);

/// out[t, n] = sum_k x[t, k] * w[n, k] (+ bias[n]); w: [n, k], bias: [n]
/// or null. Few tokens take one warp an output row (the weights read
/// once, coalesced), more a tiled kernel; sums are f32 in a fixed order.
cudaError_t linear(const float *x, int64_t tokens, int64_t k, Weight w, int64_t n,
                   const Weight *bias, float *out, cudaStream_t stream);

/// The most experts and picks the router and experts kernels take.
constexpr int64_t kMaxExperts = 1024, kMaxTopK = 32;

/// Per token: logits = x w^T, scores (softmax or sigmoid), what it chooses
/// on (scores + bias for NoAuxTc, masked outside the topkGroup best
/// groups), its topK experts best first (ties to the lower id, NaN as
/// -inf) and their weights, as the CPU router (kernels/cpu/Router.cpp).
/// weights, ids: [tokens, topK].
/// params.policy must be token choice (its kernel picks per token).
cudaError_t router(const float *x, int64_t tokens, int64_t hidden, Weight w, const Weight *bias,
                   const rt::RouterParams &params, float *weights, int32_t *ids,
                   cudaStream_t stream);

/// The stacked SwiGLU experts: gate and up [E + shared, inter, hidden]
/// each, or fused gateUp [E + shared, 2 inter, hidden] (gate rows first),
/// and down [E + shared, hidden, inter]; always-on experts after the
/// routed ones.
struct ExpertWeights {
  Weight gate, up, down; ///< gate is gateUp when `fused`
  bool fused = false;
  int64_t shared = 0;
};
/// out[t] = the sum over t's routed picks, in ascending expert id, of
/// weights[t, j] * expert(x[t]), then its always-on experts with weight 1
/// (kernels/cpu/Experts.cpp's order). Scratch for the experts' rows comes
/// from the stream's memory pool (cudaMallocAsync) and goes back to it.
cudaError_t experts(const float *x, int64_t tokens, int64_t hidden, int64_t inter,
                    int64_t numExperts, const float *weights, const int32_t *ids, int64_t topK,
                    const ExpertWeights &w, float *out, cudaStream_t stream);

/// One plane (keys, values; MLA: latents, RoPE keys) of a layer of the
/// paged KV cache: rows of `width` elements in `heads` equal parts; in an
/// int8 or fp8 cache each part carries its own scale, scales[row * heads
/// + part] (the part's largest magnitude over 127 or 448, 1 for a zero
/// part: kernels/cpu/KvCache.cpp's format).
struct KvPlane {
  void *data = nullptr;
  float *scales = nullptr; ///< int8 and fp8 caches
  int64_t width = 0, heads = 1;
};
/// One layer of the paged KV cache (moe::rt::KvLayerView): blocks of
/// `blockSize` rows in the k and v planes, of F32, BF16, I8 or F8E4M3
/// elements; token t's position p is row tables[t * tableStride + p /
/// blockSize] * blockSize + p % blockSize.
struct KvCache {
  KvPlane k, v;
  int64_t blockSize = 0;
  rt::DType dtype = rt::DType::F32;
  const int32_t *tables = nullptr;
  int64_t tableStride = 0;
};
/// The most head dimensions and rotary pairs the attention kernels take.
constexpr int64_t kMaxHeadDim = 256, kMaxRopePairs = 128;
/// The attention's parameters, with the rotary inverse frequencies copied
/// by value (params.rope.invFreq points into the plan, in host memory, and
/// is not read on the device).
struct GqaArgs {
  rt::AttentionParams params;
  float invFreq[kMaxRopePairs];
};
/// Causal grouped-query attention over the paged cache, as the CPU's
/// (kernels/cpu/Attention.h): the tokens' keys (per-head RMSNorm with
/// kNorm when given, then RoPE) and values are stored at their positions
/// first, then each query (qNorm, RoPE) attends to its sequence's
/// positions [lo, position] (lo = position - window + 1 with a sliding
/// window, else 0). q, out: [T, heads * headDim]; k, v: [T, kvHeads *
/// headDim]; positions: [T], on the device.
cudaError_t gqaAttention(const float *q, const float *k, const float *v,
                         const int32_t *positions, int64_t tokens, const Weight *qNorm,
                         const Weight *kNorm, const GqaArgs &args, const KvCache &cache,
                         float *out, cudaStream_t stream);

/// The largest latent (kv_lora_rank) the MLA kernels take: DeepSeek-V2/V3's.
constexpr int64_t kMaxLatent = 512;
/// The MLA's parameters, the rotary inverse frequencies copied by value.
struct MlaArgs {
  rt::MlaParams params;
  float invFreq[kMaxRopePairs];
};
/// DeepSeek's multi-head latent attention over the paged cache, as the
/// CPU's (kernels/cpu/Attention.h): each token's latent kvA[:, :rank]
/// (RMSNorm with kvNorm) is stored in the k plane (width rank) and its
/// RoPE key kvA[:, rank:] (rotated) in the v plane (width ropeDim); then
/// each head's query attends with kv_b absorbed: W_uk[h]^T q_nope against
/// the latents plus its rotated q_pe against the RoPE keys, and W_uv[h]
/// times the weighted latents out. q: [T, heads * (nope + rope)]; kvA:
/// [T, rank + rope]; kvB: [heads * (nope + vDim), rank]; out: [T, heads *
/// vDim].
cudaError_t mlaAttention(const float *q, const float *kvA, Weight kvNorm, Weight kvB,
                         const int32_t *positions, int64_t tokens, const MlaArgs &args,
                         const KvCache &cache, float *out, cudaStream_t stream);
/// out[i] = a[i] + b[i].
cudaError_t add(const float *a, const float *b, int64_t n, float *out, cudaStream_t stream);

/// out[t, i] = silu(gate[t, i]) * up[t, i]; rows of gate and up start
/// `stride` elements apart, out is dense [rows, cols].
cudaError_t siluMul(const float *gate, const float *up, int64_t rows, int64_t cols,
                    int64_t stride, float *out, cudaStream_t stream);

/// out[t, :] = sigmoid(dot(x[t, :], g)) * y[t, :]; y and out may alias.
cudaError_t sigmoidGate(const float *x, Weight g, const float *y, int64_t tokens,
                        int64_t hidden, float *out, cudaStream_t stream);

} // namespace moe::cuda

#endif
