//===- Stopping.cpp - where a generated sequence ends ---------------------===//
#include "moe/runtime/Stopping.h"
#include "moe/runtime/Plan.h"

#include <algorithm>

namespace moe::rt {

const char *finishReasonName(FinishReason reason) {
  switch (reason) {
  case FinishReason::Length: return "length";
  case FinishReason::Eos: return "eos";
  case FinishReason::Stop: return "stop";
  case FinishReason::Cancelled: return "cancelled";
  }
  return "?";
}

Expected<StopRules> StopRules::create(const plan::Plan &plan, const StopOptions &options,
                                      std::shared_ptr<const Tokenizer> tokenizer) {
  for (const std::string &s : options.strings)
    if (s.empty())
      return Status::error("a stop string must not be empty");
  if (!options.strings.empty() && !tokenizer)
    return Status::error("stop strings need a tokenizer, and this plan has none (its "
                         "checkpoint had neither a tokenizer.json nor a ByT5Tokenizer)");
  const int64_t vocab = plan.config()->vocab_size();
  for (int32_t t : options.stopTokenIds)
    if (t < 0 || t >= vocab)
      return Status::error("stop token id " + std::to_string(t) + " out of vocabulary [0, " +
                           std::to_string(vocab) + ")");
  if (options.minTokens < 0)
    return Status::error("min tokens must be >= 0, got " + std::to_string(options.minTokens));
  return StopRules(eosTokens(plan), options, std::move(tokenizer));
}

StopRules::StopRules(std::vector<int32_t> eos, const StopOptions &options,
                     std::shared_ptr<const Tokenizer> tokenizer)
    : strings_(options.strings), tokenizer_(std::move(tokenizer)),
      minTokens_(options.minTokens), keepStopString_(options.includeStopString) {
  for (const std::string &s : strings_)
    longest_ = std::max(longest_, s.size());
  masked_ = eos;
  masked_.insert(masked_.end(), options.stopTokenIds.begin(), options.stopTokenIds.end());
  ends_ = options.ignoreEos ? options.stopTokenIds : masked_;
}

MinTokens StopRules::minTokens() const {
  return {minTokens_, minTokens_ > 0 ? masked_ : std::vector<int32_t>{}};
}

std::optional<FinishReason> StopRules::check(std::vector<int32_t> &generated) const {
  if (generated.empty())
    return std::nullopt;
  if (std::find(ends_.begin(), ends_.end(), generated.back()) != ends_.end())
    return FinishReason::Eos;
  if (strings_.empty() || !tokenizer_ || int64_t(generated.size()) <= minTokens_)
    return std::nullopt;
  // The text of the last tokens that hold `longest_` bytes besides the
  // newest token's: a stop string it completes lies there.
  const size_t newest = tokenizer_->decode({generated.back()}).size();
  size_t from = generated.size() - 1, bytes = 0;
  while (from > 0 && bytes < longest_)
    bytes += tokenizer_->decode({generated[--from]}).size();
  std::vector<int32_t> tail(generated.begin() + long(from), generated.end());
  std::string text = tokenizer_->decode(tail);
  for (const std::string &s : strings_) {
    // Only a string that ends in the newest token's text counts: one that
    // ended before it did so while min tokens held stop strings back, and
    // stays (vLLM's rule).
    const size_t start =
        text.size() + 1 > newest + s.size() ? text.size() + 1 - newest - s.size() : 0;
    size_t at = text.find(s, start);
    if (at == std::string::npos)
      continue;
    if (keepStopString_)
      return FinishReason::Stop;
    // Drop the tokens that spell it (and specials among them); a token
    // that also spells text before it stays.
    while (!generated.empty()) {
      size_t bytes = tokenizer_->decode({generated.back()}).size();
      if (bytes > text.size() - at)
        break;
      text.resize(text.size() - bytes);
      generated.pop_back();
    }
    return FinishReason::Stop;
  }
  return std::nullopt;
}

} // namespace moe::rt
