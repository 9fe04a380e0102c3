//===- Experts.cu - routed and always-on SwiGLU experts, then their sum --===//
//
// Three kernels over the token's slots (its topK routed picks, then its
// always-on experts: slot s is token s / picks, pick s % picks):
// - up: act[s, i] = silu(x_t . gate_e[i]) * (x_t . up_e[i]), a warp an i;
// - down: y[s, h] = act[s] . down_e[h], a warp an h;
// - combine: out[t] = the routed slots' weight * y in ascending expert id,
//   then the always-on ones' with weight 1 (the CPU's order).
// A slot reads its expert's weights itself: right for decode, where a
// batch's tokens share few experts' rows only by chance; prefill and large
// batches want the grouped GEMM over rows sorted by expert (dispatch), the
// next step (docs/design-cuda.md). The stacked weights are read as one
// matrix of E x rows rows, so scale blocks that straddle two experts (fp8's
// 128 x 128) are found as the CPU finds them.
//
//===----------------------------------------------------------------------===//
#include "kernels/cuda/Activation.cuh"
#include "kernels/cuda/Kernels.h"
#include "kernels/cuda/Load.cuh"

#include <cmath>

namespace moe::cuda {

namespace {

constexpr int kWarps = 4; ///< output rows a block

struct Slots {
  const int32_t *ids;
  int64_t topK, picks, numExperts;
  /// The expert of slot s, or -1 for an id outside [0, numExperts) (a
  /// corrupt one: its rows become NaN rather than reads outside the
  /// weights).
  __device__ int64_t expert(int64_t s) const {
    const int64_t j = s % picks;
    if (j >= topK)
      return numExperts + j - topK;
    const int64_t e = ids[s / picks * topK + j];
    return e >= 0 && e < numExperts ? e : -1;
  }
};

__global__ void upKernel(const float *x, int64_t hidden, int64_t inter, Slots slots, Weight gate,
                         Weight up, bool fused, float *act) {
  const int64_t s = blockIdx.x;
  const int64_t i = int64_t(blockIdx.y) * kWarps + threadIdx.x / 32;
  if (i >= inter) // the whole warp
    return;
  // A corrupt id's row becomes NaN (e is the warp's: its shuffles agree).
  const int64_t e = slots.expert(s);
  float value = NAN;
  if (e >= 0) {
    const int64_t gateRow = fused ? e * 2 * inter + i : e * inter + i;
    const int64_t upRow = fused ? gateRow + inter : e * inter + i;
    const float *xr = x + s / slots.picks * hidden;
    const float g = warpRowDot(xr, gate, gateRow, hidden);
    const float u = warpRowDot(xr, fused ? gate : up, upRow, hidden);
    value = silu(g) * u;
  }
  if (threadIdx.x % 32 == 0)
    act[s * inter + i] = value;
}

__global__ void downKernel(const float *act, int64_t inter, int64_t hidden, Slots slots,
                           Weight down, float *y) {
  const int64_t s = blockIdx.x;
  const int64_t h = int64_t(blockIdx.y) * kWarps + threadIdx.x / 32;
  if (h >= hidden)
    return;
  const int64_t e = slots.expert(s);
  const float value = e >= 0 ? warpRowDot(act + s * inter, down, e * hidden + h, inter) : NAN;
  if (threadIdx.x % 32 == 0)
    y[s * hidden + h] = value;
}

__global__ void combineKernel(const float *y, const float *weights, Slots slots, int64_t hidden,
                              float *out) {
  const int64_t t = blockIdx.x, k = slots.topK;
  const int32_t *ids = slots.ids + t * k;
  // The routed picks in ascending expert id (insertion sort: k is small).
  int order[kMaxTopK];
  for (int j = 0; j < k; ++j) {
    int place = j;
    while (place > 0 && ids[order[place - 1]] > ids[j]) {
      order[place] = order[place - 1];
      --place;
    }
    order[place] = j;
  }
  const float *yt = y + t * slots.picks * hidden;
  for (int64_t h = threadIdx.x; h < hidden; h += blockDim.x) {
    float o = 0.0f;
    for (int j = 0; j < k; ++j)
      o += weights[t * k + order[j]] * yt[order[j] * hidden + h];
    for (int64_t j = k; j < slots.picks; ++j)
      o += yt[j * hidden + h];
    out[t * hidden + h] = o;
  }
}

unsigned rowBlocks(int64_t rows) { return unsigned((rows + kWarps - 1) / kWarps); }

} // namespace

cudaError_t experts(const float *x, int64_t tokens, int64_t hidden, int64_t inter,
                    int64_t numExperts, const float *weights, const int32_t *ids, int64_t topK,
                    const ExpertWeights &w, float *out, cudaStream_t stream) {
  if (topK < 1 || topK > kMaxTopK || w.shared < 0)
    return cudaErrorInvalidValue;
  if (tokens <= 0)
    return cudaGetLastError();
  const Slots slots{ids, topK, topK + w.shared, numExperts};
  const int64_t count = tokens * slots.picks;
  float *act = nullptr, *y = nullptr;
  if (cudaError_t err = cudaMallocAsync(&act, size_t(count * (inter + hidden)) * sizeof(float),
                                        stream);
      err != cudaSuccess)
    return err;
  y = act + count * inter;
  upKernel<<<dim3(unsigned(count), rowBlocks(inter)), kWarps * 32, 0, stream>>>(
      x, hidden, inter, slots, w.gate, w.up, w.fused, act);
  downKernel<<<dim3(unsigned(count), rowBlocks(hidden)), kWarps * 32, 0, stream>>>(
      act, inter, hidden, slots, w.down, y);
  combineKernel<<<unsigned(tokens), kRowThreads, 0, stream>>>(y, weights, slots, hidden, out);
  const cudaError_t launched = cudaGetLastError();
  const cudaError_t freed = cudaFreeAsync(act, stream);
  return launched != cudaSuccess ? launched : freed;
}

} // namespace moe::cuda
