//===- Sampler.cpp - pick the next token from logits ---------------------===//
#include "moe/runtime/Sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace moe::rt {

Expected<int32_t> Sampler::next(const float *logits, int64_t vocab) {
  for (int64_t v = 0; v < vocab; ++v)
    if (std::isnan(logits[v]))
      return Status::error("the logits hold NaN (token " + std::to_string(v) +
                           "): the plan's weights or activations are not finite; no token "
                           "can be picked");
  if (options_.temperature <= 0)
    return int32_t(std::max_element(logits, logits + vocab) - logits);
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  // Likeliest first, the lower id first among equals. Top-k first, then
  // top-p within it (as transformers' warpers do).
  auto likelier = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  if (options_.topK > 0 && options_.topK < vocab) {
    std::partial_sort(order.begin(), order.begin() + options_.topK, order.end(), likelier);
    order.resize(size_t(options_.topK));
  } else {
    std::sort(order.begin(), order.end(), likelier);
  }
  std::vector<double> probs(order.size());
  double top = logits[order[0]], sum = 0;
  for (size_t i = 0; i < order.size(); ++i)
    sum += probs[i] = std::exp((logits[order[i]] - top) / options_.temperature);
  // Keep the smallest prefix whose probability reaches top-p.
  size_t keep = 0;
  double mass = 0;
  while (keep < order.size() && (keep == 0 || mass < options_.topP * sum))
    mass += probs[keep++];
  double r = std::uniform_real_distribution<double>(0.0, mass)(rng_);
  for (size_t i = 0; i < keep; ++i) {
    r -= probs[i];
    if (r <= 0)
      return order[i];
  }
  return order[keep - 1];
}

} // namespace moe::rt
