//===- Router.cpp - expert scoring and top-k selection --------------------===//

#include "kernels/cpu/Kernels.h"
#include "kernels/cpu/ThreadPool.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace moe::cpu {
namespace {

// Orders ids by descending value, ties to the lower id; NaN (from inf
// logits) orders as -inf, so that the order stays strict and weak.
struct ByValue {
  const float *value;
  static float key(float v) { return std::isnan(v) ? -INFINITY : v; }
  bool operator()(int32_t a, int32_t b) const {
    const float x = key(value[a]), y = key(value[b]);
    return x > y || (x == y && a < b);
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

/// Capacity-limited token choice: pick ranks in turn (every token's first
/// pick, then every token's second, ...), each going to the token's best
/// expert it has not picked that has fewer than `capacity` picks; when every
/// such expert is full (possible only near the end of a tight capacity) the
/// best of them takes it over capacity.
void capacityPicks(const float *choice, int64_t tokens, int64_t e, int64_t k, int64_t capacity,
                   int32_t *picked) {
  std::vector<int32_t> order(static_cast<size_t>(tokens * e));
  std::vector<int32_t> ids(static_cast<size_t>(e));
  for (int64_t t = 0; t < tokens; ++t) {
    topIds(choice + t * e, ids, e);
    std::copy(ids.begin(), ids.end(), order.begin() + t * e);
  }
  std::vector<int64_t> load(static_cast<size_t>(e), 0);
  std::vector<char> taken(static_cast<size_t>(tokens * e), 0);
  for (int64_t j = 0; j < k; ++j)
    for (int64_t t = 0; t < tokens; ++t) {
      const int32_t *mine = order.data() + t * e;
      int32_t best = -1, overflow = -1;
      for (int64_t i = 0; i < e && best < 0; ++i) {
        const int32_t x = mine[i];
        if (taken[size_t(t * e + x)])
          continue;
        if (overflow < 0)
          overflow = x;
        if (load[size_t(x)] < capacity)
          best = x;
      }
      if (best < 0)
        best = overflow;
      taken[size_t(t * e + best)] = 1;
      ++load[size_t(best)];
      picked[t * k + j] = best;
    }
}

/// Expert choice: each expert takes the `capacity` tokens that score it
/// highest (ties to the lower token); a token keeps its k best offers,
/// best first, and fills the rest with its best other experts, marked in
/// `real` as padding (weight 0). Returns nothing: picked/real are [T, k].
void expertChoicePicks(const float *choice, int64_t tokens, int64_t e, int64_t k,
                       int64_t capacity, int32_t *picked, std::vector<char> &real) {
  std::vector<std::vector<int32_t>> offers(static_cast<size_t>(tokens));
  std::vector<float> column(static_cast<size_t>(tokens));
  std::vector<int32_t> byToken(static_cast<size_t>(tokens));
  const int64_t take = std::min(capacity, tokens);
  for (int64_t x = 0; x < e; ++x) {
    for (int64_t t = 0; t < tokens; ++t)
      column[size_t(t)] = choice[t * e + x];
    topIds(column.data(), byToken, take);
    for (int64_t i = 0; i < take; ++i)
      offers[size_t(byToken[size_t(i)])].push_back(int32_t(x));
  }
  std::vector<int32_t> ids(static_cast<size_t>(e));
  for (int64_t t = 0; t < tokens; ++t) {
    const float *c = choice + t * e;
    std::vector<int32_t> &mine = offers[size_t(t)];
    std::sort(mine.begin(), mine.end(), ByValue{c});
    const int64_t kept = std::min<int64_t>(k, int64_t(mine.size()));
    std::vector<char> used(static_cast<size_t>(e), 0);
    for (int64_t j = 0; j < kept; ++j) {
      picked[t * k + j] = mine[size_t(j)];
      real[size_t(t * k + j)] = 1;
      used[size_t(mine[size_t(j)])] = 1;
    }
    topIds(c, ids, e);
    for (int64_t j = kept, i = 0; j < k; ++i)
      if (!used[size_t(ids[size_t(i)])]) {
        picked[t * k + j] = ids[size_t(i)];
        real[size_t(t * k + j++)] = 0;
      }
  }
}

} // namespace

int64_t routingCapacity(const RouterParams &p, int64_t tokens) {
  return std::max<int64_t>(
      1, int64_t(std::ceil(double(p.capacityFactor) * double(tokens) * double(p.topK) /
                           double(p.numExperts))));
}

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

  // Per token: its scores, and what it chooses on (biased, group-masked).
  // Tokens are independent here, in token choice's picks and in their
  // weights: shared between the threads (a prefill's 512 tokens took 2% of
  // it on one thread while the other waited).
  std::vector<float> scores(tokens * e), choice(tokens * e);
  forRows(tokens, e, [&](int64_t t) {
    thread_local std::vector<float> groupScore;
    thread_local std::vector<int32_t> groupIds;
    groupScore.resize(size_t(p.nGroup));
    groupIds.resize(size_t(p.nGroup));
    float *s = scores.data() + t * e, *c = choice.data() + t * e;
    score(logits.data() + t * e, e, p.scoring, s);
    for (int64_t i = 0; i < e; ++i)
      c[i] = s[i] + correction[i];
    if (p.method != TopkMethod::Greedy)
      keepBestGroups(p, c, groupScore, groupIds);
  });
  // The picks of the step (padding, weight 0, only from expert choice).
  std::vector<char> real(static_cast<size_t>(tokens * k), 1);
  switch (p.policy) {
  case RoutingPolicy::TokenChoice:
    forRows(tokens, e, [&](int64_t t) {
      thread_local std::vector<int32_t> ids;
      ids.resize(size_t(e));
      topIds(choice.data() + t * e, ids, k);
      std::copy_n(ids.begin(), k, indices + t * k);
    });
    break;
  case RoutingPolicy::Capacity:
    capacityPicks(choice.data(), tokens, e, k, routingCapacity(p, tokens), indices);
    break;
  case RoutingPolicy::ExpertChoice:
    expertChoicePicks(choice.data(), tokens, e, k, routingCapacity(p, tokens), indices, real);
    break;
  }

  forRows(tokens, e, [&](int64_t t) {
    // Greedy and V2 weigh by the (masked) choice; V3 by the unbiased score.
    const float *from = (noAux ? scores.data() : choice.data()) + t * e;
    float *wt = weights + t * k;
    float sum = 0.0f;
    for (int64_t j = 0; j < k; ++j)
      sum += wt[j] = real[size_t(t * k + j)] ? from[indices[t * k + j]] : 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      if (p.normTopkProb)
        wt[j] /= sum + 1e-20f;
      wt[j] *= p.routedScalingFactor;
    }
  });
}

} // namespace moe::cpu
