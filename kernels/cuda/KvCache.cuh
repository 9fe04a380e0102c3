//===- KvCache.cuh - what the attention kernels share ------------*- CUDA -*-===//
//
// Rows of the paged cache, the per-head norm and RoPE of a row in shared
// memory, and the merge of the warps' online softmaxes: used by the GQA
// kernels (Attention.cu) and the MLA kernels (Mla.cu) alike.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_KERNELS_CUDA_KVCACHE_CUH
#define MOE_KERNELS_CUDA_KVCACHE_CUH

#include "kernels/cuda/Load.cuh"
#include "kernels/cuda/Reduce.cuh"

#include <cmath>

namespace moe::cuda {

/// Warps of an attending block: each takes every kAttendWarps-th position.
constexpr int kAttendWarps = kRowThreads / 32;

/// The cache row of `position` in token `token`'s sequence.
__device__ inline int64_t cacheRow(const KvCache &c, int64_t token, int64_t position) {
  return int64_t(c.tables[token * c.tableStride + position / c.blockSize]) * c.blockSize +
         position % c.blockSize;
}

/// Element `col` of row `row` of plane p, which lies in part `head`, as
/// f32: decoded as the CPU's KvCache::rows widens it (moe/abi/Numeric.h),
/// times the part's scale in an int8 or fp8 cache. (The caller knows both
/// indices: no division per element.)
__device__ inline float kvRead(const KvCache &c, const KvPlane &p, int64_t row, int64_t head,
                               int64_t col) {
  const int64_t i = row * p.width + col;
  switch (c.dtype) {
  case rt::DType::BF16: return cpu::bf16ToF32(static_cast<const uint16_t *>(p.data)[i]);
  case rt::DType::I8:
    return float(static_cast<const int8_t *>(p.data)[i]) * p.scales[row * p.heads + head];
  case rt::DType::F8E4M3:
    return cpu::fp8ToF32(static_cast<const uint8_t *>(p.data)[i]) * p.scales[row * p.heads + head];
  default: return static_cast<const float *>(p.data)[i];
  }
}

/// Writes x (shared memory, the part's width / heads floats) as part
/// `head` of row `row` of plane p, as the CPU's KvCache::store does: int8
/// and fp8 parts are divided by their scale, the largest magnitude over
/// 127 (rounded to nearest even, clamped) or 448 (f32ToFp8). Every thread
/// of the block calls it.
__device__ inline void kvStore(const KvCache &c, const KvPlane &p, int64_t row, int64_t head,
                               const float *x) {
  const int64_t d = p.width / p.heads, base = row * p.width + head * d;
  if (c.dtype == rt::DType::F32 || c.dtype == rt::DType::BF16) {
    for (int64_t e = threadIdx.x; e < d; e += blockDim.x) {
      if (c.dtype == rt::DType::BF16)
        static_cast<uint16_t *>(p.data)[base + e] = cpu::f32ToBf16(x[e]);
      else
        static_cast<float *>(p.data)[base + e] = x[e];
    }
    return;
  }
  float top = 0.0f;
  for (int64_t e = threadIdx.x; e < d; e += blockDim.x)
    top = fmaxf(top, fabsf(x[e]));
  top = blockMax(top);
  const bool int8 = c.dtype == rt::DType::I8;
  const float scale = top > 0.0f ? top / (int8 ? 127.0f : 448.0f) : 1.0f;
  if (threadIdx.x == 0)
    p.scales[row * p.heads + head] = scale;
  for (int64_t e = threadIdx.x; e < d; e += blockDim.x) {
    const float q = x[e] / scale;
    static_cast<uint8_t *>(p.data)[base + e] =
        int8 ? uint8_t(int8_t(fminf(fmaxf(rintf(q), -127.0f), 127.0f))) : cpu::f32ToFp8(q);
  }
}

/// RMSNorm (when `w` is given) then RoPE of its first 2 rope.pairs elements
/// (none when rope.pairs is 0) of the row `x` (shared memory, `dim` floats)
/// at `position`. Every thread of the block calls it.
__device__ inline void normAndRotate(float *x, int64_t dim, const Weight &w, float eps,
                                     const rt::Rope &rope, const float *invFreq,
                                     int32_t position) {
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

/// One warp's online softmax over the positions it took: the running
/// maximum score, the sum of exp(score - max) and, in each lane, the
/// weighted sum of elements lane + 32 i of the values.
template <int PerLane> struct OnlineSoftmax {
  float max = -INFINITY, sumExp = 0.0f, acc[PerLane] = {};

  /// Takes a position's score; returns the factor its value row enters
  /// with, after the earlier rows are rescaled.
  __device__ float add(float score) {
    const float newMax = fmaxf(max, score);
    const float rescale = expf(max - newMax), weight = expf(score - newMax);
    sumExp = sumExp * rescale + weight;
#pragma unroll
    for (int i = 0; i < PerLane; ++i)
      acc[i] *= rescale;
    max = newMax;
    return weight;
  }

  /// The block's warps merged in warp order: out[c] for c < dim (every
  /// thread of the block calls it; `scratch` is [kAttendWarps][PerLane *
  /// 32] floats of shared memory). Warp 0 always saw the first visible
  /// position, so the maximum is finite; a warp that saw none adds
  /// exp(-inf) = 0.
  __device__ void merge(int64_t dim, float *scratch, float *out) const {
    __shared__ float warpMax[kAttendWarps], warpSumExp[kAttendWarps];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
    for (int i = 0; i < PerLane; ++i)
      if (lane + 32 * i < dim)
        scratch[warp * PerLane * 32 + lane + 32 * i] = acc[i];
    if (lane == 0) {
      warpMax[warp] = max;
      warpSumExp[warp] = sumExp;
    }
    __syncthreads();
    float m = warpMax[0];
    for (int w = 1; w < kAttendWarps; ++w)
      m = fmaxf(m, warpMax[w]);
    float total = 0.0f;
    for (int w = 0; w < kAttendWarps; ++w)
      total += warpSumExp[w] * expf(warpMax[w] - m);
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
      float o = 0.0f;
      for (int w = 0; w < kAttendWarps; ++w)
        o += scratch[w * PerLane * 32 + c] * expf(warpMax[w] - m);
      out[c] = o / total;
    }
    __syncthreads();
  }
};

} // namespace moe::cuda

#endif
