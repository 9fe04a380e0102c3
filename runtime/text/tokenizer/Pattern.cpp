//===- Pattern.cpp - literal and PCRE2 patterns, matched as onig does -----===//
#include "Pattern.h"

#include "Unicode.h"

#include <optional>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace moe::rt::tok {

struct Pattern::Compiled {
  pcre2_code *code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

Pattern::Pattern() = default;
Pattern::Pattern(Pattern &&) noexcept = default;
Pattern &Pattern::operator=(Pattern &&) noexcept = default;
Pattern::~Pattern() = default;

Expected<Pattern> Pattern::literal(std::string text) {
  Pattern p;
  p.literal_ = std::move(text);
  return p;
}

// The White_Space property, as a class body.
constexpr const char *WhiteSpace =
    "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

std::string translateOniguruma(std::string_view pattern) {
  std::string out;
  bool inClass = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c != '\\' || i + 1 == pattern.size()) {
      if (c == '[')
        inClass = true;
      else if (c == ']')
        inClass = false;
      out += c;
      continue;
    }
    char e = pattern[++i];
    bool hex4 = i + 4 < pattern.size();
    if (e == 'u' && hex4 &&
        pattern.substr(i + 1, 4).find_first_not_of("0123456789abcdefABCDEF") == std::string_view::npos) {
      out += "\\x{" + std::string(pattern.substr(i + 1, 4)) + "}";
      i += 4;
    } else if (e == 's' || (e == 'S' && !inClass)) {
      // Oniguruma's \s is White_Space; PCRE2's adds U+180E. (\S inside a
      // class stays PCRE2's.)
      out += inClass ? WhiteSpace : e == 's' ? "[" + std::string(WhiteSpace) + "]"
                                             : "[^" + std::string(WhiteSpace) + "]";
    } else if (e == 'h') { // Oniguruma: a hex digit; PCRE2: horizontal space
      out += inClass ? "0-9a-fA-F" : "[0-9a-fA-F]";
    } else if (e == 'H' && !inClass) {
      out += "[^0-9a-fA-F]";
    } else {
      out += '\\';
      out += e;
    }
  }
  return out;
}

Expected<Pattern> Pattern::regex(const std::string &oniguruma, const std::string &where) {
  std::string translated = translateOniguruma(oniguruma);
  int error = 0;
  PCRE2_SIZE offset = 0;
  // Ruby syntax (the onig default): ^ and $ match at line boundaries.
  pcre2_code *code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()),
                                   translated.size(), PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE,
                                   &error, &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    return Status::error("tokenizer.json: " + where + " regex \"" + oniguruma +
                         "\" does not compile: " + reinterpret_cast<char *>(message) +
                         " at offset " + std::to_string(offset));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE); // without JIT, pcre2_match interprets
  Pattern p;
  p.regex_ = std::make_unique<Compiled>();
  p.regex_->code = code;
  return p;
}

Spans Pattern::findMatches(std::string_view text) const {
  if (text.empty())
    return {{0, 0, false}};
  std::vector<std::pair<size_t, size_t>> found;
  if (!regex_) {
    if (literal_.empty())
      return {{0, text.size(), false}};
    for (size_t at = text.find(literal_); at != std::string_view::npos;
         at = text.find(literal_, at + literal_.size()))
      found.emplace_back(at, at + literal_.size());
  } else {
    pcre2_match_data *data = pcre2_match_data_create_from_pattern(regex_->code, nullptr);
    auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    // The onig crate's find_iter: an empty match right where the previous
    // match ended is skipped by moving one character on.
    size_t lastEnd = 0;
    std::optional<size_t> lastMatchEnd;
    while (lastEnd <= text.size()) {
      int rc = pcre2_match(regex_->code, subject, text.size(), lastEnd, PCRE2_NO_UTF_CHECK, data, nullptr);
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
        rc = pcre2_match(regex_->code, subject, text.size(), lastEnd, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                         data, nullptr);
      if (rc < 0)
        break;
      PCRE2_SIZE *ov = pcre2_get_ovector_pointer(data);
      size_t s = ov[0], e = ov[1];
      if (s == e && lastMatchEnd == e) {
        lastEnd += lastEnd < text.size() ? utf8Length(text, lastEnd) : 1;
        continue;
      }
      lastEnd = lastMatchEnd.emplace(e);
      found.emplace_back(s, e);
    }
    pcre2_match_data_free(data);
  }
  Spans spans;
  size_t prev = 0;
  for (auto [s, e] : found) {
    if (prev != s)
      spans.push_back({prev, s, false});
    spans.push_back({s, e, true});
    prev = e;
  }
  if (prev != text.size())
    spans.push_back({prev, text.size(), false});
  return spans;
}

std::string Pattern::replaceAll(std::string_view text, std::string_view content) const {
  std::string out;
  for (const Span &span : findMatches(text))
    if (span.match)
      out += content;
    else
      out += text.substr(span.begin, span.end - span.begin);
  return out;
}

} // namespace moe::rt::tok
