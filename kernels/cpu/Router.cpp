//===- Router.cpp - expert scoring and top-k selection --------------------===//

#include "kernels/cpu/Kernels.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace moe::cpu {
namespace {

// Orders ids by descending value, ties to the lower id.
struct ByValue {
  const float *value;
  bool operator()(int32_t a, int32_t b) const {
    return value[a] > value[b] || (value[a] == value[b] && a < b);
  }
};

// The first `count` ids of `ids` (all of 0..size-1) become the top `count`.
void topIds(const float *value, std::vector<int32_t> &ids, int64_t count) {
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + count, ids.end(),
                    ByValue{value});
}

void score(const float *logits, int64_t e, Scoring scoring, float *scores) {
  if (scoring == Scoring::Sigmoid) {
    for (int64_t i = 0; i < e; ++i)
      scores[i] = 1.0f / (1.0f + std::exp(-logits[i]));
    return;
  }
  const float max = *std::max_element(logits, logits + e);
  float sum = 0.0f;
  for (int64_t i = 0; i < e; ++i)
    sum += scores[i] = std::exp(logits[i] - max);
  for (int64_t i = 0; i < e; ++i)
    scores[i] /= sum;
}

// Masks choice outside the p.topkGroup best groups as transformers does:
// DeepSeek-V3 (noaux_tc) with -inf, so that a negative biased score still
// beats every masked expert; DeepSeek-V2 with 0.0 (its softmax scores are
// positive, so the two agree except on underflow, where 0.0 is what it does).
void keepBestGroups(const RouterParams &p, float *choice,
                    std::vector<float> &groupScore,
                    std::vector<int32_t> &groupIds) {
  const int64_t size = p.numExperts / p.nGroup;
  for (int64_t g = 0; g < p.nGroup; ++g) {
    const float *c = choice + g * size;
    if (p.method == TopkMethod::GroupLimitedGreedy) {
      groupScore[g] = *std::max_element(c, c + size);
      continue;
    }
    // NoAuxTc: the sum of the two largest (groups have at least two).
    float first = -INFINITY, second = -INFINITY;
    for (int64_t i = 0; i < size; ++i) {
      second = std::max(second, std::min(first, c[i]));
      first = std::max(first, c[i]);
    }
    groupScore[g] = first + second;
  }
  topIds(groupScore.data(), groupIds, p.topkGroup);
  std::vector<bool> kept(p.nGroup, false);
  for (int64_t i = 0; i < p.topkGroup; ++i)
    kept[groupIds[i]] = true;
  const float masked = p.method == TopkMethod::NoAuxTc ? -INFINITY : 0.0f;
  for (int64_t g = 0; g < p.nGroup; ++g)
    if (!kept[g])
      std::fill(choice + g * size, choice + (g + 1) * size, masked);
}

} // namespace

void router(const float *x, int64_t tokens, int64_t hidden, Weight w,
            const Weight *bias, const RouterParams &p, float *weights,
            int32_t *indices) {
  const int64_t e = p.numExperts, k = p.topK;
  std::vector<float> logits(tokens * e);
  linear(x, tokens, hidden, w, e, nullptr, logits.data());

  const bool noAux = p.method == TopkMethod::NoAuxTc;
  std::vector<float> correction(e, 0.0f);
  if (noAux)
    for (int64_t i = 0; i < e; ++i)
      correction[i] = bias->at(i);

  std::vector<float> scores(e), choice(e), groupScore(p.nGroup);
  std::vector<int32_t> ids(e), groupIds(p.nGroup);
  for (int64_t t = 0; t < tokens; ++t) {
    score(logits.data() + t * e, e, p.scoring, scores.data());
    for (int64_t i = 0; i < e; ++i)
      choice[i] = scores[i] + correction[i];
    if (p.method != TopkMethod::Greedy)
      keepBestGroups(p, choice.data(), groupScore, groupIds);
    topIds(choice.data(), ids, k);

    // Greedy and V2 weigh by the (masked) choice; V3 by the unbiased score.
    const float *from = noAux ? scores.data() : choice.data();
    float *wt = weights + t * k;
    float sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      indices[t * k + j] = ids[j];
      sum += wt[j] = from[ids[j]];
    }
    for (int64_t j = 0; j < k; ++j) {
      if (p.normTopkProb)
        wt[j] /= sum + 1e-20f;
      wt[j] *= p.routedScalingFactor;
    }
  }
}

} // namespace moe::cpu
