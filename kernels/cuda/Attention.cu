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
#include "kernels/cuda/KvCache.cuh"

namespace moe::cuda {

namespace {

constexpr int kPerLane = int(kMaxHeadDim / 32);

__global__ void storeKernel(const float *k, const float *v, const int32_t *positions,
                            Weight kNorm, GqaArgs args, KvCache cache) {
  const rt::AttentionParams &p = args.params;
  __shared__ float key[kMaxHeadDim], value[kMaxHeadDim];
  const int64_t t = blockIdx.x, h = blockIdx.y, hd = p.headDim, width = p.numKvHeads * hd;
  const int32_t position = positions[t];
  for (int64_t c = threadIdx.x; c < hd; c += blockDim.x) {
    key[c] = k[t * width + h * hd + c];
    value[c] = v[t * width + h * hd + c];
  }
  __syncthreads();
  normAndRotate(key, hd, kNorm, p.qkNormEps, p.rope, args.invFreq, position);
  const int64_t row = cacheRow(cache, t, position);
  kvStore(cache, cache.k, row, h, key);
  kvStore(cache, cache.v, row, h, value);
}

__global__ void attendKernel(const float *q, const int32_t *positions, Weight qNorm,
                             GqaArgs args, KvCache cache, float *out) {
  const rt::AttentionParams &p = args.params;
  __shared__ float query[kMaxHeadDim];
  __shared__ float warpValues[kAttendWarps * kMaxHeadDim];
  const int64_t t = blockIdx.x, h = blockIdx.y, hd = p.headDim, width = p.numHeads * hd;
  const int64_t kvHead = h / (p.numHeads / p.numKvHeads);
  const int32_t position = positions[t];
  for (int64_t c = threadIdx.x; c < hd; c += blockDim.x)
    query[c] = q[t * width + h * hd + c];
  __syncthreads();
  normAndRotate(query, hd, qNorm, p.qkNormEps, p.rope, args.invFreq, position);

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float qr[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int64_t c = lane + 32 * i;
    qr[i] = c < hd ? query[c] : 0.0f;
  }
  const int64_t lo =
      p.slidingWindow > 0 ? max(int64_t(0), int64_t(position) - p.slidingWindow + 1) : 0;
  OnlineSoftmax<kPerLane> softmax;
  for (int64_t j = lo + warp; j <= position; j += kAttendWarps) {
    const int64_t row = cacheRow(cache, t, j);
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t c = lane + 32 * i;
      if (c < hd)
        dot += qr[i] * kvRead(cache, cache.k, row, kvHead, kvHead * hd + c);
    }
    const float weight = softmax.add(__shfl_sync(0xffffffffu, warpSum(dot), 0) * p.scale);
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t c = lane + 32 * i;
      if (c < hd)
        softmax.acc[i] += weight * kvRead(cache, cache.v, row, kvHead, kvHead * hd + c);
    }
  }
  softmax.merge(hd, warpValues, out + t * width + h * hd);
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
  for (const KvPlane *plane : {&cache.k, &cache.v}) // a part a KV head
    if (plane->heads != p.numKvHeads || plane->width != p.numKvHeads * p.headDim)
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
