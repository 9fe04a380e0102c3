//===- Reduce.cuh - a warp's and a block's sum in a fixed order --*- CUDA -*-===//
#ifndef MOE_KERNELS_CUDA_REDUCE_CUH
#define MOE_KERNELS_CUDA_REDUCE_CUH

#include <cmath>

namespace moe::cuda {

/// The sum of the 32 lanes' `v`, in lane 0 (others hold partial sums): a
/// tree of shuffles, the same order every time.
__device__ inline float warpSum(float v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

/// Threads of the one-row-a-block kernels.
constexpr int kRowThreads = 256;

/// `combine` (a sum, a maximum; `identity` its neutral value) of every
/// thread's `v` over a block of kRowThreads threads, returned to all of
/// them: each warp combines by shuffles, then warp 0 combines the warps'. The order is fixed by the
/// thread indices alone, so the result's bits do not vary from run to run.
template <typename Combine>
__device__ inline float blockReduce(float v, Combine combine, float identity) {
  __shared__ float warps[kRowThreads / 32];
  __shared__ float total;
  for (int offset = 16; offset > 0; offset /= 2)
    v = combine(v, __shfl_down_sync(0xffffffffu, v, offset));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0)
    warps[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kRowThreads / 32 ? warps[lane] : identity;
    for (int offset = 16; offset > 0; offset /= 2)
      v = combine(v, __shfl_down_sync(0xffffffffu, v, offset));
    if (lane == 0)
      total = v;
  }
  __syncthreads();
  return total;
}

struct Plus {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

/// The sum of every thread's `v` over the block.
__device__ inline float blockSum(float v) { return blockReduce(v, Plus(), 0.0f); }
/// The largest of every thread's `v` over the block (NaN ignored, as fmaxf).
__device__ inline float blockMax(float v) { return blockReduce(v, Max(), -INFINITY); }

} // namespace moe::cuda

#endif
