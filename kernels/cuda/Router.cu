//===- Router.cu - expert scores and top-k picks, a block a token --------===//
//
// The block's warps take the experts' logits in turn (a warp a dot
// product, its lanes reading the router row coalesced); then one thread
// scores, masks groups and picks, which for at most kMaxExperts experts
// and kMaxTopK picks is a few thousand steps: the same selection as the
// CPU's sort, with no cross-thread order to get wrong.
//
//===----------------------------------------------------------------------===//
#include "kernels/cuda/Activation.cuh"
#include "kernels/cuda/Kernels.h"
#include "kernels/cuda/Load.cuh"

#include <cmath>

namespace moe::cuda {

namespace {

constexpr int kRouterThreads = 256;
/// Expert groups a router may have (DeepSeek-V3 has 8): their scores are
/// the picking thread's own.
constexpr int kMaxGroups = 64;

/// NaN (from infinite logits) orders as -inf, as in the CPU router.
__device__ inline float key(float v) { return isnan(v) ? -INFINITY : v; }

/// The id in [0, n) of the largest value[id] not yet taken (ties to the
/// lower id), marked taken.
__device__ int takeBest(const float *value, bool *taken, int n) {
  int best = -1;
  for (int i = 0; i < n; ++i)
    if (!taken[i] && (best < 0 || key(value[i]) > key(value[best])))
      best = i;
  taken[best] = true;
  return best;
}

__global__ void routerKernel(const float *x, int64_t hidden, Weight w, Weight bias,
                             rt::RouterParams p, float *weights, int32_t *ids) {
  extern __shared__ float shared[];
  const int e = int(p.numExperts), k = int(p.topK);
  float *scores = shared, *choice = shared + e;
  bool *taken = reinterpret_cast<bool *>(choice + e);
  const int64_t t = blockIdx.x;
  const float *xr = x + t * hidden;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int i = warp; i < e; i += kRouterThreads / 32) {
    const float dot = warpRowDot(xr, w, i, hidden);
    if (lane == 0)
      scores[i] = dot;
  }
  __syncthreads();
  if (threadIdx.x != 0)
    return;
  if (p.scoring == rt::Scoring::Sigmoid) {
    for (int i = 0; i < e; ++i)
      scores[i] = sigmoid(scores[i]);
  } else {
    float max = scores[0], sum = 0.0f;
    for (int i = 1; i < e; ++i)
      max = fmaxf(max, scores[i]);
    for (int i = 0; i < e; ++i)
      sum += scores[i] = expf(scores[i] - max);
    for (int i = 0; i < e; ++i)
      scores[i] /= sum;
  }
  const bool noAux = p.method == rt::TopkMethod::NoAuxTc;
  for (int i = 0; i < e; ++i)
    choice[i] = scores[i] + (noAux ? at(bias, 0, i) : 0.0f);
  if (p.method != rt::TopkMethod::Greedy) {
    const int groups = int(p.nGroup), size = e / groups;
    float groupScore[kMaxGroups];
    bool groupTaken[kMaxGroups] = {};
    for (int g = 0; g < groups; ++g) {
      const float *c = choice + g * size;
      if (p.method == rt::TopkMethod::GroupLimitedGreedy) {
        float best = c[0];
        for (int i = 1; i < size; ++i)
          best = fmaxf(best, c[i]);
        groupScore[g] = best;
      } else { // the sum of the two largest
        float first = -INFINITY, second = -INFINITY;
        for (int i = 0; i < size; ++i) {
          second = fmaxf(second, fminf(first, c[i]));
          first = fmaxf(first, c[i]);
        }
        groupScore[g] = first + second;
      }
    }
    for (int j = 0; j < p.topkGroup; ++j)
      (void)takeBest(groupScore, groupTaken, groups);
    const float masked = noAux ? -INFINITY : 0.0f;
    for (int g = 0; g < groups; ++g)
      if (!groupTaken[g])
        for (int i = 0; i < size; ++i)
          choice[g * size + i] = masked;
  }
  for (int i = 0; i < e; ++i)
    taken[i] = false;
  // Greedy and V2 weigh by the (masked) choice; V3 by the unbiased score.
  const float *from = noAux ? scores : choice;
  float *wt = weights + t * k;
  int32_t *picked = ids + t * k;
  float sum = 0.0f;
  for (int j = 0; j < k; ++j) {
    picked[j] = takeBest(choice, taken, e);
    sum += wt[j] = from[picked[j]];
  }
  for (int j = 0; j < k; ++j) {
    if (p.normTopkProb)
      wt[j] /= sum + 1e-20f;
    wt[j] *= p.routedScalingFactor;
  }
}

} // namespace

cudaError_t router(const float *x, int64_t tokens, int64_t hidden, Weight w, const Weight *bias,
                   const rt::RouterParams &args, float *weights, int32_t *ids,
                   cudaStream_t stream) {
  if (args.policy != rt::RoutingPolicy::TokenChoice || args.numExperts < 1 ||
      args.numExperts > kMaxExperts || args.topK < 1 || args.topK > args.numExperts ||
      args.nGroup < 1 || args.nGroup > kMaxGroups ||
      args.numExperts % args.nGroup || args.topkGroup < 1 || args.topkGroup > args.nGroup)
    return cudaErrorInvalidValue;
  const size_t shared = size_t(args.numExperts) * (2 * sizeof(float) + sizeof(bool));
  if (tokens > 0)
    routerKernel<<<unsigned(tokens), kRouterThreads, shared, stream>>>(
        x, hidden, w, bias ? *bias : Weight{}, args, weights, ids);
  return cudaGetLastError();
}

} // namespace moe::cuda
