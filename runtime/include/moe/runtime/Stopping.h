//===- Stopping.h - where a generated sequence ends -------------*- C++ -*-===//
//
// One set of rules for moe-run, the serving Engine and moe-bench: a
// sequence ends at one of the model's end-of-sequence tokens (unless told
// to ignore them), at a stop string (the tokens that spell it are cut off,
// as OpenAI's API does; a token that spells the start of the stop string
// and text before it stays, and the text is cut where the string starts),
// or at its token limit.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_STOPPING_H
#define MOE_RUNTIME_STOPPING_H

#include "moe/runtime/Status.h"
#include "moe/runtime/Tokenizer.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace moe::rt {

enum class FinishReason {
  Length, ///< the token limit
  Eos,    ///< an end-of-sequence token (kept as the last generated token)
  Stop,   ///< a stop string (removed from the tokens and the text)
  Cancelled, ///< Engine::cancel (a client went away, a deadline passed)
};

/// "length", "eos", "stop", "cancelled".
const char *finishReasonName(FinishReason reason);

struct StopOptions {
  bool ignoreEos = false;           ///< run on through end-of-sequence tokens
  std::vector<std::string> strings; ///< stop strings (plans with a tokenizer)
};

class StopRules {
public:
  /// The plan's end-of-sequence tokens and `options`; an error when stop
  /// strings are given without a tokenizer, or one is empty.
  static Expected<StopRules> create(const plan::Plan &plan, const StopOptions &options,
                                    std::shared_ptr<const Tokenizer> tokenizer);
  /// Rules from their parts (`tokenizer` is needed for stop strings).
  StopRules(std::vector<int32_t> eos, std::vector<std::string> strings,
            std::shared_ptr<const Tokenizer> tokenizer);
  StopRules() = default;

  /// Call after each token appended to `generated`: why the sequence ends
  /// now, if it does. For a stop string, the tokens that spell it are
  /// removed from `generated`.
  std::optional<FinishReason> check(std::vector<int32_t> &generated) const;

private:
  std::vector<int32_t> eos_;
  std::vector<std::string> strings_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  size_t longest_ = 0;
};

} // namespace moe::rt

#endif
