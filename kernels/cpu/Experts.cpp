//===- Experts.cpp - routed SwiGLU experts --------------------------------===//
//
// The (token, j) slots are counting-sorted by expert (the permute); their
// token rows are gathered into one buffer, expert by expert. Grouped, the
// gate/up projections of all experts run as one grouped GEMM (linearGroup:
// one parallel region, threads sharing the row blocks of every expert),
// then SwiGLU over all rows, then the down projections as a second grouped
// GEMM; ungrouped, each projection of each expert is its own GEMM.
// The weighted rows are added into out expert by expert in ascending id
// (the combine), so every token sums its contributions in one fixed order
// (that of the transformers loop over experts) whatever the batch or the
// thread count. Always-on (shared) experts take the ids after the routed
// ones: their slots follow the routed slots, one per token and shared
// expert, with weight 1, so they are added last.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/Kernels.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace moe::cpu {

void experts(const float *x, int64_t tokens, int64_t hidden, int64_t inter,
             int64_t numExperts, const float *weights, const int32_t *indices,
             int64_t topK, const ExpertWeights &w, float *out) {
  const int64_t routed = tokens * topK, slots = routed + tokens * w.shared;
  const int64_t all = numExperts + w.shared;
  auto expertOf = [&](int64_t s) {
    return s < routed ? int64_t(indices[s]) : numExperts + (s - routed) % w.shared;
  };
  auto tokenOf = [&](int64_t s) { return s < routed ? s / topK : (s - routed) / w.shared; };
  // Slots of expert e: slotOf[start[e] .. start[e + 1]), in slot order.
  std::vector<int64_t> start(all + 1, 0), slotOf(slots);
  for (int64_t s = 0; s < slots; ++s)
    ++start[expertOf(s) + 1];
  std::partial_sum(start.begin(), start.end(), start.begin());
  std::vector<int64_t> next(start.begin(), start.end() - 1);
  for (int64_t s = 0; s < slots; ++s)
    slotOf[next[expertOf(s)]++] = s;

  // Row r of each buffer belongs to slot slotOf[r]. The buffers outlive the
  // call (grown, never shrunk): a prefill's are tens of MB, and allocating
  // and faulting them in on every layer cost more than the GEMMs' tails.
  thread_local std::vector<float> xsBuf, gateUpBuf, actBuf, yBuf;
  auto scratch = [](std::vector<float> &v, int64_t n) {
    if (int64_t(v.size()) < n)
      v.resize(size_t(n));
    return v.data();
  };
  float *xs = scratch(xsBuf, slots * hidden), *gateUp = scratch(gateUpBuf, slots * 2 * inter),
        *act = scratch(actBuf, slots * inter), *y = scratch(yBuf, slots * hidden);
  for (int64_t r = 0; r < slots; ++r)
    std::copy_n(x + tokenOf(slotOf[r]) * hidden, hidden, xs + r * hidden);

  // Grouped: every expert's projections in one parallel region; else one
  // after another, each its own (the same results).
  auto run = [&](const std::vector<LinearProblem> &group) {
    if (w.grouped)
      return linearGroup(group.data(), group.size());
    for (const LinearProblem &p : group)
      linearGroup(&p, 1);
  };
  // gateUp row r: [gate | up] of slot slotOf[r].
  std::vector<LinearProblem> group;
  for (int64_t e = 0; e < all; ++e) {
    const int64_t count = start[e + 1] - start[e], r0 = start[e];
    if (count == 0)
      continue;
    const float *xe = xs + r0 * hidden;
    float *gu = gateUp + r0 * 2 * inter;
    if (w.gateUp) {
      group.push_back({xe, count, hidden, w.gateUp->offset(e * 2 * inter * hidden), 2 * inter,
                       nullptr, gu});
    } else {
      // Separate gate and up: [count, inter] each, one after the other.
      group.push_back({xe, count, hidden, w.gate.offset(e * inter * hidden), inter, nullptr, gu});
      group.push_back({xe, count, hidden, w.up.offset(e * inter * hidden), inter, nullptr,
                       gu + count * inter});
    }
  }
  run(group);
  for (int64_t e = 0; e < all; ++e) {
    const int64_t count = start[e + 1] - start[e], r0 = start[e];
    if (count == 0)
      continue;
    const float *gu = gateUp + r0 * 2 * inter;
    if (w.gateUp)
      siluMul(gu, gu + inter, count, inter, 2 * inter, act + r0 * inter);
    else
      siluMul(gu, gu + count * inter, count, inter, inter, act + r0 * inter);
  }

  group.clear();
  for (int64_t e = 0; e < all; ++e) {
    const int64_t count = start[e + 1] - start[e], r0 = start[e];
    if (count > 0)
      group.push_back({act + r0 * inter, count, inter,
                       w.down.offset(e * hidden * inter), hidden, nullptr,
                       y + r0 * hidden});
  }
  run(group);

  std::fill(out, out + tokens * hidden, 0.0f);
  for (int64_t r = 0; r < slots; ++r) {
    const int64_t s = slotOf[r];
    const float weight = s < routed ? weights[s] : 1.0f;
    float *o = out + tokenOf(s) * hidden;
    const float *yr = y + r * hidden;
#pragma omp simd
    for (int64_t c = 0; c < hidden; ++c)
      o[c] += weight * yr[c];
  }
}

} // namespace moe::cpu
