//===- Stopping.h - where a generated sequence ends -------------*- C++ -*-===//
//
// One set of rules for moe-run, the serving Engine and moe-bench: a
// sequence ends at one of the model's end-of-sequence tokens (unless told
// to ignore them) or one of the request's stop token ids (either is kept
// as the last generated token), at a stop string (the tokens that spell it
// are cut off, as OpenAI's API does, unless it is to be kept; a token that
// spells the start of the stop string and text before it stays, and the
// text is cut where the string starts), or at its token limit. Until
// `minTokens` tokens are generated the end tokens cannot be sampled (the
// Sampler masks them: MinTokens) and stop strings do not end it, as in
// vLLM.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_STOPPING_H
#define MOE_RUNTIME_STOPPING_H

#include "moe/runtime/Sampler.h"
#include "moe/abi/Status.h"
#include "moe/runtime/Tokenizer.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace moe::rt {

enum class FinishReason {
  Length, ///< the token limit
  Eos,    ///< an end-of-sequence token or a stop token id (kept as the last token)
  Stop,   ///< a stop string (removed from the tokens and the text unless kept)
  Cancelled, ///< Engine::cancel (a client went away, a deadline passed)
};

/// "length", "eos", "stop", "cancelled".
const char *finishReasonName(FinishReason reason);

struct StopOptions {
  bool ignoreEos = false;           ///< run on through end-of-sequence tokens
  std::vector<std::string> strings; ///< stop strings (plans with a tokenizer)
  /// Tokens that end a sequence as an end-of-sequence token does (even
  /// with ignoreEos, as vLLM's stop_token_ids).
  std::vector<int32_t> stopTokenIds;
  /// Until this many tokens are generated, neither end-of-sequence tokens
  /// (ignoreEos or not, as vLLM) nor stop token ids can be sampled, and
  /// stop strings do not end the sequence.
  int64_t minTokens = 0;
  /// A stop string's tokens stay in the result (include_stop_str_in_output).
  bool includeStopString = false;
};

class StopRules {
public:
  /// The plan's end-of-sequence tokens and `options`; an error when stop
  /// strings are given without a tokenizer, one is empty, a stop token id
  /// is outside the vocabulary or minTokens < 0.
  static Expected<StopRules> create(const plan::Plan &plan, const StopOptions &options,
                                    std::shared_ptr<const Tokenizer> tokenizer);
  /// Rules from their parts: the model's end-of-sequence tokens `eos` and
  /// the request's `options` (`tokenizer` is needed for stop strings).
  StopRules(std::vector<int32_t> eos, const StopOptions &options,
            std::shared_ptr<const Tokenizer> tokenizer);
  StopRules() = default;

  /// Call after each token appended to `generated`: why the sequence ends
  /// now, if it does. For a stop string (one that ends in the newest
  /// token's text), the tokens that spell it are removed from `generated`
  /// unless StopOptions::includeStopString.
  std::optional<FinishReason> check(std::vector<int32_t> &generated) const;
  /// What the Sampler masks while too few tokens are generated.
  MinTokens minTokens() const;

private:
  std::vector<int32_t> ends_;     ///< tokens that end the sequence now
  std::vector<int32_t> masked_;   ///< tokens masked below minTokens
  std::vector<std::string> strings_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  size_t longest_ = 0;
  int64_t minTokens_ = 0;
  bool keepStopString_ = false;
};

} // namespace moe::rt

#endif
