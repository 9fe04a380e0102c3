//===- SplitBehavior.h - what a split does with its delimiters --*- C++ -*-===//
#ifndef MOE_RUNTIME_TEXT_TOKENIZER_SPLITBEHAVIOR_H
#define MOE_RUNTIME_TEXT_TOKENIZER_SPLITBEHAVIOR_H

#include "Json.h"
#include "Pattern.h"

#include <functional>

namespace moe::rt::tok {

/// SplitDelimiterBehavior: Removed, Isolated, MergedWithPrevious,
/// MergedWithNext, Contiguous.
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

Expected<SplitBehavior> behaviorField(const Json &object, const std::string &where);

/// The [begin, end) ranges that `behavior` makes of `spans` (empty ones
/// included; the caller drops them).
std::vector<std::pair<size_t, size_t>> applyBehavior(const Spans &spans, SplitBehavior behavior);

/// Each character satisfying `pred` is a match of its own (Hugging Face's
/// Pattern for Fn(char) -> bool).
Spans charMatches(std::string_view text, const std::function<bool(char32_t)> &pred);

} // namespace moe::rt::tok

#endif
