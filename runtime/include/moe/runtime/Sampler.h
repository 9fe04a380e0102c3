//===- Sampler.h - pick the next token from logits --------------*- C++ -*-===//
//
// One sequence's sampler, with vLLM's (V1) semantics and order:
//   1. min-tokens: until `MinTokens::count` tokens are generated, its end
//      tokens (end-of-sequence and stop token ids) get -inf;
//   2. penalties on the logits: repetition (tokens of the prompt or
//      generated: a positive logit is divided by it, a negative one
//      multiplied), then frequency and presence (generated tokens only:
//      logit -= frequency * count + presence * [count > 0]);
//   3. temperature 0: the argmax of those logits (lowest id on ties);
//   4. else divide by the temperature; min-p drops the tokens whose
//      probability is below min_p times the top one; top-k keeps the k
//      likeliest; top-p keeps the smallest prefix, likeliest first, whose
//      probability (renormalised over what is left) reaches top_p; one
//      token is drawn from the rest with the sampler's own generator.
// The sampler counts the tokens it returns as the sequence's generated
// tokens. Penalties touch only the tokens seen, so their cost follows the
// distinct tokens of the prompt and the output, not the vocabulary; with
// no penalty set nothing is tracked beyond a count.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_SAMPLER_H
#define MOE_RUNTIME_SAMPLER_H

#include "moe/abi/Status.h"

#include <cstdint>
#include <random>
#include <unordered_map>
#include <utility>
#include <vector>

namespace moe::rt {

struct SamplingOptions {
  float temperature = 0.0f; ///< 0: greedy (argmax, lowest id on ties)
  float topP = 1.0f;        ///< nucleus: smallest set with probability >= topP, in (0, 1]
  int32_t topK = 0;         ///< the k likeliest tokens only (before top-p); 0: all
  uint64_t seed = 0;
  float minP = 0.0f;              ///< in [0, 1]; 0: off
  float repetitionPenalty = 1.0f; ///< > 0; 1: off
  float presencePenalty = 0.0f;   ///< in [-2, 2]; 0: off
  float frequencyPenalty = 0.0f;  ///< in [-2, 2]; 0: off
};

/// Why `options` cannot be used, naming the field and its range; ok
/// when every value is in range.
Status validate(const SamplingOptions &options);

/// Tokens that cannot be sampled until `count` tokens are generated
/// (vLLM's min_tokens; Stopping.h resolves which tokens end a sequence).
struct MinTokens {
  int64_t count = 0;
  std::vector<int32_t> endTokens;
};

class Sampler {
public:
  /// A sampler for a sequence that starts from `prompt` (read only for a
  /// repetition penalty).
  Sampler(const SamplingOptions &options, const std::vector<int32_t> &prompt = {},
          MinTokens minTokens = {});
  /// The next token, counted as generated from now on. `logits` holds the
  /// raw row of `vocab` logits; the masks and penalties are written into
  /// the row while the token is picked and the raw values put back before
  /// it returns (no copy of the row is made). An error when the row holds
  /// NaN (non-finite weights or activations): greedy argmax and sampling
  /// disagree across implementations there, so no token is picked.
  Expected<int32_t> next(float *logits, int64_t vocab);
  /// The distribution next() would draw from now, per token of `vocab`
  /// (temperature 0: all on the argmax), without drawing: what the steps
  /// above make of the raw `logits` (put back as next() does); all zero
  /// where next() would fail.
  std::vector<double> probabilities(float *logits, int64_t vocab);
  /// Tokens generated so far (returned by next()).
  int64_t generated() const { return generated_; }

private:
  /// Steps 1 and 2 on `logits`, saving each value it changes in saved_;
  /// an error (and nothing changed) when a token to change is outside it.
  Status penalise(float *logits, int64_t vocab);
  /// Puts back what penalise() changed.
  void restore(float *logits);
  /// Step 4 but the draw: the tokens left (in no order), each with its
  /// probability relative to the likeliest one; returns their sum.
  double candidates(const float *logits, int64_t vocab,
                    std::vector<std::pair<int32_t, double>> &kept) const;

  SamplingOptions options_;
  std::mt19937_64 rng_;
  MinTokens minTokens_;
  bool penalised_ = false; ///< some penalty is set
  std::vector<int32_t> promptTokens_; ///< distinct, ascending (repetition penalty only)
  std::unordered_map<int32_t, int32_t> counts_; ///< generated token -> times (penalties only)
  int64_t generated_ = 0;
  std::vector<std::pair<int32_t, float>> saved_; ///< raw values penalise() replaced
};

} // namespace moe::rt

#endif
