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
  }
  return "?";
}

Expected<StopRules> StopRules::create(const plan::Plan &plan, const StopOptions &options) {
  std::optional<ByteTokenizer> tokenizer;
  for (const std::string &s : options.strings)
    if (s.empty())
      return Status::error("a stop string must not be empty");
  if (!options.strings.empty()) {
    auto t = ByteTokenizer::forPlan(plan);
    if (!t)
      return Status::error("stop strings need a byte-level tokenizer, and this plan has none "
                           "(its checkpoint had no ByT5Tokenizer)");
    tokenizer = *t;
  }
  return StopRules(options.ignoreEos ? std::vector<int32_t>{} : eosTokens(plan), options.strings,
                   tokenizer);
}

StopRules::StopRules(std::vector<int32_t> eos, std::vector<std::string> strings,
                     std::optional<ByteTokenizer> tokenizer)
    : eos_(std::move(eos)), strings_(std::move(strings)), tokenizer_(tokenizer) {
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
  const std::string text = tokenizer_->decode(tail);
  for (const std::string &s : strings_) {
    if (text.size() < s.size() || text.compare(text.size() - s.size(), s.size(), s) != 0)
      continue;
    // Drop the tokens that spell it (and specials among them).
    for (size_t cut = 0; cut < s.size();) {
      cut += tokenizer_->decode({generated.back()}).size();
      generated.pop_back();
    }
    return FinishReason::Stop;
  }
  return std::nullopt;
}

} // namespace moe::rt
