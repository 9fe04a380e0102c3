//===- Linear.cu - out = x w^T (+ bias) with weights of any type ---------===//
//
// Decode steps (a few tokens) are bound by reading the weights: one warp
// takes an output row, its lanes read the row's weights coalesced, once,
// and each multiplies them into every token's sum; the warp then adds its
// lanes' sums in a fixed order (shuffles). Prefill and large batches take a
// tiled kernel: a block computes a 64 x 64 tile of tokens x outputs, its
// threads 4 x 4 each, from 16-deep slices of x and of the decoded weights
// staged in shared memory, summing over k in order. Both are SIMT f32:
// tensor cores, with weights converted in the prologue, are the next step
// (docs/design-cuda.md). The two kernels sum in different orders, so a
// token's row may differ in its last bits between a batch of 8 and one of 9.
//
//===----------------------------------------------------------------------===//
#include "kernels/cuda/Kernels.h"
#include "kernels/cuda/Load.cuh"
#include "kernels/cuda/Reduce.cuh"

namespace moe::cuda {

namespace {

constexpr int kMaxGemvTokens = 8;
constexpr int kGemvWarps = 4;   ///< output rows a block
constexpr int kTile = 64;       ///< tokens and outputs a block of the tiled kernel
constexpr int kDepth = 16;      ///< k a slice
constexpr int kGemmThreads = 256; ///< 16 x 16 threads of 4 x 4 outputs

/// The bias of output `row`, or 0 with none.
__device__ inline float biasAt(const Weight &bias, int64_t row) {
  return bias.data ? at(bias, 0, row) : 0.0f;
}

template <int Tokens>
__global__ void gemvKernel(const float *x, int64_t k, Weight w, int64_t n, Weight bias,
                           float *out) {
  const int lane = threadIdx.x % 32;
  const int64_t row = int64_t(blockIdx.x) * kGemvWarps + threadIdx.x / 32;
  if (row >= n) // the whole warp: row is the warp's
    return;
  float sum[Tokens] = {};
  for (int64_t c = lane; c < k; c += 32) {
    const float wv = at(w, row, c);
#pragma unroll
    for (int t = 0; t < Tokens; ++t)
      sum[t] += wv * x[t * k + c];
  }
#pragma unroll
  for (int t = 0; t < Tokens; ++t) {
    const float v = warpSum(sum[t]);
    if (lane == 0)
      out[t * n + row] = v + biasAt(bias, row);
  }
}

using Gemv = void (*)(const float *, int64_t, Weight, int64_t, Weight, float *);
constexpr Gemv kGemv[kMaxGemvTokens] = {gemvKernel<1>, gemvKernel<2>, gemvKernel<3>,
                                        gemvKernel<4>, gemvKernel<5>, gemvKernel<6>,
                                        gemvKernel<7>, gemvKernel<8>};

__global__ void gemmKernel(const float *x, int64_t tokens, int64_t k, Weight w, int64_t n,
                           Weight bias, float *out) {
  // [k][row] with a pad, so that the 4 x 4 reads hit different banks.
  __shared__ float xs[kDepth][kTile + 1], ws[kDepth][kTile + 1];
  const int64_t t0 = int64_t(blockIdx.y) * kTile, n0 = int64_t(blockIdx.x) * kTile;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float sum[4][4] = {};
  for (int64_t k0 = 0; k0 < k; k0 += kDepth) {
    for (int i = threadIdx.x; i < kTile * kDepth; i += kGemmThreads) {
      const int r = i / kDepth, c = i % kDepth;
      const int64_t kk = k0 + c;
      // Zeros past the edges add nothing to a sum.
      xs[c][r] = t0 + r < tokens && kk < k ? x[(t0 + r) * k + kk] : 0.0f;
      ws[c][r] = n0 + r < n && kk < k ? at(w, n0 + r, kk) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int c = 0; c < kDepth; ++c) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        a[i] = xs[c][ty * 4 + i];
        b[i] = ws[c][tx * 4 + i];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          sum[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i) {
    const int64_t t = t0 + ty * 4 + i;
    for (int j = 0; j < 4; ++j) {
      const int64_t o = n0 + tx * 4 + j;
      if (t < tokens && o < n)
        out[t * n + o] = sum[i][j] + biasAt(bias, o);
    }
  }
}

} // namespace

cudaError_t linear(const float *x, int64_t tokens, int64_t k, Weight w, int64_t n,
                   const Weight *bias, float *out, cudaStream_t stream) {
  const Weight b = bias ? *bias : Weight{};
  if (tokens > 0 && n > 0) {
    if (tokens <= kMaxGemvTokens) {
      const unsigned blocks = unsigned((n + kGemvWarps - 1) / kGemvWarps);
      kGemv[tokens - 1]<<<blocks, kGemvWarps * 32, 0, stream>>>(x, k, w, n, b, out);
    } else {
      const dim3 grid(unsigned((n + kTile - 1) / kTile), unsigned((tokens + kTile - 1) / kTile));
      gemmKernel<<<grid, kGemmThreads, 0, stream>>>(x, tokens, k, w, n, b, out);
    }
  }
  return cudaGetLastError();
}

} // namespace moe::cuda
