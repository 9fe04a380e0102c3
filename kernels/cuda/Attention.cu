//===- Attention.cu - grouped-query attention over the paged KV cache ----===//
//
// Two kernels, in stream order, so that a batch's queries see every key of
// the batch: store (a block a token and KV head: per-head RMSNorm of k,
// RoPE, the row written into the cache with v's) and attend (a block a
// token and query head). An attending block's warps take the visible
// positions in turn (warp w: lo + w, lo + w + 8, ...), each keeping an
// online softmax (running max, sum and weighted values, its lanes holding
// headDim / 32 elements); the block then merges its warps' in warp order.
// Every sum has a fixed order: the same bits run after run. Decode reads a
// KV head's rows once per query head of its group (from L2 after the first);
// a tiled prefill kernel that reads each block of keys once for many
// queries is the next step (docs/design-cuda.md).
//
//===----------------------------------------------------------------------===//
#include "kernels/cuda/Kernels.h"
#include "kernels/cuda/Load.cuh"
#include "kernels/cuda/Reduce.cuh"

#include <cmath>

namespace moe::cuda {

namespace {

constexpr int kWarps = kRowThreads / 32;
constexpr int kPerLane = int(kMaxHeadDim / 32);

__device__ inline int64_t cacheRow(const KvCache &c, int64_t token, int64_t position) {
  return int64_t(c.tables[token * c.tableStride + position / c.blockSize]) * c.blockSize +
         position % c.blockSize;
}

__device__ inline float kvAt(const KvCache &c, const void *plane, int64_t i) {
  return c.dtype == rt::DType::BF16 ? cpu::bf16ToF32(static_cast<const uint16_t *>(plane)[i])
                                : static_cast<const float *>(plane)[i];
}

__device__ inline void kvStore(const KvCache &c, void *plane, int64_t i, float x) {
  if (c.dtype == rt::DType::BF16)
    static_cast<uint16_t *>(plane)[i] = cpu::f32ToBf16(x);
  else
    static_cast<float *>(plane)[i] = x;
}

/// Per-head RMSNorm (when `w` is given) then RoPE of the head in `x`
/// (shared memory, `dim` floats) at `position`. Every thread of the block
/// calls it.
__device__ void normAndRotate(float *x, int64_t dim, const Weight &w, float eps,
                              const rt::Rope &rope, const float *invFreq, int32_t position) {
  if (w.data) {
    float squares = 0.0f;
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x)
      squares += x[c] * x[c];
    const float inv = rsqrtf(blockSum(squares) / float(dim) + eps);
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x)
      x[c] = x[c] * inv * at(w, 0, c);
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < rope.pairs; i += blockDim.x) {
    // float math, as transformers computes cos and sin in fp32.
    const float angle = float(position) * invFreq[i];
    const float c = cosf(angle) * rope.attentionFactor, s = sinf(angle) * rope.attentionFactor;
    const int64_t a = rope.interleaved ? 2 * i : i, b = rope.interleaved ? 2 * i + 1 : i + rope.pairs;
    const float x1 = x[a], x2 = x[b];
    x[a] = x1 * c - x2 * s;
    x[b] = x2 * c + x1 * s;
  }
  __syncthreads();
}

__global__ void storeKernel(const float *k, const float *v, const int32_t *positions,
                            Weight kNorm, GqaArgs args, KvCache cache) {
  const rt::AttentionParams &p = args.params;
  __shared__ float row[kMaxHeadDim];
  const int64_t t = blockIdx.x, h = blockIdx.y, hd = p.headDim, width = p.numKvHeads * hd;
  const int32_t position = positions[t];
  for (int64_t c = threadIdx.x; c < hd; c += blockDim.x)
    row[c] = k[t * width + h * hd + c];
  __syncthreads();
  normAndRotate(row, hd, kNorm, p.qkNormEps, p.rope, args.invFreq, position);
  const int64_t base = cacheRow(cache, t, position) * cache.width + h * hd;
  for (int64_t c = threadIdx.x; c < hd; c += blockDim.x) {
    kvStore(cache, cache.k, base + c, row[c]);
    kvStore(cache, cache.v, base + c, v[t * width + h * hd + c]);
  }
}

__global__ void attendKernel(const float *q, const int32_t *positions, Weight qNorm,
                             GqaArgs args, KvCache cache, float *out) {
  const rt::AttentionParams &p = args.params;
  __shared__ float query[kMaxHeadDim];
  __shared__ float warpValues[kWarps][kMaxHeadDim], warpMax[kWarps], warpSumExp[kWarps];
  const int64_t t = blockIdx.x, h = blockIdx.y, hd = p.headDim, width = p.numHeads * hd;
  const int64_t kvHead = h / (p.numHeads / p.numKvHeads);
  const int32_t position = positions[t];
  for (int64_t c = threadIdx.x; c < hd; c += blockDim.x)
    query[c] = q[t * width + h * hd + c];
  __syncthreads();
  normAndRotate(query, hd, qNorm, p.qkNormEps, p.rope, args.invFreq, position);

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float qr[kPerLane], acc[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int64_t c = lane + 32 * i;
    qr[i] = c < hd ? query[c] : 0.0f;
    acc[i] = 0.0f;
  }
  const int64_t lo =
      p.slidingWindow > 0 ? max(int64_t(0), int64_t(position) - p.slidingWindow + 1) : 0;
  float runMax = -INFINITY, sumExp = 0.0f;
  for (int64_t j = lo + warp; j <= position; j += kWarps) {
    const int64_t base = cacheRow(cache, t, j) * cache.width + kvHead * hd;
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t c = lane + 32 * i;
      if (c < hd)
        dot += qr[i] * kvAt(cache, cache.k, base + c);
    }
    const float score = __shfl_sync(0xffffffffu, warpSum(dot), 0) * p.scale;
    const float newMax = fmaxf(runMax, score);
    const float rescale = expf(runMax - newMax), weight = expf(score - newMax);
    sumExp = sumExp * rescale + weight;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t c = lane + 32 * i;
      if (c < hd)
        acc[i] = acc[i] * rescale + weight * kvAt(cache, cache.v, base + c);
    }
    runMax = newMax;
  }
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int64_t c = lane + 32 * i;
    if (c < hd)
      warpValues[warp][c] = acc[i];
  }
  if (lane == 0) {
    warpMax[warp] = runMax;
    warpSumExp[warp] = sumExp;
  }
  __syncthreads();
  // Warp 0 always saw position lo, so the maximum is finite; a warp that
  // saw nothing adds exp(-inf) = 0.
  float max = warpMax[0];
  for (int w = 1; w < kWarps; ++w)
    max = fmaxf(max, warpMax[w]);
  float total = 0.0f;
  for (int w = 0; w < kWarps; ++w)
    total += warpSumExp[w] * expf(warpMax[w] - max);
  for (int64_t c = threadIdx.x; c < hd; c += blockDim.x) {
    float o = 0.0f;
    for (int w = 0; w < kWarps; ++w)
      o += warpValues[w][c] * expf(warpMax[w] - max);
    out[t * width + h * hd + c] = o / total;
  }
}

} // namespace

cudaError_t gqaAttention(const float *q, const float *k, const float *v,
                         const int32_t *positions, int64_t tokens, const Weight *qNorm,
                         const Weight *kNorm, const GqaArgs &args, const KvCache &cache,
                         float *out, cudaStream_t stream) {
  const rt::AttentionParams &p = args.params;
  if (p.headDim < 1 || p.headDim > kMaxHeadDim || p.numKvHeads < 1 || p.numHeads % p.numKvHeads ||
      p.rope.pairs < 0 || p.rope.pairs > kMaxRopePairs || 2 * p.rope.pairs > p.headDim)
    return cudaErrorInvalidValue;
  if (tokens <= 0)
    return cudaGetLastError();
  storeKernel<<<dim3(unsigned(tokens), unsigned(p.numKvHeads)), kRowThreads, 0, stream>>>(
      k, v, positions, kNorm ? *kNorm : Weight{}, args, cache);
  attendKernel<<<dim3(unsigned(tokens), unsigned(p.numHeads)), kRowThreads, 0, stream>>>(
      q, positions, qNorm ? *qNorm : Weight{}, args, cache, out);
  return cudaGetLastError();
}

} // namespace moe::cuda
