//===- SplitBehavior.cpp - what a split does with its delimiters ----------===//
#include "SplitBehavior.h"

#include "Unicode.h"

#include <algorithm>

namespace moe::rt::tok {

Expected<SplitBehavior> behaviorField(const Json &object, const std::string &where) {
  MOE_TOK_TRY(std::string name, field<std::string>(object, "behavior", where));
  if (name == "Removed")
    return SplitBehavior::Removed;
  if (name == "Isolated")
    return SplitBehavior::Isolated;
  if (name == "MergedWithPrevious")
    return SplitBehavior::MergedWithPrevious;
  if (name == "MergedWithNext")
    return SplitBehavior::MergedWithNext;
  if (name == "Contiguous")
    return SplitBehavior::Contiguous;
  return jsonError(where, "behavior \"" + name +
                              "\" is not one of Removed, Isolated, MergedWithPrevious, "
                              "MergedWithNext, Contiguous");
}

std::vector<std::pair<size_t, size_t>> applyBehavior(const Spans &spans, SplitBehavior behavior) {
  std::vector<std::pair<size_t, size_t>> out;
  bool previousMatch = false;
  switch (behavior) {
  case SplitBehavior::Removed:
    for (const Span &s : spans)
      if (!s.match)
        out.emplace_back(s.begin, s.end);
    break;
  case SplitBehavior::Isolated:
    for (const Span &s : spans)
      out.emplace_back(s.begin, s.end);
    break;
  case SplitBehavior::MergedWithPrevious:
    // A delimiter joins the piece before it, unless that was a delimiter too.
    for (const Span &s : spans) {
      if (s.match && !previousMatch && !out.empty())
        out.back().second = s.end;
      else
        out.emplace_back(s.begin, s.end);
      previousMatch = s.match;
    }
    break;
  case SplitBehavior::MergedWithNext:
    for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
      if (it->match && !previousMatch && !out.empty())
        out.back().first = it->begin;
      else
        out.emplace_back(it->begin, it->end);
      previousMatch = it->match;
    }
    std::reverse(out.begin(), out.end());
    break;
  case SplitBehavior::Contiguous:
    for (const Span &s : spans) {
      if (s.match == previousMatch && !out.empty())
        out.back().second = s.end;
      else
        out.emplace_back(s.begin, s.end);
      previousMatch = s.match;
    }
    break;
  }
  return out;
}

Spans charMatches(std::string_view text, const std::function<bool(char32_t)> &pred) {
  if (text.empty())
    return {{0, 0, false}};
  Spans spans;
  size_t lastOffset = 0;
  for (size_t i = 0; i < text.size();) {
    size_t begin = i;
    if (!pred(nextCodePoint(text, i)))
      continue;
    if (lastOffset < begin)
      spans.push_back({lastOffset, begin, false});
    spans.push_back({begin, i, true});
    lastOffset = i;
  }
  if (lastOffset < text.size())
    spans.push_back({lastOffset, text.size(), false});
  return spans;
}

} // namespace moe::rt::tok
