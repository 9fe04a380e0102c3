//===- Limits.h - how far a template may nest, recurse and grow -*- C++ -*-===//
//
// The parser and the evaluator recurse, so every nesting a template or its
// values can reach is counted and refused past a limit, before the next
// level is entered: an error naming the limit and its line:column, never a
// stack overflow. jinja2 has the same limits in effect, set by Python's
// recursion limit of 1000; each of ours is at or above what jinja2 reaches
// (measured with jinja2 3.1.6) and far below what a thread's stack holds:
// docs/robustness.md "Nesting limits" has both sets of figures.
//
// The context's JSON is bounded before it becomes values, by kMaxJsonDepth
// (moe/runtime/JsonDepth.h).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_TEXT_CHAT_LIMITS_H
#define MOE_RUNTIME_TEXT_CHAT_LIMITS_H

#include <cstddef>
#include <cstdint>

namespace moe::rt::chat {

/// The parser's own recursion, one count for all of its kinds: statements
/// inside blocks, brackets (of calls, subscripts and literals too) inside
/// brackets, `not`, `-` and `+` before an operand, `else` of an inline if.
/// jinja2 stops at 98 nested blocks (20 for loops) and 69 nested
/// parentheses.
inline constexpr int kMaxTemplateNesting = 128;

/// The height of one expression's tree, which grows without parser
/// recursion along chains (`a + b + c`, `x|f|g`, `a.b.c`) and which the
/// evaluator walks recursively. jinja2 stops at 490 chained `+` and 327
/// chained filters.
inline constexpr int kMaxExpressionHeight = 512;

/// Statements and expressions being evaluated inside one another, macro
/// calls included: what bounds a macro that calls itself. Room for the
/// deepest template that parses (kMaxTemplateNesting blocks around an
/// expression kMaxExpressionHeight high), and for 340 calls of a macro
/// whose body is an if and a print, where jinja2 stops at 197.
inline constexpr int kMaxRenderDepth = 1024;

/// Values inside values, as printing, comparing and tojson walk them. A
/// context value nests at most kMaxJsonDepth; deeper values only come from
/// a template that builds them, e.g. in a loop. jinja2 stops near 990.
inline constexpr int kMaxValueDepth = 512;

/// The longest string a render builds, its output included. A template can
/// build a huge string from a short input (`'x' * 10**12`, a string doubled
/// in a loop): each string is checked before it is built or as it grows.
/// The longest contexts (1M tokens) are about 4 MiB of text.
inline constexpr size_t kMaxTextBytes = size_t(32) << 20;

/// The most items a list built by a render may hold (`range()`, `[x] * n`,
/// `a + b`). jinja2's sandbox stops `range()` at 100,000.
inline constexpr int64_t kMaxListItems = 1000000;

// The checks are inline and small, and their failures, which build the
// messages, are out of line (Limits.cpp): the recursive functions that
// check keep small frames.

[[noreturn]] void failTemplateNesting(size_t offset);
[[noreturn]] void failExpressionHeight(size_t offset);
[[noreturn]] void failRenderDepth(size_t offset);
[[noreturn]] void failValueDepth(size_t offset);
/// `bytes` and `items` may be saturated at UINT64_MAX by a product that overflowed.
[[noreturn]] void failTextBytes(uint64_t bytes, size_t offset);
[[noreturn]] void failListItems(uint64_t items, size_t offset);

/// Fails unless a walk over values may enter one more container: `level`
/// counts the containers entered so far, this one included.
inline void checkValueDepth(int level, size_t offset) {
  if (level > kMaxValueDepth)
    failValueDepth(offset);
}

/// Fails when a string of `bytes` would be longer than kMaxTextBytes.
inline void checkTextBytes(uint64_t bytes, size_t offset) {
  if (bytes > kMaxTextBytes)
    failTextBytes(bytes, offset);
}

/// Fails when a list of `items` would hold more than kMaxListItems.
inline void checkListItems(uint64_t items, size_t offset) {
  if (items > static_cast<uint64_t>(kMaxListItems))
    failListItems(items, offset);
}

} // namespace moe::rt::chat

#endif
