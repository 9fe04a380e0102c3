//===- Mla.cu - DeepSeek's multi-head latent attention -------------------===//
//
// As Attention.cu, two kernels in stream order:
// - store, a block a token: the latent kvA[t, :rank] normalised (kv_a
//   layernorm) into the k plane, the RoPE key kvA[t, rank:] rotated into
//   the v plane;
// - attend, a block a token and head, with kv_b absorbed (the latents are
//   never expanded into per-head keys and values):
//   1. qLatent = W_uk[h]^T q_nope (a thread a latent element), q_pe rotated;
//   2. the warps take the visible positions in turn, each score
//      (qLatent . latent + q_pe . ropeKey) * scale into an online softmax
//      over the latents (a lane holds rank / 32 elements);
//   3. the warps merged in warp order into the context (rank floats);
//   4. out[t, h] = W_uv[h] context, a warp an output element.
// The kv_b weight is read through at() (Load.cuh), so any weight type the
// linear kernels take works here. Sums have a fixed order.
//
//===----------------------------------------------------------------------===//
#include "kernels/cuda/KvCache.cuh"

namespace moe::cuda {

namespace {

constexpr int kLatentPerLane = int(kMaxLatent / 32);
constexpr int kRopePerLane = int(2 * kMaxRopePairs / 32);

__global__ void storeLatentKernel(const float *kvA, const int32_t *positions, Weight kvNorm,
                                  MlaArgs args, KvCache cache) {
  const rt::MlaParams &p = args.params;
  __shared__ float latent[kMaxLatent], ropeKey[2 * kMaxRopePairs];
  const int64_t t = blockIdx.x, rank = p.kvLoraRank, rope = p.ropeDim;
  const float *a = kvA + t * (rank + rope);
  for (int64_t c = threadIdx.x; c < rank; c += blockDim.x)
    latent[c] = a[c];
  for (int64_t c = threadIdx.x; c < rope; c += blockDim.x)
    ropeKey[c] = a[rank + c];
  __syncthreads();
  const rt::Rope none{nullptr, 0, 1.0f, false};
  normAndRotate(latent, rank, kvNorm, p.normEps, none, nullptr, 0);
  normAndRotate(ropeKey, rope, Weight{}, 0.0f, p.rope, args.invFreq, positions[t]);
  const int64_t row = cacheRow(cache, t, positions[t]);
  kvStore(cache, cache.k, row, 0, latent);
  kvStore(cache, cache.v, row, 0, ropeKey);
}

__global__ void attendLatentKernel(const float *q, const int32_t *positions, Weight kvB,
                                   MlaArgs args, KvCache cache, float *out) {
  const rt::MlaParams &p = args.params;
  __shared__ float qNope[kMaxLatent], qPe[2 * kMaxRopePairs], context[kMaxLatent];
  __shared__ float warpValues[kAttendWarps * kMaxLatent];
  const int64_t t = blockIdx.x, h = blockIdx.y, rank = p.kvLoraRank, nope = p.nopeDim,
                rope = p.ropeDim, qk = nope + rope, headRows = nope + p.vDim;
  const int32_t position = positions[t];
  const float *qh = q + (t * p.numHeads + h) * qk;
  for (int64_t c = threadIdx.x; c < nope; c += blockDim.x)
    qNope[c] = qh[c];
  for (int64_t c = threadIdx.x; c < rope; c += blockDim.x)
    qPe[c] = qh[nope + c];
  __syncthreads();
  normAndRotate(qPe, rope, Weight{}, 0.0f, p.rope, args.invFreq, position);
  // 1. W_uk[h] is kv_b's rows h * headRows + i, i < nope: a thread takes
  // latent elements r, reading each row's elements side by side.
  for (int64_t r = threadIdx.x; r < rank; r += blockDim.x) {
    float sum = 0.0f;
    for (int64_t i = 0; i < nope; ++i)
      sum += qNope[i] * at(kvB, h * headRows + i, r);
    context[r] = sum; // the absorbed query, until step 3 overwrites it
  }
  __syncthreads();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float ql[kLatentPerLane], qr[kRopePerLane];
#pragma unroll
  for (int i = 0; i < kLatentPerLane; ++i)
    ql[i] = lane + 32 * i < rank ? context[lane + 32 * i] : 0.0f;
#pragma unroll
  for (int i = 0; i < kRopePerLane; ++i)
    qr[i] = lane + 32 * i < rope ? qPe[lane + 32 * i] : 0.0f;
  __syncthreads(); // every warp has its query before context is overwritten
  // 2. The positions, a warp each in turn.
  OnlineSoftmax<kLatentPerLane> softmax;
  for (int64_t j = warp; j <= position; j += kAttendWarps) {
    const int64_t row = cacheRow(cache, t, j);
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < kLatentPerLane; ++i)
      if (lane + 32 * i < rank)
        dot += ql[i] * kvRead(cache, cache.k, row, 0, lane + 32 * i);
#pragma unroll
    for (int i = 0; i < kRopePerLane; ++i)
      if (lane + 32 * i < rope)
        dot += qr[i] * kvRead(cache, cache.v, row, 0, lane + 32 * i);
    const float weight = softmax.add(__shfl_sync(0xffffffffu, warpSum(dot), 0) * p.scale);
#pragma unroll
    for (int i = 0; i < kLatentPerLane; ++i)
      if (lane + 32 * i < rank)
        softmax.acc[i] += weight * kvRead(cache, cache.k, row, 0, lane + 32 * i);
  }
  // 3. The weighted latents.
  softmax.merge(rank, warpValues, context);
  // 4. W_uv[h] (rows h * headRows + nope + d) times the context.
  for (int64_t d = warp; d < p.vDim; d += kAttendWarps) {
    const float sum = warpRowDot(context, kvB, h * headRows + nope + d, rank);
    if (lane == 0)
      out[(t * p.numHeads + h) * p.vDim + d] = sum;
  }
}

} // namespace

cudaError_t mlaAttention(const float *q, const float *kvA, Weight kvNorm, Weight kvB,
                         const int32_t *positions, int64_t tokens, const MlaArgs &args,
                         const KvCache &cache, float *out, cudaStream_t stream) {
  const rt::MlaParams &p = args.params;
  if (p.numHeads < 1 || p.kvLoraRank < 1 || p.kvLoraRank > kMaxLatent || p.nopeDim < 0 ||
      p.nopeDim > kMaxLatent || p.ropeDim < 0 || p.ropeDim > 2 * kMaxRopePairs || p.vDim < 1 ||
      p.rope.pairs < 0 || 2 * p.rope.pairs > p.ropeDim || cache.k.heads != 1 ||
      cache.k.width != p.kvLoraRank || cache.v.heads != 1 || cache.v.width != p.ropeDim)
    return cudaErrorInvalidValue;
  if (tokens <= 0)
    return cudaGetLastError();
  storeLatentKernel<<<unsigned(tokens), kRowThreads, 0, stream>>>(kvA, positions, kvNorm, args,
                                                                   cache);
  attendLatentKernel<<<dim3(unsigned(tokens), unsigned(p.numHeads)), kRowThreads, 0, stream>>>(
      q, positions, kvB, args, cache, out);
  return cudaGetLastError();
}

} // namespace moe::cuda
