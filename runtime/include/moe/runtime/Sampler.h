//===- Sampler.h - pick the next token from logits --------------*- C++ -*-===//
#ifndef MOE_RUNTIME_SAMPLER_H
#define MOE_RUNTIME_SAMPLER_H

#include "moe/runtime/Status.h"

#include <cstdint>
#include <random>

namespace moe::rt {

struct SamplingOptions {
  float temperature = 0.0f; ///< 0: greedy (argmax, lowest id on ties)
  float topP = 1.0f;        ///< nucleus: smallest set with probability >= topP
  int32_t topK = 0;         ///< the k likeliest tokens only (before top-p); 0: all
  uint64_t seed = 0;
};

class Sampler {
public:
  explicit Sampler(const SamplingOptions &options)
      : options_(options), rng_(options.seed) {}
  /// The next token; an error when the logits hold NaN (non-finite weights
  /// or activations): greedy argmax and sampling disagree across
  /// implementations there, so no token is picked.
  Expected<int32_t> next(const float *logits, int64_t vocab);

private:
  SamplingOptions options_;
  std::mt19937_64 rng_;
};

} // namespace moe::rt

#endif
