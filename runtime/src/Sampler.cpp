//===- Sampler.cpp - pick the next token from logits ---------------------===//
#include "moe/runtime/Sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>

namespace moe::rt {

namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

/// The first NaN of `x`, or -1. Blocks of 64 are or-reduced with no
/// branch (the compiler vectorizes it); only a block with a NaN is
/// searched one by one.
int64_t firstNaN(const float *x, int64_t n) {
  for (int64_t b = 0; b < n; b += 64) {
    const int64_t e = std::min(n, b + 64);
    int any = 0;
    for (int64_t v = b; v < e; ++v)
      any |= x[v] != x[v];
    if (any)
      for (int64_t v = b; v < e; ++v)
        if (std::isnan(x[v]))
          return v;
  }
  return -1;
}

/// The index of the largest of `x` (no NaN), the lowest among equals: the
/// largest value first, kept per lane of 16 with no branch, then the first
/// index that holds it.
int32_t firstMax(const float *x, int64_t n) {
  constexpr int64_t kLanes = 16;
  float lane[kLanes];
  std::fill(lane, lane + kLanes, x[0]);
  int64_t v = 0;
  for (; v + kLanes <= n; v += kLanes)
    for (int64_t j = 0; j < kLanes; ++j)
      lane[j] = x[v + j] > lane[j] ? x[v + j] : lane[j];
  float max = *std::max_element(lane, lane + kLanes);
  for (; v < n; ++v)
    max = x[v] > max ? x[v] : max;
  return int32_t(std::find(x, x + n, max) - x);
}

/// `name` lies in [lo, hi] (NaN does not).
Status inRange(const char *name, float v, double lo, double hi) {
  if (v >= lo && v <= hi)
    return Status::ok();
  return Status::error(std::string(name) + " must lie in [" + number(lo) + ", " + number(hi) +
                       "], got " + number(v));
}

/// A candidate token and its weight: its probability relative to the
/// likeliest token's.
using Weighted = std::pair<int32_t, double>;

/// Likeliest first, the lower id first among equals.
struct Likelier {
  const float *logits;
  bool operator()(const Weighted &a, const Weighted &b) const {
    return logits[a.first] > logits[b.first] ||
           (logits[a.first] == logits[b.first] && a.first < b.first);
  }
};

/// Where the likeliest-first sum of `c`'s weights first reaches `target`:
/// the smallest k >= 1 such that the k likeliest weigh at least `target`
/// (c.size() when none do), and the k-th likeliest token.
struct Reach {
  size_t count;
  int32_t last;
};

/// Finds the Reach in O(n): the candidates go into buckets of equal logit
/// width, likeliest first (a bucket's index never falls as the logit
/// falls: one subtraction, one multiplication, floor), each bucket's weight
/// is summed, and only the bucket where the sum reaches the target is
/// sorted. A full sort of Qwen3's 151,936 tokens took 16 ms a token.
Reach firstReaching(const std::vector<Weighted> &c, double target, const Likelier &likelier) {
  const float *logits = likelier.logits;
  float hi = -INFINITY, lo = INFINITY;
  for (const Weighted &w : c) // lo: the least finite (min-tokens masks with -inf)
    if (const float l = logits[w.first]; l > -INFINITY) {
      hi = std::max(hi, l);
      lo = std::min(lo, l);
    }
  const size_t buckets = std::clamp<size_t>(c.size() / 16, 1, 4096);
  const float scale = hi > lo && std::isfinite(hi - lo) ? float(buckets) / (hi - lo) : 0.0f;
  auto bucketOf = [&](int32_t token) {
    const float at = (hi - logits[token]) * scale; // -inf logits: +inf, the last bucket
    return at < float(buckets) ? size_t(at) : buckets - 1;
  };
  std::vector<double> weight(buckets, 0.0);
  std::vector<size_t> count(buckets, 0);
  for (const Weighted &w : c) {
    const size_t b = bucketOf(w.first);
    weight[b] += w.second;
    ++count[b];
  }
  size_t last = buckets - 1;
  while (last > 0 && count[last] == 0)
    --last;
  double sum = 0;
  size_t before = 0;
  std::vector<Weighted> members;
  for (size_t b = 0; b <= last; ++b) {
    if (count[b] == 0 || (b < last && sum + weight[b] < target)) {
      sum += weight[b];
      before += count[b];
      continue;
    }
    members.clear();
    for (const Weighted &w : c)
      if (bucketOf(w.first) == b)
        members.push_back(w);
    std::sort(members.begin(), members.end(), likelier);
    for (const Weighted &w : members) {
      sum += w.second;
      ++before;
      if (sum >= target || before == c.size())
        return {before, w.first};
    }
  }
  return {c.size(), members.back().first}; // not reached: rounding
}

} // namespace

Status validate(const SamplingOptions &o) {
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature))
    return Status::error("temperature must be a finite number >= 0, got " +
                         number(o.temperature));
  if (!(o.topP > 0 && o.topP <= 1))
    return Status::error("top-p must lie in (0, 1], got " + number(o.topP));
  if (o.topK < 0)
    return Status::error("top-k must be >= 0 (0: off), got " + std::to_string(o.topK));
  if (!(o.repetitionPenalty > 0) || !std::isfinite(o.repetitionPenalty))
    return Status::error("repetition penalty must be a finite number > 0 (1: off), got " +
                         number(o.repetitionPenalty));
  for (Status st : {inRange("min-p", o.minP, 0, 1),
                    inRange("presence penalty", o.presencePenalty, -2, 2),
                    inRange("frequency penalty", o.frequencyPenalty, -2, 2)})
    if (!st)
      return st;
  return Status::ok();
}

Sampler::Sampler(const SamplingOptions &options, const std::vector<int32_t> &prompt,
                 MinTokens minTokens)
    : options_(options), rng_(options.seed), minTokens_(std::move(minTokens)),
      penalised_(options.repetitionPenalty != 1.0f || options.presencePenalty != 0.0f ||
                 options.frequencyPenalty != 0.0f) {
  if (options.repetitionPenalty != 1.0f) {
    promptTokens_ = prompt;
    std::sort(promptTokens_.begin(), promptTokens_.end());
    promptTokens_.erase(std::unique(promptTokens_.begin(), promptTokens_.end()),
                        promptTokens_.end());
  }
}

Status Sampler::penalise(float *logits, int64_t vocab) {
  saved_.clear();
  // A prompt or end token outside the row would be written out of bounds:
  // refused (the engine and moe-run check them first). The prompt's are
  // sorted: its first and last say.
  auto outside = [&](int32_t t) {
    return Status::error("token id " + std::to_string(t) +
                         " of the prompt or the end tokens is out of the vocabulary [0, " +
                         std::to_string(vocab) + ")");
  };
  for (int32_t t : minTokens_.endTokens)
    if (t < 0 || t >= vocab)
      return outside(t);
  if (!promptTokens_.empty() && (promptTokens_.front() < 0 || promptTokens_.back() >= vocab))
    return outside(promptTokens_.front() < 0 ? promptTokens_.front() : promptTokens_.back());
  auto set = [&](int32_t token, float value) {
    saved_.push_back({token, logits[token]});
    logits[token] = value;
  };
  if (generated_ < minTokens_.count)
    for (int32_t t : minTokens_.endTokens)
      set(t, -INFINITY);
  const float repetition = options_.repetitionPenalty;
  if (repetition != 1.0f) {
    auto repeat = [&](int32_t t) {
      set(t, logits[t] > 0 ? logits[t] / repetition : logits[t] * repetition);
    };
    for (int32_t t : promptTokens_)
      repeat(t);
    for (const auto &[t, count] : counts_)
      if (!std::binary_search(promptTokens_.begin(), promptTokens_.end(), t))
        repeat(t);
  }
  // OpenAI's definition, in vLLM's order: frequency, then presence.
  if (options_.frequencyPenalty != 0.0f || options_.presencePenalty != 0.0f)
    for (const auto &[t, count] : counts_)
      set(t, (logits[t] - options_.frequencyPenalty * float(count)) - options_.presencePenalty);
  return Status::ok();
}

void Sampler::restore(float *logits) {
  // Newest first: a token changed twice gets its raw value back.
  for (auto it = saved_.rbegin(); it != saved_.rend(); ++it)
    logits[it->first] = it->second;
  saved_.clear();
}

Expected<int32_t> Sampler::next(float *logits, int64_t vocab) {
  if (int64_t v = firstNaN(logits, vocab); v >= 0)
    return Status::error("the logits hold NaN (token " + std::to_string(v) +
                         "): the plan's weights or activations are not finite; no token "
                         "can be picked");
  if (Status st = penalise(logits, vocab); !st)
    return st;
  int32_t picked;
  if (options_.temperature <= 0) {
    picked = firstMax(logits, vocab);
  } else {
    std::vector<Weighted> kept;
    const double mass = candidates(logits, vocab, kept);
    // The token at a uniform point of the kept mass, likeliest first: the
    // first whose weight and the likelier ones' reach it.
    const double r = std::uniform_real_distribution<double>(0.0, mass)(rng_);
    picked = firstReaching(kept, r, Likelier{logits}).last;
  }
  restore(logits);
  if (penalised_)
    ++counts_[picked];
  ++generated_;
  return picked;
}

std::vector<double> Sampler::probabilities(float *logits, int64_t vocab) {
  std::vector<double> p(size_t(vocab), 0.0);
  if (!penalise(logits, vocab))
    return p;
  if (options_.temperature <= 0) {
    p[size_t(firstMax(logits, vocab))] = 1;
  } else {
    std::vector<Weighted> kept;
    const double mass = candidates(logits, vocab, kept);
    for (const auto &[token, weight] : kept)
      p[size_t(token)] = weight / mass;
  }
  restore(logits);
  return p;
}

double Sampler::candidates(const float *logits, int64_t vocab,
                           std::vector<Weighted> &kept) const {
  // No full sort: top-k is a partial one, top-p and the draw (next())
  // firstReaching's buckets.
  const Likelier likelier{logits};
  // Top-k first, then top-p within it (as transformers' warpers and vLLM do).
  if (options_.topK > 0 && options_.topK < vocab) {
    std::vector<int32_t> ids(static_cast<size_t>(vocab));
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + options_.topK, ids.end(),
                      [&](int32_t a, int32_t b) { return likelier({a, 0.0}, {b, 0.0}); });
    ids.resize(size_t(options_.topK));
    kept.clear();
    for (int32_t t : ids)
      kept.push_back({t, 0.0});
  } else {
    kept.resize(static_cast<size_t>(vocab));
    for (int32_t t = 0; t < int32_t(vocab); ++t)
      kept[size_t(t)].first = t;
  }
  const double top = logits[std::min_element(kept.begin(), kept.end(), likelier)->first];
  for (auto &[token, weight] : kept)
    weight = std::exp((logits[token] - top) / options_.temperature);
  // Min-p: below minP times the top probability is out (the weights fall
  // with the likelihood: what stays is the likeliest, so it commutes with
  // top-k).
  if (options_.minP > 0)
    kept.erase(std::remove_if(kept.begin(), kept.end(),
                              [&](const Weighted &w) { return w.second < options_.minP; }),
               kept.end());
  double sum = 0;
  for (const Weighted &w : kept)
    sum += w.second;
  if (options_.topP >= 1.0f)
    return sum;
  // Top-p: the smallest set of the likeliest whose probability,
  // renormalised over what is left, reaches top-p.
  const Reach reach = firstReaching(kept, options_.topP * sum, likelier);
  const Weighted boundary{reach.last, 0.0};
  kept.erase(std::remove_if(kept.begin(), kept.end(),
                            [&](const Weighted &w) { return likelier(boundary, w); }),
             kept.end());
  double mass = 0;
  for (const Weighted &w : kept)
    mass += w.second;
  return mass;
}

} // namespace moe::rt
