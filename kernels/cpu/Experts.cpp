//===- Experts.cpp - routed SwiGLU experts --------------------------------===//
//
// The (token, j) slots are counting-sorted by expert; each expert with slots
// gathers its token rows and runs gate/up, siluMul and down as small GEMMs
// through linear(), which supplies the threads. Experts run one after another
// in ascending id and add their weighted rows straight into out, so every
// token sums its contributions in one fixed order (that of the transformers
// loop over experts) whatever the thread count, with no [tokens, topK,
// hidden] scratch.
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
  const int64_t slots = tokens * topK;
  // Slots of expert e: slotOf[start[e] .. start[e + 1]), in slot order.
  std::vector<int64_t> start(numExperts + 1, 0), slotOf(slots);
  for (int64_t s = 0; s < slots; ++s)
    ++start[indices[s] + 1];
  std::partial_sum(start.begin(), start.end(), start.begin());
  std::vector<int64_t> next(start.begin(), start.end() - 1);
  for (int64_t s = 0; s < slots; ++s)
    slotOf[next[indices[s]]++] = s;

  int64_t most = 0;
  for (int64_t e = 0; e < numExperts; ++e)
    most = std::max(most, start[e + 1] - start[e]);
  std::vector<float> xs(most * hidden), gateUp(most * 2 * inter),
      act(most * inter), y(most * hidden);

  std::fill(out, out + tokens * hidden, 0.0f);
  for (int64_t e = 0; e < numExperts; ++e) {
    const int64_t count = start[e + 1] - start[e];
    if (count == 0)
      continue;
    const int64_t *mine = slotOf.data() + start[e];
    for (int64_t i = 0; i < count; ++i)
      std::copy_n(x + mine[i] / topK * hidden, hidden, xs.data() + i * hidden);

    if (w.gateUp) {
      // Row i of the result is [gate | up] for token i.
      linear(xs.data(), count, hidden, w.gateUp->offset(e * 2 * inter * hidden),
             2 * inter, nullptr, gateUp.data());
      siluMul(gateUp.data(), gateUp.data() + inter, count, inter, 2 * inter,
              act.data());
    } else {
      float *gate = gateUp.data(), *up = gateUp.data() + count * inter;
      linear(xs.data(), count, hidden, w.gate.offset(e * inter * hidden), inter,
             nullptr, gate);
      linear(xs.data(), count, hidden, w.up.offset(e * inter * hidden), inter,
             nullptr, up);
      siluMul(gate, up, count, inter, inter, act.data());
    }
    linear(act.data(), count, inter, w.down.offset(e * hidden * inter), hidden,
           nullptr, y.data());

    for (int64_t i = 0; i < count; ++i) {
      const float weight = weights[mine[i]];
      float *o = out + mine[i] / topK * hidden;
      const float *yi = y.data() + i * hidden;
#pragma omp simd
      for (int64_t c = 0; c < hidden; ++c)
        o[c] += weight * yi[c];
    }
  }
}

} // namespace moe::cpu
