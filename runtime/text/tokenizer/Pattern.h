//===- Pattern.h - the String | Regex patterns of tokenizer.json -*- C++ -*-===//
//
// Split pre-tokenizers and Replace normalizers/decoders name a pattern that
// is either a literal string or an Oniguruma regex. Regexes are compiled
// with PCRE2 (UTF, Unicode properties, JIT) after translating the few
// Oniguruma-only escapes; matches are enumerated as the `onig` crate does,
// so empty matches and restarts land where Hugging Face's do.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_TEXT_TOKENIZER_PATTERN_H
#define MOE_RUNTIME_TEXT_TOKENIZER_PATTERN_H

#include "moe/abi/Status.h"

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace moe::rt::tok {

/// [begin, end) byte offsets and whether the span is a match; the spans tile
/// the text, as `Pattern::find_matches` returns them.
struct Span {
  size_t begin, end;
  bool match;
};
using Spans = std::vector<Span>;

class Pattern {
public:
  static Expected<Pattern> literal(std::string text);
  /// `where` names the component in errors.
  static Expected<Pattern> regex(const std::string &oniguruma, const std::string &where);
  Pattern(Pattern &&) noexcept;
  Pattern &operator=(Pattern &&) noexcept;
  ~Pattern();

  Spans findMatches(std::string_view text) const;
  /// Every match replaced by `content` (the Replace normalizer and decoder).
  std::string replaceAll(std::string_view text, std::string_view content) const;

private:
  Pattern();
  struct Compiled;
  std::string literal_;
  std::unique_ptr<Compiled> regex_; ///< null for a literal
};

/// The Oniguruma (Ruby syntax) pattern rewritten for PCRE2: `\uHHHH`,
/// `\h`/`\H` (hex digit) and `\s`/`\S` (White_Space) have other meanings
/// or none in PCRE2.
std::string translateOniguruma(std::string_view pattern);

} // namespace moe::rt::tok

#endif
