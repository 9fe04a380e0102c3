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
  return StopRules(options.ignoreEos ? std::vector<int32_t>{} : eosTokens(plan), options.strings,
                   std::move(tokenizer));
}

StopRules::StopRules(std::vector<int32_t> eos, std::vector<std::string> strings,
                     std::shared_ptr<const Tokenizer> tokenizer)
    : eos_(std::move(eos)), strings_(std::move(strings)), tokenizer_(std::move(tokenizer)) {
  for (const std::string &s : strings_)
    longest_ = std::max(longest_, s.size());
}

std::optional<FinishReason> StopRules::check(std::vector<int32_t> &generated) const {
  if (generated.empty())
    return std::nullopt;
  if (std::find(eos_.begin(), eos_.end(), generated.back()) != eos_.end())
    return FinishReason::Eos;
  if (strings_.empty() || !tokenizer_)
    return std::nullopt;
  // The text of the last tokens that hold `longest_` bytes: a stop string
  // completed by the newest token ends there.
  size_t from = generated.size(), bytes = 0;
  while (from > 0 && bytes < longest_)
    bytes += tokenizer_->decode({generated[--from]}).size();
  std::vector<int32_t> tail(generated.begin() + long(from), generated.end());
  std::string text = tokenizer_->decode(tail);
  for (const std::string &s : strings_) {
    size_t at = text.find(s);
    if (at == std::string::npos)
      continue;
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
