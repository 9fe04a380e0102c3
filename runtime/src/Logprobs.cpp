//===- Logprobs.cpp - log-probabilities of tokens under the model ---------===//
#include "moe/runtime/Logprobs.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace moe::rt {

Expected<LogprobEntry> logprobEntry(const float *logits, int64_t vocab, int32_t token,
                                    int32_t top) {
  float max = -INFINITY;
  for (int64_t v = 0; v < vocab; ++v)
    max = std::max(max, logits[v]); // NaN never wins: found by the sum below
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v)
    sum += std::exp(double(logits[v]) - double(max));
  if (std::isnan(sum) || !std::isfinite(max))
    return Status::error("the logits hold NaN or no finite value: the plan's weights or "
                         "activations are not finite; no log-probability can be given");
  const double logSum = double(max) + std::log(sum);
  auto logprob = [&](int64_t v) { return float(double(logits[v]) - logSum); };

  LogprobEntry entry{{token, logprob(token)}, {}};
  // The `top` best in a sorted array: once it is full a token enters only
  // when its logit beats the last kept one's (equal is not enough: every
  // kept id is lower), so most of the vocabulary costs one comparison.
  auto likelier = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::vector<int32_t> best;
  best.reserve(size_t(top) + 1);
  float last = -INFINITY;
  for (int32_t v = 0; top > 0 && v < int32_t(vocab); ++v) {
    if (int32_t(best.size()) == top && !(logits[v] > last))
      continue;
    best.insert(std::upper_bound(best.begin(), best.end(), v, likelier), v);
    if (int32_t(best.size()) > top)
      best.pop_back();
    last = logits[best.back()];
  }
  for (int32_t v : best)
    entry.top.push_back({v, logprob(v)});
  return entry;
}

} // namespace moe::rt
