//===- Reduce.cuh - a warp's and a block's sum in a fixed order --*- CUDA -*-===//
#ifndef MOE_KERNELS_CUDA_REDUCE_CUH
#define MOE_KERNELS_CUDA_REDUCE_CUH

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

/// The sum of every thread's `v` over a block of kRowThreads threads,
/// returned to all of them: each warp sums by shuffles, then warp 0 sums
/// the warps' sums. The order is fixed by the thread indices alone, so the
/// result's bits do not vary from run to run.
__device__ inline float blockSum(float v) {
  __shared__ float warps[kRowThreads / 32];
  __shared__ float total;
  v = warpSum(v);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0)
    warps[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = warpSum(lane < kRowThreads / 32 ? warps[lane] : 0.0f);
    if (lane == 0)
      total = v;
  }
  __syncthreads();
  return total;
}

} // namespace moe::cuda

#endif
