//===- Logprobs.h - log-probabilities of tokens under the model -*- C++ -*-===//
//
// What OpenAI's `logprobs`/`top_logprobs` and `echo` report: the
// log-softmax of the model's RAW logits at a position (before penalties,
// temperature, top-k/top-p and min-p: vLLM's default "raw_logprobs"), of
// the token that came there and of the k likeliest tokens. The log-sum-exp
// is accumulated in double, so each value is the exact log-softmax rounded
// once to float.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_LOGPROBS_H
#define MOE_RUNTIME_LOGPROBS_H

#include "moe/abi/Status.h"

#include <cstdint>
#include <vector>

namespace moe::rt {

/// The most alternatives a position reports (OpenAI's top_logprobs bound).
inline constexpr int32_t kMaxTopLogprobs = 20;

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
};

/// One position: the token that came there (sampled, or the prompt's) and
/// the k likeliest tokens, likeliest first, the lower id first among equals.
struct LogprobEntry {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;
};

/// The entry of `token` in one row of `vocab` logits with its `top`
/// likeliest tokens (0 <= top <= kMaxTopLogprobs). One pass for the
/// log-sum-exp, one for the top tokens; nothing the size of the
/// vocabulary is allocated. An error when the row holds NaN.
Expected<LogprobEntry> logprobEntry(const float *logits, int64_t vocab, int32_t token,
                                    int32_t top);

} // namespace moe::rt

#endif
