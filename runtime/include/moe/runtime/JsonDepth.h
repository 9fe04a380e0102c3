//===- JsonDepth.h - how deep JSON from outside may nest --------*- C++ -*-===//
//
// Reading nested JSON recursively costs stack per level, so JSON that comes
// from outside the process (an HTTP request body, the context of a chat
// template, a tokenizer.json from a downloaded checkpoint) is measured first
// and refused beyond kMaxJsonDepth, before any recursive walk or copy sees
// it. The measure itself uses no recursion.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_JSONDEPTH_H
#define MOE_RUNTIME_JSONDEPTH_H

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace moe::rt {

/// The most arrays and objects a JSON document the runtime reads may nest,
/// the outermost one included: `[[1]]` nests 2. Real documents stay far
/// below it: a chat request whose tools carry JSON schemas nests 10 to 20,
/// a tokenizer.json about 6. Python's json module stops near 1000 only
/// because of its recursion limit; serde_json refuses beyond 128, and so
/// does this, which keeps every recursive walk over such a document (the
/// chat template's conversion, printing and comparing of it, nlohmann's own
/// copies and dumps) a few hundred KiB deep at most, even in an ASan build:
/// docs/robustness.md "Nesting limits" has the figures.
inline constexpr int kMaxJsonDepth = 128;

/// How deep `json` nests: 0 for a scalar, 1 for `[]`, `{}` or `[1, "a"]`, 2
/// for `[[1]]`. Counted with an explicit stack, never recursion; it stops
/// at `cap + 1` as soon as the value is known to nest deeper than `cap`.
/// `BasicJson` is any nlohmann::basic_json (json, ordered_json).
template <class BasicJson> int jsonDepth(const BasicJson &json, int cap = kMaxJsonDepth) {
  if (!json.is_structured())
    return 0;
  if (cap < 1)
    return cap + 1;
  using Iterator = typename BasicJson::const_iterator;
  std::vector<std::pair<Iterator, Iterator>> open; // The containers entered, innermost last.
  open.emplace_back(json.cbegin(), json.cend());
  int deepest = 1;
  while (!open.empty()) {
    auto &[next, end] = open.back();
    if (next == end) {
      open.pop_back();
      continue;
    }
    const BasicJson &child = *next++; // An object's iterator yields its values.
    if (!child.is_structured())
      continue;
    int depth = static_cast<int>(open.size()) + 1;
    if (depth > cap)
      return cap + 1;
    deepest = depth > deepest ? depth : deepest;
    open.emplace_back(child.cbegin(), child.cend());
  }
  return deepest;
}

/// For an error that says where: the key of the first member of `object`
/// under which `object` nests deeper than `limit` (`object` counting one),
/// or nothing when it is not an object or nests no deeper.
template <class BasicJson>
std::optional<std::string> memberNestedTooDeep(const BasicJson &object, int limit = kMaxJsonDepth) {
  if (object.is_object())
    for (auto it = object.cbegin(); it != object.cend(); ++it)
      if (jsonDepth(it.value(), limit - 1) > limit - 1)
        return it.key();
  return std::nullopt;
}

} // namespace moe::rt

#endif
