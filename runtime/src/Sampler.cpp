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
    std::vector<int32_t> order;
    std::vector<double> weights;
    const double mass = candidates(logits, vocab, order, weights);
    double r = std::uniform_real_distribution<double>(0.0, mass)(rng_);
    picked = order.back();
    for (size_t i = 0; i < order.size(); ++i)
      if ((r -= weights[i]) <= 0) {
        picked = order[i];
        break;
      }
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
    std::vector<int32_t> order;
    std::vector<double> weights;
    const double mass = candidates(logits, vocab, order, weights);
    for (size_t i = 0; i < order.size(); ++i)
      p[size_t(order[i])] = weights[i] / mass;
  }
  restore(logits);
  return p;
}

double Sampler::candidates(const float *logits, int64_t vocab, std::vector<int32_t> &order,
                           std::vector<double> &weights) const {
  order.resize(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  // Likeliest first, the lower id first among equals. Top-k first, then
  // top-p within it (as transformers' warpers and vLLM do).
  auto likelier = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  if (options_.topK > 0 && options_.topK < vocab) {
    std::partial_sort(order.begin(), order.begin() + options_.topK, order.end(), likelier);
    order.resize(size_t(options_.topK));
  } else {
    std::sort(order.begin(), order.end(), likelier);
  }
  weights.resize(order.size());
  const double top = logits[order[0]];
  double sum = 0;
  for (size_t i = 0; i < order.size(); ++i)
    sum += weights[i] = std::exp((logits[order[i]] - top) / options_.temperature);
  // Min-p: below minP times the top probability is out (what stays is a
  // prefix: the order is by probability; so it commutes with top-k).
  if (options_.minP > 0) {
    weights.resize(size_t(std::find_if(weights.begin(), weights.end(),
                                       [&](double w) { return w < options_.minP; }) -
                          weights.begin()));
    sum = std::accumulate(weights.begin(), weights.end(), 0.0);
  }
  // Top-p: the smallest prefix whose probability, renormalised over what
  // is left, reaches top-p.
  size_t keep = 0;
  double mass = 0;
  while (keep < weights.size() && (keep == 0 || mass < options_.topP * sum))
    mass += weights[keep++];
  order.resize(keep);
  weights.resize(keep);
  return mass;
}

} // namespace moe::rt
